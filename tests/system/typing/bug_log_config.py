import kbatch

cfg = kbatch.LogConfig(segment_size=1 << 20)  # E: call-arg
