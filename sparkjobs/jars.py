"""Where local Spark finds the connector jars Weir's writers need (the Kafka source, Avro values, s3a://).

Standard library only: the operator's local launcher (`weir run`) reads it to put them on spark-submit's
classpath, without pyspark. The jars are fetched from Maven Central by images/spark/jars/pom.xml: into
.tools/spark-jars/<version>/ by `make spark-jars` for local Spark (this checkout), into pyspark's own jars
directory in the Spark image (where nothing here is needed: `connector_jars()` finds none and adds none).
`WEIR_SPARK_JARS` names another directory. Must not fetch anything.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

JARS_ENV = "WEIR_SPARK_JARS"
ROOT = Path(__file__).resolve().parents[1]          # the checkout (sparkjobs/jars.py)
POM = ROOT / "images" / "spark" / "jars" / "pom.xml"


def connectors_version(pom: Path = POM) -> str | None:
    """The Spark release of the connectors the pom pins (None without a checkout's pom)."""
    try:
        found = re.search(r"<spark\.connectors\.version>([^<]+)<", pom.read_text())
    except OSError:
        return None
    return found.group(1).strip() if found else None


def jars_dir() -> Path | None:
    """$WEIR_SPARK_JARS, else the checkout's .tools/spark-jars/<version> (None: no pom, an installed copy)."""
    if os.environ.get(JARS_ENV):
        return Path(os.environ[JARS_ENV])
    version = connectors_version()
    return ROOT / ".tools" / "spark-jars" / version if version else None


def connector_jars() -> list[str]:
    """The connector jars for local Spark, sorted (empty when there are none here)."""
    folder = jars_dir()
    return sorted(str(p) for p in folder.glob("*.jar")) if folder is not None and folder.is_dir() else []


def connectors_missing_reason() -> str | None:
    """Why local Spark cannot read Kafka or s3a:// here, or None if it can."""
    jars = [Path(j).name for j in connector_jars()]
    if not any(j.startswith("spark-sql-kafka") for j in jars):
        return (f"Spark's connector jars are not in {jars_dir()}; run `make spark-jars` (Maven fetches them "
                "once)")
    return None


def classpath() -> str:
    """The connector jars as one classpath (`:`-separated), empty when there are none."""
    return os.pathsep.join(connector_jars())
