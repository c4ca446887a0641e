"""Launchers: where a driver pod the builders made actually runs.

One protocol, two implementations: `kubernetes` creates the pod through the API server (next), `local`
(launch/local.py) runs its container as a process on this machine — the embedded default. The
reconcile core (reconcile.py) talks only to this protocol, so it never knows which one it drives.
"""

from __future__ import annotations

from typing import Any, Protocol


class Launcher(Protocol):
    # True once the runner it serves is ending: it has stopped its pods and starts none (`weir run`'s,
    # after close); the writers' planner then records a submission as left for the next run
    closed: bool

    def create_pod(self, pod: dict[str, Any]) -> None:
        """Run the pod. Idempotent: a pod of that name that exists already is kept as it is."""
        ...

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as a Kubernetes Pod body with its status (phase, container state, exit code)."""
        ...

    def delete_pod(self, namespace: str, name: str) -> None:
        """Stop and remove the pod (SIGTERM, then SIGKILL after its grace period); gone already is fine."""
        ...
