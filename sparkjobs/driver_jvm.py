"""How a local Spark driver's JVM starts sooner: the class-data-sharing archive and the fast-start flags.

Standard library only: the operator's local launcher (`weir run`, the demo) reads it, without pyspark.

The archive is a JDK 17 dynamic class-data-sharing archive of the classes a local driver loads, dumped
once per JDK, pyspark and connectors by `make spark-cds` (lakeoperator/dev/spark_cds.py) into the
checkout's .tools/spark-cds/. A driver JVM that maps it does not read and verify those classes again
from ~250 jars: on a 2-core machine a driver starts in ~9 s instead of ~14 s, with no cost once it
runs (the JIT and the collector are unchanged). The JVM maps it only for a class path that starts with
the one it was dumped with (pyspark's jars, then the connectors of sparkjobs.jars), whose jars have the
same size and mtime; any other JVM ignores it without a word (`-Xshare:auto`, its cds logging off). The
file's name is a hash of the JDK and the jars, so a new JDK or pyspark means a new archive, never a
wrong one. Without an archive (an installed copy, no `make spark-cds`) nothing is added.

The fast-start flags (C1 only, one GC thread) halve a small job's start and run again; they are for
short jobs on small data (the demo, the tests), not for long-running writers, whose steady state C2
compiles faster.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from pathlib import Path

from sparkjobs.jars import classpath

ROOT = Path(__file__).resolve().parents[1]          # the checkout (sparkjobs/driver_jvm.py)
CACHE = ROOT / ".tools" / "spark-cds"
# C1 only and one GC thread: what the archive is dumped with, and what short jobs run with
FAST_START_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
USE_FLAGS = "-Xshare:auto -Xlog:cds*=off"   # a JVM the archive does not fit starts without it, quietly


def _spark_home() -> Path | None:
    """pyspark's directory (not imported: only its jars are needed); None without pyspark."""
    found = importlib.util.find_spec("pyspark")
    return Path(found.origin).parent if found is not None and found.origin else None


def _java() -> Path | None:
    """The java that spark-submit runs ($JAVA_HOME's, else the one on PATH), resolved; None if none."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).is_file() else None


def archive_path() -> Path | None:
    """Where the archive for this JDK, pyspark and connectors is (or would be); None without Spark or java."""
    home, jvm = _spark_home(), _java()
    if home is None or jvm is None:
        return None
    digest = hashlib.sha256(f"{jvm} {jvm.stat().st_mtime_ns} {FAST_START_FLAGS}".encode())
    connectors = [Path(p) for p in classpath().split(os.pathsep) if p]
    jars = sorted((home / "jars").glob("*.jar")) + connectors
    try:
        for jar in jars:
            stat = jar.stat()
            digest.update(f"{jar} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    except OSError:   # a jar went away while we looked: no archive fits
        return None
    return CACHE / f"driver-{digest.hexdigest()[:16]}.jsa"


def archive_options() -> str:
    """The JVM options that map the archive when it is there, else empty."""
    archive = archive_path()
    if archive is None or not archive.is_file():
        return ""
    return f"-XX:SharedArchiveFile={archive} {USE_FLAGS}"


def submit_options(*, fast_start: bool) -> str:
    """SPARK_SUBMIT_OPTS for a local driver: the archive when it is there, the fast-start flags with
    `fast_start` (empty when neither)."""
    return " ".join(part for part in (FAST_START_FLAGS if fast_start else "", archive_options()) if part)
