"""Bytes <-> batches for one buffer or one file (Kafka's `clients/.../common/record`): record batches
and `MemoryRecords` (batch), legacy magic 0/1 message sets (legacy), control records (control), the
builder (builder), codecs (compression) and the file reader with its window scan (file_records).

Imports only the base modules (errors, _wire, _typing, _backend and the kernels) and kbatch.schema.
"""
