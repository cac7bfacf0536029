import kbatch

b = kbatch.BatchBuilder(compression=kbatch.TimestampType.LOG_APPEND_TIME)  # E: arg-type
