"""The SparkSession the jobs run in: the one spark-submit made, or a local one (the embedded default)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from sparkjobs.jars import classpath

# Settings every Weir job relies on: Arrow batches between the JVM and Python (the jobs hand Arrow
# tables to lakecore), and shuffles no wider than needed for file-group repartitioning.
JOB_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
}


def local_session(app_name: str, *, cores: int = 2, work_dir: str | None = None,
                  task_attempts: int = 1) -> SparkSession:
    """A local Spark (no UI, loopback only, `cores` task slots, each task tried `task_attempts` times)."""
    builder = (SparkSession.builder.master(f"local[{cores},{task_attempts}]").appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", str(max(2, cores * 2)))
               .config("spark.default.parallelism", str(max(2, cores * 2))))
    if work_dir:
        builder = builder.config("spark.local.dir", work_dir).config("spark.sql.warehouse.dir", work_dir)
    extra = classpath()
    if extra:  # the connectors (Kafka, Avro, s3a): on the JVM's classpath, not shipped like spark.jars
        builder = builder.config("spark.driver.extraClassPath", extra)
    for key, value in JOB_CONF.items():
        builder = builder.config(key, value)
    return _with_weir(builder.getOrCreate())


def _with_weir(spark: SparkSession) -> SparkSession:
    """Register the `weir` data source (spark.read.format("weir"))."""
    from sparkjobs.datasource import register

    register(spark)
    return spark


def job_session(app_name: str) -> SparkSession:
    """The session of a job: spark-submit's if one launched us (its master and resources), else a
    local one with every core of this machine."""
    import os

    active = SparkSession.getActiveSession()
    if active is not None:
        return _with_weir(active)
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # spark-submit started the JVM and then us
        builder = SparkSession.builder.appName(app_name)
        for key, value in JOB_CONF.items():
            builder = builder.config(key, value)
        return _with_weir(builder.getOrCreate())
    return local_session(app_name, cores=os.cpu_count() or 2)


def driver_endpoint(spark: SparkSession) -> tuple[str, str]:
    """(bind address, host) of the Spark driver: where its own endpoints listen and the name
    executors reach it by (`spark.driver.bindAddress`, default `spark.driver.host`; on Kubernetes the
    pod's IP and its headless service). Services the driver runs for its tasks listen there too."""
    conf = spark.sparkContext.getConf()
    host = conf.get("spark.driver.host") or "127.0.0.1"
    return conf.get("spark.driver.bindAddress") or host, host
