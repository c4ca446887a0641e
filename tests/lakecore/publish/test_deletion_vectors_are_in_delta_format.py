"""Deletion vectors are written in the Delta protocol's format: Z85 as the protocol's example encodes
it, a DV file of one version byte then size, vector and CRC-32 per vector, each vector the magic
number and a portable 64-bit Roaring bitmap, descriptors that point at them."""

from __future__ import annotations

import struct
import uuid
import zlib

import numpy as np
from pyroaring import BitMap64

from lakecore.publish.deletion_vectors import MAGIC, dv_file, dv_path, unique_id, z85


def test_z85_matches_the_protocols_inline_example():
    raw = bytes.fromhex("6439d3d0000000010000001c3a3000000100000000000500100000000300040007000b0012001d00")
    assert z85(raw) == "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"


def test_a_dv_file_holds_each_vector_at_its_offset():
    vectors = [np.array([3, 4, 7]), np.arange(0, 200_000, 7), np.array([2**33 + 1])]
    u = uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    f = dv_file(vectors, u)
    assert f.path == "_delta_dv/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert f.data[0] == 1
    for positions, d in zip(vectors, f.descriptors, strict=True):
        assert d["storageType"] == "u" and dv_path(d) == f.path and d["cardinality"] == len(positions)
        at = d["offset"]
        (size,) = struct.unpack(">I", f.data[at:at + 4])
        body = f.data[at + 4:at + 4 + size]
        (crc,) = struct.unpack(">I", f.data[at + 4 + size:at + 8 + size])
        assert size == d["sizeInBytes"] and crc == zlib.crc32(body)
        assert struct.unpack("<I", body[:4])[0] == MAGIC
        assert list(BitMap64.deserialize(body[4:])) == [int(p) for p in positions]
    assert len({unique_id(d) for d in f.descriptors}) == len(vectors)
