from pyspark.sql import SparkSession

import kbatch.spark

spark = SparkSession.builder.getOrCreate()
# the reader is named ("auto", "jvm" or "python"), not switched on with a flag
print(kbatch.spark.register(spark, reader=True))  # E: arg-type
