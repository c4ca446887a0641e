"""Reading a writer's Kafka source with Spark's Kafka connector.

Owns: the reader's options from the job's arguments (consumer properties as `kafka.*`, secret ones from the
variable `--kafka-options-env` names, resolved on the driver only: Spark hands them to its tasks itself),
where a query without a Spark checkpoint starts (the offsets this writer's last commit recorded, every
other partition at --kafka-starting-offsets), and which topic-partitions exist now (asked of the brokers on
the driver through the connector's own kafka-clients, which is also how an unreachable broker is told
apart: SourceUnavailable, before any query starts). Must not decode values or write.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakecore.errors import InvalidInput, LakecoreError
from sparkjobs.contract import KafkaArgs
from sparkjobs.kafka import offsets as kafka_offsets

log = logging.getLogger(__name__)
PROBE_TIMEOUT_S = 30   # how long the driver waits for the brokers' metadata, unless default.api.timeout.ms
CONNECT_TIMEOUT_S = 3  # how long a TCP connection to one bootstrap address may take before the probe


class InvalidKafkaOptions(InvalidInput):
    """The consumer properties by reference do not resolve (no such variable, not a JSON object)."""


class SourceUnavailable(LakecoreError):
    """No broker of the source answered: retry later (the writer's restart policy backs off)."""


def consumer_properties(args: KafkaArgs) -> dict[str, str]:
    """The Kafka consumer properties: the public ones, then those of the variable --kafka-options-env names
    (SASL, TLS: a Secret's JSON)."""
    props = dict(args.kafka_options)
    if args.kafka_options_env:
        text = os.environ.get(args.kafka_options_env)
        if text is None:
            raise InvalidKafkaOptions(f"the variable {args.kafka_options_env} (the Kafka consumer "
                                      "properties) is not set; expose the credentials Secret to the driver "
                                      "as it")
        try:
            secret = json.loads(text)
        except ValueError:
            secret = None
        if not isinstance(secret, dict):
            raise InvalidKafkaOptions(f"the variable {args.kafka_options_env} does not hold a JSON object of "
                                      "Kafka consumer properties; fix the credentials Secret")
        props |= {str(k): str(v) for k, v in secret.items()}
    return props


def reader_options(args: KafkaArgs, starting: str, *, streaming: bool) -> dict[str, str]:
    """The options of spark.read(Stream).format("kafka") for this source, starting at `starting`
    (earliest, latest or Spark's offsets JSON)."""
    assert args.kafka_bootstrap_servers is not None
    props = consumer_properties(args)
    opts = {f"kafka.{k}": v for k, v in props.items()}
    if "default.api.timeout.ms" not in props:
        # the wait of each of Spark's offset fetches (3 tries) when the brokers go away mid-run: the same
        # as the start's probe, not the Kafka client's 60 s (a stopped broker went unreported for 3m20s)
        opts["kafka.default.api.timeout.ms"] = str(PROBE_TIMEOUT_S * 1000)
    opts["kafka.bootstrap.servers"] = args.kafka_bootstrap_servers
    if args.kafka_topics:
        opts["subscribe"] = ",".join(args.kafka_topics)
    else:
        opts["subscribePattern"] = str(args.kafka_topic_pattern)
    opts["startingOffsets"] = starting
    if streaming and args.kafka_max_offsets_per_trigger:
        opts["maxOffsetsPerTrigger"] = str(args.kafka_max_offsets_per_trigger)
    if not streaming:
        opts["endingOffsets"] = "latest"
    if args.kafka_on_data_loss == "skip":   # messages gone while it runs: Spark goes on, with a warning
        opts["failOnDataLoss"] = "false"
    return opts


def refused(bootstrap_servers: str, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why no bootstrap address can be connected to, when that is certain at once (every address refuses
    the connection or names no known host), else None: one accepts, or one does not answer within
    `timeout_s` (a slow or filtered network the Kafka client's own wait decides). A TCP connection only:
    TLS and SASL are the client's."""
    reasons = []
    for address in (a.strip() for a in bootstrap_servers.split(",")):
        host, _, port = address.split("://", 1)[-1].rpartition(":")
        if not host or not port.isdigit():
            return None   # not host:port: the Kafka client tells what is wrong with it
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
            return None
        except ConnectionRefusedError:
            reasons.append(f"{address}: connection refused")
        except socket.gaierror:
            reasons.append(f"{address}: no such host")
        except OSError:   # a timeout, no route: not certain
            return None
    return "; ".join(reasons) or None


def partitions(spark: Any, args: KafkaArgs) -> dict[str, list[int]]:
    """The source's topics and their partitions now, from the brokers (SourceUnavailable at once if every
    bootstrap address refuses connections, or if none answers within PROBE_TIMEOUT_S)."""
    servers = str(args.kafka_bootstrap_servers)
    why = refused(servers)
    if why:
        raise SourceUnavailable(f"no Kafka broker at {servers} answered ({why}); the writer retries with "
                                "backoff — check that the brokers run and the address")
    jvm = spark._jvm
    consumer, timeout_ms = _consumer(spark, args)
    try:
        found = consumer.listTopics(jvm.java.time.Duration.ofMillis(timeout_ms))
    except Exception as exc:   # py4j's Py4JJavaError: a timeout, an authentication failure, ...
        raise _unavailable(args, timeout_ms, exc) from None
    finally:
        consumer.close()
    regex = args.kafka_topic_pattern
    pattern = jvm.java.util.regex.Pattern.compile(regex) if regex else None
    out: dict[str, list[int]] = {}
    for topic in found.keySet():
        wanted = topic in args.kafka_topics if pattern is None else pattern.matcher(topic).matches()
        if wanted:
            out[str(topic)] = sorted(int(p.partition()) for p in found.get(topic))
    missing = [t for t in args.kafka_topics if t not in out]
    if missing:
        raise InvalidInput(f"Kafka topic(s) {', '.join(missing)} do not exist at "
                           f"{args.kafka_bootstrap_servers}; create them or fix source.kafka.topics")
    return out


def _consumer(spark: Any, args: KafkaArgs) -> tuple[Any, int]:
    """A KafkaConsumer of the connector's kafka-clients on the driver, and how long its calls may wait."""
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    for key, value in consumer_properties(args).items():
        props.setProperty(key, value)
    props.setProperty("bootstrap.servers", str(args.kafka_bootstrap_servers))
    deserializer = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
    props.setProperty("key.deserializer", deserializer)
    props.setProperty("value.deserializer", deserializer)
    timeout_ms = probe_timeout_ms(props.getProperty("default.api.timeout.ms"))
    return jvm.org.apache.kafka.clients.consumer.KafkaConsumer(props), timeout_ms


def _unavailable(args: KafkaArgs, timeout_ms: int, exc: BaseException) -> SourceUnavailable:
    cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    java = getattr(exc, "java_exception", None)
    if java is not None:
        cause = f"{java.getClass().getSimpleName()}: {java.getMessage()}"
    return SourceUnavailable(f"no Kafka broker at {args.kafka_bootstrap_servers} answered within "
                             f"{timeout_ms / 1000:g} s ({cause}); the writer retries with backoff — check "
                             "the brokers, the address and the credentials")


def bounds(spark: Any, args: KafkaArgs, found: dict[str, list[int]]) -> kafka_offsets.Bounds:
    """Per topic-partition of `found`, the oldest offset Kafka holds and the next it will write."""
    jvm = spark._jvm
    tps = jvm.java.util.ArrayList()
    for topic, parts in found.items():
        for p in parts:
            tps.add(jvm.org.apache.kafka.common.TopicPartition(topic, p))
    consumer, timeout_ms = _consumer(spark, args)
    try:
        wait = jvm.java.time.Duration.ofMillis(timeout_ms)
        oldest, end = consumer.beginningOffsets(tps, wait), consumer.endOffsets(tps, wait)
    except Exception as exc:
        raise _unavailable(args, timeout_ms, exc) from None
    finally:
        consumer.close()
    out: kafka_offsets.Bounds = {}
    for tp in tps:
        out.setdefault(str(tp.topic()), {})[int(tp.partition())] = (int(oldest.get(tp)), int(end.get(tp)))
    return out


NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"   # Kafka's Uuid.ZERO_UUID: a topic without an id


def topic_ids(spark: Any, args: KafkaArgs, topics: Iterable[str]) -> dict[str, str]:
    """Kafka's id of each topic (it changes when a topic is deleted and created again under its name),
    through an admin client of the connector's kafka-clients. Empty, with a warning, when the brokers do
    not tell (an old broker, no Describe right): a recreated topic is then told only by its offsets."""
    admin = TopicIds(spark, args)
    try:
        return admin.describe(topics)
    except Exception as exc:   # py4j's Py4JJavaError
        if not _NO_IDS.search(str(exc)):   # a timeout, a broker gone: not a broker that cannot tell
            raise _unavailable(args, admin.timeout_ms, exc) from None
        log.warning("the Kafka brokers at %s do not tell the topics' ids (%s): a topic deleted and created "
                    "again is told only by its offsets", args.kafka_bootstrap_servers, _first_line(exc))
        return {}
    finally:
        admin.close()


# what an admin client raises when the brokers cannot or will not describe topics: no ids to judge by
_NO_IDS = re.compile(r"UnsupportedVersionException|AuthorizationException")


class TopicIds:
    """Asks the brokers for topics' ids through one admin client of the connector's kafka-clients on the
    driver, made at the first question and kept (a job asks before every commit: a new client costs
    ~0.1 s, a question to a kept one a few ms) until close()."""

    def __init__(self, spark: Any, args: KafkaArgs) -> None:
        self.spark, self.args = spark, args
        self._admin: Any = None
        self.timeout_ms = PROBE_TIMEOUT_S * 1000

    def describe(self, topics: Iterable[str]) -> dict[str, str]:
        """Kafka's id of each of `topics` that has one (a broker older than 2.8 gives none); raises what the
        admin client raised (an unknown topic, a timeout, no Describe right), and the client is made
        anew at the next question."""
        jvm = self.spark._jvm
        wanted = sorted(set(topics))
        names = jvm.java.util.ArrayList()
        for topic in wanted:
            names.add(topic)
        try:
            admin = self._client()
            found = admin.describeTopics(names).allTopicNames().get(
                self.timeout_ms, jvm.java.util.concurrent.TimeUnit.MILLISECONDS)
            described = {t: found.get(t) for t in wanted}   # each py4j call is a round trip: few of them
            ids = {t: d.topicId() for t, d in described.items() if d is not None}
        except Exception:
            self.close()
            raise
        # a broker older than 2.8 (or on an older inter-broker protocol) has no ids: the zero id, not judged
        return {t: str(i) for t, i in ids.items() if i is not None and str(i) not in (NO_TOPIC_ID, "None")}

    def _client(self) -> Any:
        if self._admin is None:
            jvm = self.spark._jvm
            props = jvm.java.util.Properties()
            for key, value in consumer_properties(self.args).items():
                if not key.startswith(("group.", "auto.", "enable.", "isolation.", "max.poll", "fetch.")):
                    props.setProperty(key, value)   # the connection's settings (security, timeouts)
            props.setProperty("bootstrap.servers", str(self.args.kafka_bootstrap_servers))
            self.timeout_ms = probe_timeout_ms(props.getProperty("default.api.timeout.ms"))
            self._admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
        return self._admin

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close(self.spark._jvm.java.time.Duration.ofMillis(min(self.timeout_ms, 5000)))
            except Exception as exc:   # closing is best effort: the JVM's own threads end with the job
                log.debug("closing the Kafka admin client: %s", _first_line(exc))


class TopicRecreated(SourceUnavailable):
    """A topic was deleted and created again while the writer read it, and the writer was told to go on
    (onDataLoss: skip): what it read since is rolled back, and it starts again from what its commits
    recorded (a job that cannot start again itself exits as unavailable: restarted, no budget spent)."""

    def __init__(self, message: str, topics: Mapping[str, tuple[str, str]]) -> None:
        super().__init__(message)
        self.topics = dict(topics)


def check_same_topics(admin: TopicIds, ids: Mapping[str, str]) -> None:
    """Before a commit of what was read since the start: each topic still has the id it had at the start
    (`ids`), so every message read came from the topic the recorded offsets belong to. Spark's source reads
    a topic deleted and created again on at the offset it had reached, now in the new topic, and says
    nothing when that offset exists there. A changed id is KafkaDataLost, or (onDataLoss: skip)
    TopicRecreated; brokers that do not answer are SourceUnavailable: either way nothing is committed."""
    if not ids:
        return   # the brokers gave no ids at the start (an old broker, no Describe right): not judged
    args = admin.args
    try:
        now = admin.describe(ids)
    except Exception as exc:   # py4j's Py4JJavaError: a timeout, the topic deleted, ...
        raise SourceUnavailable(
            f"the Kafka brokers at {args.kafka_bootstrap_servers} did not confirm that topic(s) "
            f"{', '.join(sorted(ids))} are still the ones this writer started reading ({_first_line(exc)}): "
            "what it read since its last commit is not committed; the writer retries with backoff — check "
            "that the topics exist and the brokers answer") from None
    changed = {t: (old, now[t]) for t, old in ids.items() if now.get(t) not in (None, old)}
    if not changed:
        return
    if args.kafka_on_data_loss == "skip":
        raise TopicRecreated(f"topic(s) {_named(changed)} were deleted and created again while this writer "
                             "was reading them: what it read since its last commit is rolled back, and it "
                             "reads the new topic(s) from their start (onDataLoss: skip)", changed)
    raise recreated_topic(changed, since="while this writer was reading them")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def probe_timeout_ms(consumer_timeout: str | None) -> int:
    """How long the brokers' metadata may take: the consumer's default.api.timeout.ms when set (a number),
    else PROBE_TIMEOUT_S."""
    if consumer_timeout and consumer_timeout.isdigit():
        return int(consumer_timeout)
    return PROBE_TIMEOUT_S * 1000


class KafkaDataLost(InvalidInput):
    """Messages the writer has not read are gone from Kafka: retrying cannot read them."""


_LOST = re.compile(r"KAFKA_DATA_LOSS|some data may have been (lost|missed)|resolved start offset \d+ is "
                   r"greater than the resolved end offset", re.IGNORECASE)
_CHANGED = re.compile(r"Partition (?P<p>\S+?)(?:'s)? offset was changed from (?P<start>\d+) to (?P<end>\d+)|"
                      r"resolved start offset (?P<start2>\d+) is greater than the resolved end offset "
                      r"(?P<end2>\d+) for topic (?P<topic>\S+) partition (?P<n>\d+)")


def data_lost(failure: BaseException) -> KafkaDataLost | None:
    """What Spark's Kafka source says when offsets the writer would read from are no longer in the topic
    (it was deleted and created again, or retention deleted messages not yet read), as bad input: a
    retry fails the same way, for ever. None for any other failure."""
    text = str(failure)
    if not _LOST.search(text):
        return None
    changed = _CHANGED.search(text)
    if changed:
        partition = changed["p"] or f"{changed['topic']}-{changed['n']}"
        end, start = changed["end"] or changed["end2"], changed["start"] or changed["start2"]
        what = (f"partition {partition} now ends at offset {end}, before offset {start}, from which this "
                "writer would read on")
    else:
        what = next((line.strip() for line in text.splitlines() if _LOST.search(line)), "")[:300]
    return KafkaDataLost(
        f"Kafka no longer holds messages this writer has not read ({what}): the topic was deleted and "
        "created again, or its retention deleted them before they were read. Retrying cannot read them, so "
        "nothing was written. Send them again if you still have them elsewhere; to go on without them, set "
        "source.kafka.onDataLoss: skip on the LakeWriter (--kafka-on-data-loss skip): it goes on at the "
        "oldest offsets Kafka holds and its next commit records what was lost")


@dataclass(frozen=True)
class Start:
    """Where a writer's query starts, and from which offsets its commits go on."""

    starting: str                          # Spark's startingOffsets for a query without a checkpoint
    recorded: kafka_offsets.Offsets | None  # the last commit's offsets, past what Kafka lost (skip)
    lost: kafka_offsets.Lost                # what Kafka no longer held (skip; else empty)
    topic_ids: dict[str, str] = field(default_factory=dict)   # the topics' ids now (the commits record them)
    recreated: bool = False   # a topic read from its start as created again: a Spark checkpoint is stale
    unrecorded: kafka_offsets.Offsets = field(default_factory=dict)   # where partitions without a recorded
                                                                      # offset start (a restart's `resumed`)


def start(spark: Any, args: KafkaArgs, recorded: kafka_offsets.Offsets | None,
          recorded_ids: Mapping[str, str] | None = None,
          recreated: Mapping[str, tuple[str, str]] | None = None,
          resumed: kafka_offsets.Offsets | None = None, resolve_latest: bool = False) -> Start:
    """Where a query without a Spark checkpoint starts: the offsets the writer's last commit recorded (every
    partition there is now: a new one at --kafka-starting-offsets), else --kafka-starting-offsets. With
    --kafka-on-data-loss skip, a recorded offset Kafka no longer holds moves on to the oldest it holds, and
    `lost` says what was gone (the first commit records it; a warning is logged). A topic whose id is not
    the one recorded with the offsets (`recorded_ids`) was deleted and created again: the recorded offsets
    are the old topic's, so it is KafkaDataLost, or (skip) read from its start. `recreated`: topics the job
    saw recreated while it read them (TopicRecreated, skip), read from their start whatever the commits
    recorded (the writer may not have committed yet, or recorded no ids, or never read that topic).
    A partition with no recorded offset starts at --kafka-starting-offsets; with `resolve_latest` (a
    streaming query) `latest` is taken as the offsets it names now (`Start.unrecorded`), and a restart of
    the job (`resumed`: the previous query's `unrecorded`) starts such a partition where the query before
    it did, not at a later latest."""
    found = partitions(spark, args)   # also tells an unreachable broker apart, before any query starts
    ids = topic_ids(spark, args, found)
    lost: kafka_offsets.Lost = {}
    read = {t for t, ps in (recorded or {}).items() if ps}   # topics the writer has read from
    again = {t: v for t, v in kafka_offsets.recreated(recorded_ids or {}, ids).items() if t in read}
    # told by the job (TopicRecreated), unless a commit has recorded the new id since (read on from there)
    again |= {t: v for t, v in (recreated or {}).items()
              if t in found and (recorded_ids or {}).get(t) != v[1]}
    if again and args.kafka_on_data_loss != "skip":
        raise recreated_topic(again)
    if (recorded or again) and args.kafka_on_data_loss == "skip":
        held = bounds(spark, args, found)
        recorded, lost = kafka_offsets.past_recreated(recorded or {}, again, held)
        unchanged = {t for t, i in (recorded_ids or {}).items() if ids.get(t) == i}
        recorded, more = kafka_offsets.past_lost(recorded, held, unchanged)
        lost = {t: {**lost.get(t, {}), **more.get(t, {})} for t in {*lost, *more}}
        if lost:
            log.warning("Kafka no longer holds messages this writer has not read: %s. It goes on at the "
                        "oldest offsets Kafka holds (source.kafka.onDataLoss: skip); its next commit records "
                        "them under %s", kafka_offsets.describe_lost(lost), kafka_offsets.LOST_KEY)
    unrecorded = _unrecorded_start(spark, args, found, recorded or {}, {
        t: ps for t, ps in (resumed or {}).items() if t not in again}, resolve_latest)
    if not recorded and not unrecorded:
        return Start(args.kafka_starting_offsets, recorded, lost, ids, bool(again))
    default = kafka_offsets.EARLIEST if args.kafka_starting_offsets == "earliest" else kafka_offsets.LATEST
    told = recorded or {}
    at = {t: {**unrecorded.get(t, {}), **told.get(t, {})} for t in {*unrecorded, *told}}
    return Start(kafka_offsets.starting(at, found, default), recorded, lost, ids, bool(again), unrecorded)


def _unrecorded_start(spark: Any, args: KafkaArgs, found: Mapping[str, list[int]],
                      recorded: kafka_offsets.Offsets, resumed: kafka_offsets.Offsets,
                      resolve_latest: bool) -> kafka_offsets.Offsets:
    """Where each partition the writer recorded no offset for starts, when that is an offset: where the
    job's previous query started it (`resumed`), else (`resolve_latest`, --kafka-starting-offsets latest)
    the offset it names now (its end); a partition left out starts at --kafka-starting-offsets."""
    out: kafka_offsets.Offsets = {}
    for topic, parts in found.items():
        for p in parts:
            if p not in recorded.get(topic, {}) and p in resumed.get(topic, {}):
                out.setdefault(topic, {})[p] = resumed[topic][p]
    left = {t: [p for p in ps if p not in recorded.get(t, {}) and p not in out.get(t, {})]
            for t, ps in found.items()}
    left = {t: ps for t, ps in left.items() if ps}
    if left and resolve_latest and args.kafka_starting_offsets == "latest":
        for topic, held in bounds(spark, args, left).items():
            for p, (_, end) in held.items():
                out.setdefault(topic, {})[p] = end
    return out


def recreated_topic(topics: Mapping[str, tuple[str, str]],
                    since: str = "since its last commit") -> KafkaDataLost:
    """A topic deleted and created again since the writer's last commit (or while it read it), as the bad
    input it is."""
    return KafkaDataLost(
        f"Kafka no longer holds messages this writer has not read: topic(s) {_named(topics)} were deleted "
        f"and created again {since}. The offsets it recorded are the old topic's: the old topic's "
        "messages it had not read are gone, and the new topic's would be read from the wrong offset. "
        "Retrying cannot change that, so nothing was written. "
        "To read the new topic from its start, set source.kafka.onDataLoss: skip on the LakeWriter "
        "(--kafka-on-data-loss skip): its next commit records what was lost")


def _named(topics: Mapping[str, tuple[str, str]]) -> str:
    return ", ".join(f"{t} (id {old}, now {new})" for t, (old, new) in sorted(topics.items()))


def read(spark: Any, args: KafkaArgs, starting: str, *, streaming: bool) -> Any:
    """The source as a (streaming) DataFrame of Spark's Kafka rows (key, value, topic, partition, offset,
    timestamp, ...)."""
    reader = spark.readStream if streaming else spark.read
    return reader.format("kafka").options(**reader_options(args, starting, streaming=streaming)).load()
