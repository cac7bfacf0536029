"""Bytes <-> Arrow: `decode_columns` (decode), `encode_columns` (encode) and the partitioner that routes
rows to partitions as Kafka's producer does (partitioner). Imports the record layer and below."""
