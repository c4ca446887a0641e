"""The tests' Spark drivers start fast: every driver a test starts gets SPARK_SUBMIT_OPTS with the fast-start
flags and the class-data-sharing archive of `make spark-cds` when it is there (sparkjobs/driver_jvm.py;
dumped by lakeoperator/dev/spark_cds.py): a driver starts and runs a test's small jobs in about half the
time. Without an archive only the flags."""

from __future__ import annotations

from sparkjobs import driver_jvm

archive_path = driver_jvm.archive_path

__all__ = ["archive_path", "submit_options"]


def submit_options() -> str:
    """SPARK_SUBMIT_OPTS for the tests' drivers: the fast-start flags, and the archive when it is there."""
    return driver_jvm.submit_options(fast_start=True)
