"""The `weir table` commands, one module per kind of work: `configure` (create, set-lock), `write`
(upsert, insert, delete, overwrite, write), `read` (read), `inspect` (timeline, describe, check) and
`maintain` (compact, cluster, clean, savepoint, restore, rollback, archive, repair) and `publish`
(Iceberg or Delta metadata for other engines). Each command parses
its options, calls lakecore, and hands the result to its output (cli/output.py): none prints itself.
Importing a module registers its commands on `cli.app.table_app`.
"""
