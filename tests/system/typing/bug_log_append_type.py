import kbatch

log = kbatch.Log.create("orders-0", kbatch.LogConfig())
log.append([b"batch"], now_ms=0)  # E: arg-type
