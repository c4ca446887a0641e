"""Storage options by reference: the names of where they are, not the values.

Owns: `OptionsRef`, storage options (credentials above all) named by an environment variable holding a
JSON object and/or a JSON file (e.g. a mounted Kubernetes Secret), plus literal options that are not
secret. Each process resolves the reference itself, so a storage opened with one pickles into tasks
carrying the names only, and executors read the same variable or file in their own environment.

Must not: log or put a resolved value in an error message (they are secrets).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakecore.errors import InvalidStorageOptions


@dataclass(frozen=True)
class OptionsRef:
    """Where a process finds its storage options. Later sources win: the file, then the environment
    variable, then `literal` (non-secret options, e.g. an endpoint)."""

    env: str | None = None                                   # variable holding a JSON object
    file: str | None = None                                  # path of a JSON object file
    literal: Mapping[str, Any] = field(default_factory=dict)

    def resolve(self) -> dict[str, Any]:
        """The options, read now in this process. Raises InvalidStorageOptions when a named source is
        missing or not a JSON object."""
        out: dict[str, Any] = {}
        if self.file:
            try:
                with open(self.file, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as exc:
                raise InvalidStorageOptions(
                    f"the storage options file {self.file} cannot be read ({type(exc).__name__}: "
                    f"{exc.strerror}); mount it in every driver and executor (e.g. a Secret volume) "
                    "or fix the path") from None
            out.update(_object(text, f"the storage options file {self.file}"))
        if self.env:
            value = os.environ.get(self.env)
            if value is None:
                raise InvalidStorageOptions(
                    f"the environment variable {self.env} that should hold the storage options is not "
                    "set in this process; set it in every driver and executor (e.g. from a Secret) or "
                    "fix its name")
            out.update(_object(value, f"the environment variable {self.env}"))
        out.update(self.literal)
        return out


def _object(text: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:  # the message quotes no part of the text: it may be a secret
        raise InvalidStorageOptions(f"{where} is not JSON (line {getattr(exc, 'lineno', '?')}); "
                                    'write the options as one JSON object, e.g. {"key": ..., '
                                    '"secret": ...}') from None
    if not isinstance(value, dict):
        raise InvalidStorageOptions(f"{where} holds JSON {type(value).__name__}, not an object; write "
                                    "the options as one JSON object of option names to values")
    return {str(k): v for k, v in value.items()}

