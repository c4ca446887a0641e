"""Errors the merge engine raises: lakecore errors that are also `ValueError`s.

Owns nothing but these two leaves; they hang under `lakecore.errors` so callers catch one root,
and under `ValueError` because bad specs and bad batches are bad arguments to a pure function.
"""

from __future__ import annotations

from lakecore.errors import InvalidInput, InvalidTableConfig


class InvalidMergeSpec(InvalidTableConfig, ValueError):
    """A merge spec is inconsistent, or does not fit the table schema."""


class InvalidChanges(InvalidInput, ValueError):
    """A change batch cannot be merged: missing or null key, bad op values, NaN ordering."""
