"""Read: file schemas, merge specs, file-slice reads, snapshot and incremental queries."""
