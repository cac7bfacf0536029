import kbatch

b = kbatch.BatchBuilder()
b.append("1700000000000", b"key", b"value")  # E: arg-type
