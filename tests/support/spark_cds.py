"""A class-data-sharing archive for the tests' Spark drivers: the classes a local driver loads, dumped once
by `make spark-cds` (python -m tests.support.spark_cds) into .tools/spark-cds/, then mapped by every driver
JVM instead of being read from ~250 jars and verified again: a driver starts and runs its first job 2-5 s
sooner on this 2-core machine (a quarter to a third less).

The archive is a JDK 17 dynamic archive of a driver started as `weir run` and the process kubelet start
theirs (spark-submit; pyspark's jars, then the connectors on SPARK_DIST_CLASSPATH). The JVM maps it only
for a class path that starts with the one it was dumped with, whose jars have the same size and mtime;
any other JVM (a test's in-process session, which puts the connectors first; another Spark) ignores it,
silently: its cds logging is off. The file's name is a hash of the JDK, the jars and the flags, so a new
JDK or pyspark means a new archive, never a wrong one. Without an archive nothing changes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".tools" / "spark-cds"
# the dumping JVM and every JVM that maps the archive run with these (tests/support/fixtures.py)
JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
USE_FLAGS = "-Xshare:auto -Xlog:cds*=off"   # a JVM the archive does not fit starts without it, quietly

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


def _spark_home() -> Path | None:
    found = importlib.util.find_spec("pyspark")   # not imported: the archive's name needs only its jars
    return Path(found.origin).parent if found is not None and found.origin else None


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).is_file() else None


def driver_class_path() -> str:
    """The connectors the launcher adds after pyspark's jars (sparkjobs.jars)."""
    from sparkjobs.jars import classpath

    return classpath()


def archive_path() -> Path | None:
    """Where the archive for this JDK, pyspark and connectors is (or would be); None without Spark or java."""
    home, java = _spark_home(), _java()
    if home is None or java is None:
        return None
    digest = hashlib.sha256(f"{java} {java.stat().st_mtime_ns} {JVM_FLAGS}".encode())
    connectors = [Path(p) for p in driver_class_path().split(os.pathsep) if p]
    jars = sorted((home / "jars").glob("*.jar")) + connectors
    try:
        for jar in jars:
            stat = jar.stat()
            digest.update(f"{jar} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    except OSError:   # a jar went away while we looked: no archive fits
        return None
    return CACHE / f"driver-{digest.hexdigest()[:16]}.jsa"


def submit_options() -> str:
    """SPARK_SUBMIT_OPTS for the tests' drivers: the fast-start flags, and the archive when it is there."""
    archive = archive_path()
    if archive is None or not archive.is_file():
        return JVM_FLAGS
    return f"{JVM_FLAGS} -XX:SharedArchiveFile={archive} {USE_FLAGS}"


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
               "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DIST_CLASSPATH": driver_class_path(),
               "SPARK_SUBMIT_OPTS": f"{JVM_FLAGS} -XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off"}
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
    except SystemExit as failed:   # only a speed-up: the tests run without it (its guard test says so)
        print(f"{failed}\nspark-cds: no archive; Spark drivers start without one", file=sys.stderr)
