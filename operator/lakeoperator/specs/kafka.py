"""A LakeWriter's `source.kafka`: its fields and defaults (crds/weir.dev_lakewriters.yaml declares the same),
and `parse_kafka`, which checks the rules the CRD states in CEL again — through the job contract's own
checks (sparkjobs.contract.KafkaArgs), so the operator and the job never disagree about them.

Must not: talk to Kubernetes, read the credentials Secret, or decide anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from lakeoperator.specs.common import Fields, SpecError
from lakeoperator.specs.table import SecretKeyRef
from sparkjobs.contract import KafkaArgs

ValueFormat = Literal["json", "avro", "debezium"]
BadRecordsPolicy = Literal["fail", "skip", "deadLetter"]
StartingOffsets = Literal["earliest", "latest"]
OnDataLoss = Literal["fail", "skip"]


@dataclass(frozen=True)
class KafkaSourceSpec:
    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting_offsets: StartingOffsets = "earliest"
    max_offsets_per_trigger: int | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    credentials: SecretKeyRef | None = None
    value_format: ValueFormat = "json"
    avro_schema: str | None = None
    schema_registry_url: str | None = None            # format avro, Confluent-framed values
    schema_registry_credentials: SecretKeyRef | None = None
    bad_records: BadRecordsPolicy = "fail"
    dead_letter_topic: str | None = None
    dead_letter_table: str | None = None
    on_data_loss: OnDataLoss = "fail"

    def args(self, credentials_env: str | None, registry_auth_env: str | None = None) -> KafkaArgs:
        """The job's Kafka arguments; the credentials reach it as the variable `credentials_env`, the schema
        registry's as `registry_auth_env`."""
        return KafkaArgs(
            kafka_bootstrap_servers=self.bootstrap_servers, kafka_topics=self.topics,
            kafka_topic_pattern=self.topic_pattern, kafka_starting_offsets=self.starting_offsets,
            kafka_max_offsets_per_trigger=self.max_offsets_per_trigger, kafka_options=dict(self.options),
            kafka_options_env=credentials_env if self.credentials is not None else None,
            value_format=self.value_format, avro_schema=self.avro_schema,
            schema_registry_url=self.schema_registry_url,
            schema_registry_auth_env=registry_auth_env if self.schema_registry_credentials else None,
            bad_records=self.bad_records,
            dead_letter_topic=self.dead_letter_topic, dead_letter_table=self.dead_letter_table,
            kafka_on_data_loss=self.on_data_loss)


KAFKA_FIELDS = ("bootstrapServers", "topics", "topicPattern", "startingOffsets", "maxOffsetsPerTrigger",
                "options", "credentialsSecretRef", "value", "badRecords", "onDataLoss")


def _secret_key_ref(f: Fields) -> SecretKeyRef | None:
    if not f.has("credentialsSecretRef"):
        return None
    c = f.sub("credentialsSecretRef", ("name", "key"))
    return SecretKeyRef(name=c.req_str("name"), key=c.req_str("key"))


def parse_kafka(f: Fields) -> KafkaSourceSpec:
    """`spec.source.kafka` -> KafkaSourceSpec; SpecError naming the field when it breaks a rule."""
    credentials = _secret_key_ref(f)
    v = f.sub("value", ("format", "avroSchema", "schemaRegistry"))
    r = v.sub("schemaRegistry", ("url", "credentialsSecretRef")) if v.has("schemaRegistry") else None
    b = f.sub("badRecords", ("policy", "deadLetterTopic", "deadLetterTable"))
    spec = KafkaSourceSpec(
        bootstrap_servers=f.req_str("bootstrapServers"), topics=f.strings("topics"),
        topic_pattern=f.text("topicPattern", None),
        starting_offsets=f.enum("startingOffsets", StartingOffsets, "earliest"),
        max_offsets_per_trigger=f.opt_int("maxOffsetsPerTrigger", minimum=1), options=f.string_map("options"),
        credentials=credentials, value_format=v.enum("format", ValueFormat, "json"),
        avro_schema=v.text("avroSchema", None), schema_registry_url=r.req_str("url") if r else None,
        schema_registry_credentials=_secret_key_ref(r) if r else None,
        bad_records=b.enum("policy", BadRecordsPolicy, "fail"),
        dead_letter_topic=b.text("deadLetterTopic", None), dead_letter_table=b.text("deadLetterTable", None),
        on_data_loss=f.enum("onDataLoss", OnDataLoss, "fail"))
    try:
        # the job's own rules: one of topics/pattern, no secret options, one Avro schema source, ...
        spec.args("WEIR_KAFKA_OPTIONS", "WEIR_SCHEMA_REGISTRY_AUTH")
    except ValueError as exc:
        raise SpecError(f.path, f"{exc} (in the spec: topics/topicPattern, options, value.avroSchema, "
                        "value.schemaRegistry, badRecords)") from None
    return spec
