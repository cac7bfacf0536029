"""Spark's automatic discovery hook for kbatch's `kafka-segments` data source.

PySpark (>= 4.0) imports every top-level module whose name starts with `pyspark_` and registers
its `DefaultSource` (a DataSource subclass) under `DefaultSource.name()`, so with kbatch installed
`spark.read.format("kafka-segments")` works without calling kbatch.spark.register(spark).
"""
from kbatch.spark.datasource import KafkaSegmentsDataSource as DefaultSource

__all__ = ["DefaultSource"]
