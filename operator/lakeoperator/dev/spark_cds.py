"""`make spark-cds` (python -m lakeoperator.dev.spark_cds): dump the class-data-sharing archive local Spark
drivers map (sparkjobs/driver_jvm.py says what it is and who maps it) into .tools/spark-cds/, once per JDK,
pyspark and connectors: one driver started as `weir run` and the process kubelet start theirs
(spark-submit; pyspark's jars, then the connectors on SPARK_DIST_CLASSPATH) runs a writer's kind of work
and writes the classes it loaded at exit (~45 s, ~180 MB). Nothing when the archive is there; older
archives are removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sparkjobs.driver_jvm import CACHE, FAST_START_FLAGS, archive_path
from sparkjobs.jars import classpath

# What a writer's driver does: Python workers, Arrow, Parquet written and read back, a shuffle.
WORKLOAD = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("weir-spark-cds").getOrCreate()
df = spark.range(2000).selectExpr("id", "cast(id % 7 as string) as k", "id * 0.5 as v")
df = df.mapInArrow(lambda batches: (b for b in batches), df.schema)
df.groupBy("k").agg({"v": "sum"}).collect()
df.write.mode("overwrite").parquet(sys.argv[1])
spark.read.parquet(sys.argv[1]).where("id > 5").toPandas()
spark.stop()
"""


def build() -> Path:
    """Dump the archive (if it is not there yet) from one driver running WORKLOAD."""
    archive = archive_path()
    if archive is None:
        raise SystemExit("spark-cds: needs pyspark and java")
    if archive.is_file():
        return archive
    submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent))
    if submit is None:
        raise SystemExit("spark-cds: spark-submit not found next to this Python")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="spark-cds-") as work:
        job, partial = Path(work) / "job.py", archive.with_suffix(f".{os.getpid()}.partial")
        job.write_text(WORKLOAD)
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DIST_CLASSPATH": classpath(),
               "SPARK_SUBMIT_OPTS": f"{FAST_START_FLAGS} -XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off"}
        done = subprocess.run([submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(job),
                               str(Path(work) / "out")], env=env, cwd=work, capture_output=True, text=True,
                              timeout=600, check=False)
        if done.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            raise SystemExit(f"spark-cds: the dumping driver failed ({done.returncode}):\n"
                             f"{done.stderr[-3000:]}")
        partial.rename(archive)
    for stale in CACHE.glob("driver-*.jsa"):   # an older JDK's or pyspark's: ~180 MB no JVM maps any more
        if stale != archive:
            stale.unlink(missing_ok=True)
    return archive


if __name__ == "__main__":
    try:
        print(f"spark-cds: {build()}")
    except SystemExit as failed:   # only a speed-up: drivers start without it (the tests' guard says so)
        print(f"{failed}\nspark-cds: no archive; Spark drivers start without one", file=sys.stderr)
