"""Iceberg v3 deletion vectors: the rows a data file hides, as a `deletion-vector-v1` blob in a Puffin
file. Pure: the caller stores the bytes.

One Puffin file per data file and publish (the blob starts after the 4-byte magic). Iceberg lets one
Puffin file hold the vectors of many data files, but a file is deletable only once no retained
snapshot lists any of its vectors; with one vector per file, dropping a vector's manifest entry
retires its file, as with v2's position-delete file of one data file, and readers that read a
whole Puffin file to apply one vector (pyiceberg) read only that vector.

The blob is Delta's stored vector (`deletion_vectors.framed`: size, magic, portable 64-bit Roaring
bitmap, CRC-32); its footer entry names the data file (`referenced-data-file`) and the row count
(`cardinality`); snapshot id and sequence number are -1, as Puffin v1 asks of vectors written
before their commit.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from lakecore.publish.deletion_vectors import framed
from lakecore.read.positions import Positions

MAGIC = b"PFA1"
BLOB_TYPE = "deletion-vector-v1"
ROW_POSITION_ID = 2147483645  # the reserved field id of `_pos`: what a vector's bits index


@dataclass(frozen=True)
class DvPuffin:
    """A Puffin file holding one deletion vector, and where in it the vector is."""

    data: bytes
    offset: int          # content_offset of the manifest entry: the blob's first byte
    length: int          # content_size_in_bytes
    cardinality: int     # the rows it hides (the entry's record_count)


def dv_puffin(referenced: str, positions: Positions) -> DvPuffin:
    """A Puffin file with the deletion vector of `positions` (sorted, non-empty) of data file
    `referenced` (its full location, as the manifest lists it)."""
    blob = framed(positions)
    offset = len(MAGIC)
    footer = {"blobs": [{"type": BLOB_TYPE, "fields": [ROW_POSITION_ID], "snapshot-id": -1,
                         "sequence-number": -1, "offset": offset, "length": len(blob),
                         "properties": {"referenced-data-file": referenced,
                                        "cardinality": str(len(positions))}}],
              "properties": {"created-by": "weir"}}
    payload = json.dumps(footer, separators=(",", ":")).encode()
    data = b"".join([MAGIC, blob, MAGIC, payload, struct.pack("<i", len(payload)), bytes(4), MAGIC])
    return DvPuffin(data, offset, len(blob), len(positions))
