"""Bytes <-> batches for one buffer or one file (Kafka's `clients/.../common/record`): record batches
and `MemoryRecords` (batch), legacy magic 0/1 message sets (legacy), control records (control), the
builder (builder), codecs (compression) and the file reader with its window scan (file_records).

Imports only the base modules (errors, _wire, _typing, _backend and the kernels) and kbatch.schema.

Other packages come in through public names only (tests/system/test_layers.py): a scan's windows
from FileRecords.headers / file_records.iter_headers (a HeaderScan: loop, then `end` and `error`
say where it stopped), the batch at a row of a window (file_records.batch_at, crc_error_at), and
file_records' WINDOW / FIRST_WINDOW, shift_error, as_window, epoch_or_none.
"""
