"""PySpark entry points for Weir: writers (batch and streaming), table-service jobs and the `weir` DataSource.

The only place pyspark is imported. `sparkjobs.contract` is the exception: it is standard library only, so
the operator can build job commands without importing Spark.
"""
