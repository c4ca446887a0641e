"""The Spark image and local Spark take their connectors (Kafka source, Avro, s3a) from one pinned pom,
images/spark/jars/pom.xml: hadoop-aws of the Hadoop release pyspark ships, connectors of pyspark's Spark line,
the image fetches that pom into pyspark's jars directory, and no fetched jar duplicates one pyspark ships."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark

from sparkjobs.jars import POM, connector_jars, connectors_version
from tests.images.dockerfile import read
from tests.support.fixtures import require_spark_connectors

ROOT = Path(__file__).resolve().parents[2]
PYSPARK_JARS = Path(pyspark.__file__).parent / "jars"


def artifact(jar: str) -> str:
    """`hadoop-aws-3.5.0.jar` -> `hadoop-aws`."""
    return re.sub(r"-\d+\.\d+[\w.\-]*\.jar$", "", Path(jar).name)


def test_hadoop_aws_is_pysparks_hadoop_and_the_connectors_pysparks_spark_line():
    hadoop = re.search(r"<hadoop\.version>([^<]+)<", POM.read_text())
    shipped = sorted(PYSPARK_JARS.glob("hadoop-client-api-*.jar"))
    assert hadoop and shipped and shipped[0].name == f"hadoop-client-api-{hadoop.group(1)}.jar"
    version = connectors_version()
    assert version is not None
    ours = tuple(int(p) for p in version.split("."))
    theirs = tuple(int(p) for p in pyspark.__version__.split(".")[:3])
    # pyspark's own release when Maven Central has it; otherwise the newest one before it (the pom says why)
    assert ours == theirs or (ours[0] == theirs[0] and ours < theirs and "not on" in POM.read_text())


def test_the_image_fetches_the_same_pom_into_pysparks_jars():
    build = read(ROOT / "images" / "spark" / "Dockerfile").stages[0]
    runs = " ".join(r.args for r in build.all("RUN"))
    assert "mvn -C" in runs and "-f /src/images/spark/jars/pom.xml" in runs
    assert "-DoutputDirectory=/opt/weir/venv/lib/python3.11/site-packages/pyspark/jars" in runs


def test_no_connector_jar_duplicates_one_pyspark_ships():
    require_spark_connectors()
    shipped = {artifact(j.name) for j in PYSPARK_JARS.glob("*.jar")}
    fetched = {artifact(j) for j in connector_jars()}
    wanted = {"spark-sql-kafka-0-10_2.13", "kafka-clients", "spark-avro_2.13", "hadoop-aws", "bundle"}
    assert wanted <= fetched
    assert not fetched & shipped
