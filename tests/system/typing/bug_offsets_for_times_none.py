import kbatch

log = kbatch.Log.open("orders-0")
print(log.offsets_for_times([1_700_000_000_000])[0].offset)  # E: union-attr
