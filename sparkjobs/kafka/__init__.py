"""A writer's Kafka source, through Spark's own Kafka connector (images/spark/jars/pom.xml).

    source.py       the reader: options from the job's arguments (secret consumer properties by reference),
                    where a query without a checkpoint starts (the offsets this writer's last commit
                    recorded), the partitions there are now
    values.py       messages -> rows of the table: JSON, Avro (an inline schema, or Confluent-framed with
                    a schema registry's), Debezium CDC envelopes; a message that does not decode gets an
                    error, never a silent null row
    registry.py     the Confluent wire format and a Confluent-compatible schema registry's client (each
                    schema id fetched once per job; a registry that does not answer: SourceUnavailable)
    offsets.py      the Kafka offsets a commit records (`weir.kafka.offsets`), pure
    bad_records.py  what a batch with bad messages does: fail (naming the first one), skip (counted),
                    or dead-letter them (a topic or a Weir table)
    batch.py        one micro-batch (or one batch write) of Kafka messages -> one instant

Every per-record step is a Spark SQL expression (from_json, from_avro, aggregates): no Python per message.
"""
