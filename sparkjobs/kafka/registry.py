"""Avro values in the Confluent wire format; their writer schemas from a Confluent-compatible schema registry.

A framed value: magic byte 0, the writer schema's id (4 bytes, big-endian), then Avro binary of that schema.

Owns: the framing as Spark SQL expressions (`framed`, `schema_id`, `body`), the distinct schema ids of a
batch (one small aggregation: a batch holds a handful), and the registry client: GET {url}/schemas/ids/{id},
each id fetched once per job (cached), basic auth from the variable --schema-registry-auth-env names
("user:password", a Secret's). A registry that does not answer is SourceUnavailable (the writer backs off
like for a broker that does not); one that refuses the credentials or is not a Confluent API at that URL is
bad input; an id it does not know, or whose schema is not Avro, makes that id's messages bad (`WriterSchema.
problem`; values.py says so per message). Must not decode or write.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakecore.errors import InvalidInput
from sparkjobs.kafka.source import SourceUnavailable

HEADER = 5                # magic byte + schema id
MAGIC = b"\x00"
TIMEOUT_S = 30
_NOT_FOUND = 40403        # the Confluent API's error_code for a schema id it does not know
_ACCEPT = "application/vnd.schemaregistry.v1+json, application/json"


def framed(value: Column) -> Column:
    """The value carries a Confluent header (magic byte 0, then a schema id); null for a null value."""
    return (F.length(value) >= HEADER) & (F.substring(value, 1, 1) == F.lit(MAGIC))


def schema_id(value: Column) -> Column:
    """The schema id of a framed value (bytes 2-5, big-endian); meaningless for one that is not framed."""
    return F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")


def body(value: Column) -> Column:
    """The Avro binary after the header."""
    return F.substring(value, F.lit(HEADER + 1), F.length(value) - HEADER)


def batch_schema_ids(messages: DataFrame) -> list[int]:
    """The distinct schema ids of a batch's framed values (one aggregation, a handful of rows back)."""
    value = F.col("value")
    rows = messages.where(framed(value)).select(schema_id(value).alias("id")).distinct().collect()
    return sorted(int(r["id"]) for r in rows)


@dataclass(frozen=True)
class WriterSchema:
    """What the registry says of one schema id: its Avro schema (JSON), else why its messages are bad."""

    id: int
    schema: str | None = None
    problem: str | None = None


def auth_header(user_info: str) -> str:
    """HTTP basic auth of Confluent's basic.auth.user.info ("user:password")."""
    if ":" not in user_info:
        raise InvalidInput("the schema registry credentials are not user:password; fix the Secret that "
                           "source.kafka.value.schemaRegistry.credentialsSecretRef names")
    return "Basic " + base64.b64encode(user_info.strip().encode()).decode()


class SchemaRegistry:
    """A Confluent-compatible registry at `url`; each schema id is fetched once (cached for the job)."""

    def __init__(self, url: str, auth_env: str | None = None, *, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.headers = {"Accept": _ACCEPT}
        if auth_env:
            user_info = os.environ.get(auth_env)
            if user_info is None:
                raise InvalidInput(f"the variable {auth_env} (the schema registry's user:password) is not "
                                   "set; expose the credentials Secret to the driver as it")
            self.headers["Authorization"] = auth_header(user_info)
        self._known: dict[int, WriterSchema] = {}

    def schemas(self, ids: Iterable[int]) -> dict[int, WriterSchema]:
        """The writer schema of each id, fetching those not seen before."""
        for i in ids:
            if i not in self._known:
                self._known[i] = self._fetch(i)
        return {i: self._known[i] for i in ids}

    def _fetch(self, schema_id: int) -> WriterSchema:
        where = f"{self.url}/schemas/ids/{schema_id}"
        request = urllib.request.Request(where, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                found = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return self._refused(schema_id, where, exc)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SourceUnavailable(f"the schema registry at {self.url} did not answer within "
                                    f"{self.timeout_s:g} s ({reason}); the writer retries with backoff — "
                                    "check the registry and source.kafka.value.schemaRegistry.url") from None
        kind = str(found.get("schemaType") or "AVRO").upper()
        if kind != "AVRO":
            return WriterSchema(schema_id, problem=f"schema id {schema_id} is a {kind} schema, not Avro")
        return WriterSchema(schema_id, schema=str(found["schema"]))

    def _refused(self, schema_id: int, where: str, exc: urllib.error.HTTPError) -> WriterSchema:
        error: Any = _error_body(exc)
        if exc.code == 404 and error.get("error_code") == _NOT_FOUND:
            return WriterSchema(schema_id, problem=f"schema id {schema_id} is not in the schema registry")
        if exc.code in (401, 403):
            raise InvalidInput(f"the schema registry at {self.url} refused the credentials (HTTP "
                               f"{exc.code}); fix the Secret that "
                               "source.kafka.value.schemaRegistry.credentialsSecretRef names") from None
        if exc.code >= 500 or exc.code == 429:
            raise SourceUnavailable(f"the schema registry at {self.url} failed (HTTP {exc.code} for "
                                    f"{where}); the writer retries with backoff") from None
        raise InvalidInput(f"{where} answered HTTP {exc.code}, not a schema: is {self.url} the base URL of a "
                           "Confluent-compatible schema registry API? Fix "
                           "source.kafka.value.schemaRegistry.url") from None


def _error_body(exc: urllib.error.HTTPError) -> dict[str, Any]:
    try:
        found = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return {}
    return found if isinstance(found, dict) else {}
