"""A Kafka source's schema registry: the job's arguments take it only with value format avro and instead of
an inline schema, by an http(s) URL that carries no password (credentials come by a variable's name); the
client asks the real registry for a schema id and tells an unknown id (its messages are bad), a schema that
is not Avro, and a URL that is not the registry's Confluent API (bad input) apart."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from lakecore.errors import InvalidInput
from sparkjobs.contract import KafkaArgs
from sparkjobs.kafka.registry import SchemaRegistry, WriterSchema, auth_header
from tests.support.schema_registry import SchemaRegistry as RegistryServer

pytestmark = [pytest.mark.registry]
SOURCE = {"kafka_bootstrap_servers": "k:9092", "kafka_topics": ("t",)}
AVRO = {"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"}]}


@pytest.mark.parametrize(("given", "said"), [
    ({"value_format": "avro"}, "exactly one"),
    ({"value_format": "avro", "avro_schema": "{}", "schema_registry_url": "http://r:8081"}, "exactly one"),
    ({"value_format": "json", "schema_registry_url": "http://r:8081"}, "other formats neither"),
    ({"value_format": "avro", "schema_registry_url": "registry:8081"}, "is not an http:// or https:// URL"),
    ({"value_format": "avro", "schema_registry_url": "http://r:8081", "schema_registry_auth_env": "a=b"},
     "takes the NAME of an environment variable"),
    ({"value_format": "avro", "avro_schema": "{}", "schema_registry_auth_env": "AUTH"},
     "with --schema-registry-url"),
])
def test_the_registry_arguments_are_refused_when_they_contradict(given, said):
    with pytest.raises(ValueError, match=said):
        KafkaArgs(**SOURCE, **given)


def test_a_registry_url_with_a_password_is_refused_without_echoing_it():
    with pytest.raises(ValueError, match="must not carry credentials") as refused:
        KafkaArgs(**SOURCE, value_format="avro", schema_registry_url="https://me:s3cret@r:8081/x")
    assert "s3cret" not in str(refused.value)


def test_a_registry_source_takes_its_credentials_by_a_variables_name(monkeypatch):
    args = KafkaArgs(**SOURCE, value_format="avro", schema_registry_url="https://r:8081/api",
                     schema_registry_auth_env="REGISTRY_AUTH")
    assert KafkaArgs.from_argv(args.to_argv()) == args
    assert auth_header("me:pw") == "Basic bWU6cHc="
    with pytest.raises(InvalidInput, match="not user:password"):
        auth_header("a-token")
    monkeypatch.delenv("REGISTRY_AUTH", raising=False)
    with pytest.raises(InvalidInput, match=r"the variable REGISTRY_AUTH \(.*\) is not set"):
        SchemaRegistry("https://r:8081/api", "REGISTRY_AUTH")


def register(server: RegistryServer, subject: str, body: dict) -> int:
    request = urllib.request.Request(f"{server.url}/subjects/{subject}/versions", method="POST",
                                      data=json.dumps(body).encode(),
                                      headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(json.loads(response.read())["id"])


def test_the_client_tells_a_schema_an_unknown_id_and_a_wrong_url_apart(schema_registry):
    avro = schema_registry.register("checked-avro-value", AVRO)
    proto = register(schema_registry, "checked-proto-value",
                     {"schemaType": "PROTOBUF", "schema": 'syntax = "proto3"; message M { int64 id = 1; }'})
    client = SchemaRegistry(schema_registry.url + "/")
    found = client.schemas([avro, proto, 424242])
    assert json.loads(found[avro].schema or "") == AVRO and found[avro].problem is None
    assert found[proto] == WriterSchema(proto, problem=f"schema id {proto} is a PROTOBUF schema, not Avro")
    assert found[424242] == WriterSchema(424242, problem="schema id 424242 is not in the schema registry")
    root = schema_registry.url.removesuffix("/apis/ccompat/v6")
    said = f"is {re.escape(root)} the base URL of a Confluent-compatible schema registry"
    with pytest.raises(InvalidInput, match=said):
        SchemaRegistry(root).schemas([avro])
