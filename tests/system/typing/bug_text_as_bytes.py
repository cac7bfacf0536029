import kbatch

# a path is fine for iter_batches (it reads the file), but MemoryRecords wants the bytes themselves
records = kbatch.MemoryRecords("00000000000000000000.log")  # E: arg-type
