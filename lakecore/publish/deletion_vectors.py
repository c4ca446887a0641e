"""Delta deletion vectors: row positions as the Delta protocol stores them (Iceberg v3's deletion
vectors use the same bytes, `framed`, inside Puffin files: `iceberg_dvs`). Pure.

A deletion vector is the magic number 1681511377 (little-endian) followed by a 64-bit Roaring bitmap
in the portable layout (`pyroaring.BitMap64.serialize`). A DV file holds one format byte (1), then
per vector its size (big-endian int32), the vector, and the CRC-32 of the vector (big-endian): one
file per publish holds every vector it writes, each found by its offset. The descriptor in the log
names the file by a UUID, Z85-encoded after a prefix naming its directory (storage type `u`).
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyroaring import BitMap64

from lakecore.read.positions import Positions

MAGIC = 1681511377
DV_DIR = "_delta_dv"  # the random-prefix part of descriptors: every DV file lives here
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """Z85 (ZeroMQ's base 85) of `data`, whose length is a multiple of 4 (a UUID's 16 bytes)."""
    if len(data) % 4:
        raise ValueError("Z85 encodes whole 4-byte words")
    out: list[str] = []
    for (word,) in struct.iter_unpack(">I", data):
        chars = []
        for _ in range(5):
            word, rem = divmod(word, 85)
            chars.append(_Z85[rem])
        out.extend(reversed(chars))
    return "".join(out)


def vector(positions: Positions) -> bytes:
    """One deletion vector's bytes: the magic number and the portable 64-bit bitmap."""
    bitmap = BitMap64(np.asarray(positions, dtype=np.uint64))
    return struct.pack("<I", MAGIC) + bitmap.serialize()


def framed(positions: Positions) -> bytes:
    """A vector as stored: its size, the vector, its CRC-32 (both big-endian). Iceberg's
    `deletion-vector-v1` Puffin blob is exactly these bytes too."""
    body = vector(positions)
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


@dataclass(frozen=True)
class DvFile:
    """A DV file's bytes and, per vector given, its descriptor for the Delta log."""

    path: str                          # relative to the table root
    data: bytes
    descriptors: tuple[dict[str, Any], ...]


def dv_file(vectors: Sequence[Positions], file_uuid: uuid.UUID | None = None) -> DvFile:
    """One DV file holding a vector per entry of `vectors` (each a sorted, non-empty position array)."""
    u = file_uuid or uuid.uuid4()
    parts = [b"\x01"]
    offset = 1
    descriptors = []
    for positions in vectors:
        stored = framed(positions)
        parts.append(stored)
        descriptors.append({"storageType": "u", "pathOrInlineDv": DV_DIR + z85(u.bytes), "offset": offset,
                            "sizeInBytes": len(stored) - 8, "cardinality": len(positions)})
        offset += len(stored)
    return DvFile(f"{DV_DIR}/deletion_vector_{u}.bin", b"".join(parts), tuple(descriptors))


def dv_path(descriptor: dict[str, Any]) -> str | None:
    """The table-relative path of a `u` descriptor's DV file (None for other storage types)."""
    if descriptor.get("storageType") != "u":
        return None
    encoded = str(descriptor["pathOrInlineDv"])
    prefix, code = encoded[:-20], encoded[-20:]
    value = 0
    words = []
    for i in range(0, 20, 5):
        value = 0
        for ch in code[i:i + 5]:
            value = value * 85 + _Z85.index(ch)
        words.append(value)
    u = uuid.UUID(bytes=struct.pack(">4I", *words))
    name = f"deletion_vector_{u}.bin"
    return f"{prefix}/{name}" if prefix else name


def unique_id(descriptor: dict[str, Any] | None) -> str | None:
    """The protocol's uniqueId of a descriptor (None: no DV)."""
    if not descriptor:
        return None
    offset = descriptor.get("offset")
    base = f"{descriptor['storageType']}{descriptor['pathOrInlineDv']}"
    return base if offset is None else f"{base}@{offset}"
