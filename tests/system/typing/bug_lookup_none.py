import kbatch

log = kbatch.Log.open("orders-0")
print(log.offset_for(kbatch.EARLIEST).offset)  # E: union-attr
