import pyarrow as pa

import kbatch

table = pa.table({"value": [b"v"]})
# the codec is a kbatch.Compression, not its name
data = kbatch.encode_columns(table, compression="lz4")  # E: arg-type
