import kbatch

data = kbatch.build_batch([(0, b"k", b"v")])
# the partition column is an int: a topic-partition string does not go there
table = kbatch.decode_columns(data, "orders", "orders-0")  # E: arg-type
