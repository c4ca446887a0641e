"""Publishing a LakeTable's spec.publish targets (the I/O beside plan/publish.py's decisions): Iceberg
and/or Delta metadata written beside the table by lakecore (`Table.publish`), the Iceberg table
registered in spec.publish.catalog. The reconcile core calls it after a pass found the table ready.

Every target is tried; a failure is its outcome's error (retried at the next pass), never the pass's.
A catalog that fails leaves the target published (its files are written first): the outcome shows what
readers by path see, with the catalog's error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lakeoperator.plan.publish import PublishOutcome
from lakeoperator.specs import LakeTableSpec


def publish_targets(spec: LakeTableSpec, targets: Sequence[str], storage_options: Mapping[str, Any] | None,
                    catalog_properties: Mapping[str, str] | None, catalog_error: str | None
                    ) -> list[PublishOutcome]:
    """Publish `targets` of the table; one outcome each. `catalog_properties`: spec.publish.catalog's
    Secret (None: pyiceberg's own configuration, as under `weir run`); `catalog_error`: why that Secret
    could not be read (the target is published, not registered)."""
    from lakecore import Table
    from lakecore.errors import CatalogError
    from lakecore.publish import CatalogRef

    publish = spec.publish
    assert publish is not None
    try:
        table = Table.open(spec.location, storage_options=dict(storage_options) if storage_options else None)
    except Exception as exc:
        return [PublishOutcome(t, error=_error(exc)) for t in targets]
    outcomes = []
    for target in targets:
        c = publish.catalog if target == "iceberg" else None
        ref = CatalogRef(c.table, dict(catalog_properties or {}), c.name) \
            if c is not None and catalog_error is None else None
        version = publish.iceberg_format_version if target == "iceberg" else None
        try:
            result = table.publish(target, view=publish.view, keep=publish.keep, catalog=ref,
                                   format_version=version)
            error = catalog_error if c is not None else None
        except CatalogError as exc:   # published, not registered: readers by path see it
            result = table.publish(target, view=publish.view, keep=publish.keep, format_version=version)
            error = str(exc)
        except Exception as exc:
            outcomes.append(PublishOutcome(target, error=_error(exc)))
            continue
        s = result.snapshot
        outcomes.append(PublishOutcome(target, s.instant, s.id, s.view, result.location,
                                       result.catalog or None, error, result.format_version))
    return outcomes


def _error(exc: Exception) -> str:
    from lakecore.cli.errors import missing_extra
    from lakecore.errors import LakecoreError

    text = " ".join(str(exc).split())
    if isinstance(exc, LakecoreError):
        return text
    if (extra := missing_extra(exc)) is not None:
        return (f"publishing needs the Python module {extra[0]!r}, which weir's `{extra[1]}` extra installs "
                f"and the operator's environment lacks; install it (pip install 'weir[{extra[1]}]')")
    return (f"{type(exc).__name__}: {text}; check the table's storage and the operator's access to it "
            "(retried)")
