"""The kopf handlers: watch events in, keys on the controller's queue out. Nothing else.

kopf watches LakeTables, LakeWriters, TableServices and the driver pods (server-side filtered to pods
labelled with a submission id) and delivers every event here; each handler hands the body to the
controller (controller.py), whose workers run parse -> plan -> build -> apply -> report. Only event
handlers are used: kopf then writes nothing to the resources (no progress annotations, no finalizers of
its own), so GitOps tools see no drift, and deleting a resource needs the operator only where data must
be deleted (LakeTable with deletionPolicy Delete, the controller's own finalizer).

`build_registry` returns a fresh registry per operator (tests run several in one process).
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from lakeoperator.controller import Controller
from lakeoperator.kube import GROUP, VERSION
from lakeoperator.leader import LeaderElector
from lakeoperator.plan.writer import SUBMISSION_LABEL

PLURALS = {"laketables": "LakeTable", "lakewriters": "LakeWriter", "tableservices": "TableService"}


def build_registry(controller: Controller, *, login: Any = None,
                   elector: LeaderElector | None = None) -> kopf.OperatorRegistry:
    """The handlers of one operator. `login`: a `kopf.ConnectionInfo` factory replacing kopf's own
    login (in-cluster service account or kubeconfig), for embedding. `elector`: a LeaderElector whose
    loop runs as long as the operator (leader.py)."""
    registry = kopf.OperatorRegistry()

    tasks: list[asyncio.Task[None]] = []
    if elector is not None:
        controller.expect_election()

    if login is not None:
        @kopf.on.login(registry=registry)
        def _login(**_: Any) -> kopf.ConnectionInfo:
            info: kopf.ConnectionInfo = login()
            return info

    @kopf.on.startup(registry=registry)
    async def _startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        # Events carry the reconcile core's reasons and are posted by the controller (kube.py);
        # kopf's own posting of log lines as Events stays off
        settings.posting.enabled = False
        settings.watching.label_selectors["pods"] = SUBMISSION_LABEL   # only driver pods are watched
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        await controller.start()
        if elector is not None:
            tasks.append(asyncio.create_task(elector.run(), name="weir-leader-election"))

    @kopf.on.cleanup(registry=registry)
    async def _cleanup(**_: Any) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await controller.stop()

    for plural, kind in PLURALS.items():
        _watch_kind(registry, controller, plural, kind)

    @kopf.on.event("", "v1", "pods", labels={SUBMISSION_LABEL: kopf.PRESENT}, registry=registry)
    def _pod(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        controller.notify_pod(body, deleted=event.get("type") == "DELETED")

    return registry


def _watch_kind(registry: kopf.OperatorRegistry, controller: Controller, plural: str, kind: str) -> None:
    @kopf.on.event(GROUP, VERSION, plural, registry=registry, id=f"watch-{plural}")
    def _event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        controller.notify(kind, body, deleted=event.get("type") == "DELETED")


__all__ = ["build_registry"]
