"""Where Weir resources are kept, as one protocol: the Kubernetes API (`kube.Kube`) or the state directory
of `weir run` (`local.StateDir`).

The observe step (observe.py) reads a reconcile pass's inputs through it and the supervisor's sink
(supervision/sink.py) writes writers' status and Events through it; as launch/ does for pods, nothing
above knows which store it has. Each implementation keeps its own medium's semantics (the API's
resourceVersion conflicts, the state directory's files); this module holds the protocol only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Store(Protocol):
    @property
    def holds_secrets(self) -> bool:
        """Whether the Secrets a spec names are read here (the API; `weir run --secrets-dir`). False under a
        `weir run` without one: the operator opens tables with its own environment's credentials."""
        ...

    @property
    def inherits_environment(self) -> bool:
        """Whether the drivers it launches run with this process's environment (`weir run`): a table that
        names no credentials Secret is then reached with this process's, as its drivers reach it."""
        ...

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The resource's body as the API serves it (metadata, spec, status); None when there is none."""
        ...

    def names(self, kind: str, namespace: str) -> list[str]:
        """The names of the resources of `kind` in `namespace` (to suggest one for a reference that
        names none)."""
        ...

    def bodies(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        """The bodies of the resources of `kind` in `namespace` (one listing)."""
        ...

    def applied_spec(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """The spec body a LakeWriter's current submission runs (None: none recorded, or unreadable)."""
        ...

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        """One key of a Secret, decoded; None when there is no such Secret or key. Never logged."""
        ...

    def replace_status(self, body: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        """Write `status` over the resource's status (on the API guarded by the resourceVersion of
        `body`: kube.Conflict when it changed since it was read)."""
        ...

    def post_event(self, involved: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """An Event on the resource (what `kubectl describe` / `weir describe` list); best effort."""
        ...


__all__ = ["Store"]
