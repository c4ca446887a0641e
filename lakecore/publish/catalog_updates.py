"""What moves a catalog's Iceberg table from the snapshot it shows to a newly published one: the decision
(pure, on a few facts of each metadata) and the catalog commit that expresses the difference (the
snapshots published since, those expired, new schemas and properties), guarded by the table's uuid and
its current snapshot, so a commit racing another publisher fails instead of going back."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.update import TableRequirement, TableUpdate

Decision = Literal["same", "newer", "move", "rebuilt", "foreign"]


@dataclass(frozen=True)
class Shows:
    """The facts of one metadata the decision needs."""

    location: str         # the table's location (the Weir table's base)
    uuid: str
    snapshot: int | None  # the current snapshot id
    sequence: int         # last-sequence-number

    @classmethod
    def of(cls, metadata: TableMetadata) -> Shows:
        return cls(metadata.location.rstrip("/"), str(metadata.table_uuid), metadata.current_snapshot_id,
                   int(getattr(metadata, "last_sequence_number", 0)))


def decide(current: Shows, new: Shows) -> Decision:
    """What to do with a catalog table showing `current` when `new` was just published: "same",
    "newer" (a later publish is shown already), "move" (commit the difference), "rebuilt" (the
    published metadata starts a new history: register it again) or "foreign" (another table)."""
    if current.location != new.location:
        return "foreign"
    if current.uuid != new.uuid:
        return "rebuilt"
    if current.snapshot == new.snapshot:
        return "same"
    return "newer" if current.sequence > new.sequence else "move"


def parse(metadata: Mapping[str, Any]) -> TableMetadata:
    from pyiceberg.table.metadata import TableMetadataUtil

    return TableMetadataUtil.parse_raw(json.dumps(metadata))


def updates(current: TableMetadata, new: TableMetadata
            ) -> tuple[tuple[TableRequirement, ...], tuple[TableUpdate, ...]]:
    """The requirements and updates that make a catalog's `current` show what `new` shows."""
    from pyiceberg.table.update import (
        AddPartitionSpecUpdate,
        AddSchemaUpdate,
        AddSnapshotUpdate,
        AssertRefSnapshotId,
        AssertTableUUID,
        RemovePropertiesUpdate,
        RemoveSnapshotsUpdate,
        SetCurrentSchemaUpdate,
        SetDefaultSpecUpdate,
        SetPropertiesUpdate,
        SetSnapshotRefUpdate,
    )

    # pydantic models: built from their JSON names (what mypy sees of their fields)
    requirements = (AssertTableUUID(uuid=current.table_uuid),
                    AssertRefSnapshotId.model_validate({"ref": "main",
                                                        "snapshot-id": current.current_snapshot_id}))
    changes: list[TableUpdate] = []
    schemas = {s.schema_id for s in current.schemas}
    changes += [AddSchemaUpdate.model_validate({"schema": s}) for s in new.schemas
                if s.schema_id not in schemas]
    if new.current_schema_id != current.current_schema_id:
        changes.append(SetCurrentSchemaUpdate.model_validate({"schema-id": new.current_schema_id}))
    specs = {s.spec_id for s in current.partition_specs}
    changes += [AddPartitionSpecUpdate(spec=s) for s in new.partition_specs if s.spec_id not in specs]
    if new.default_spec_id != current.default_spec_id:
        changes.append(SetDefaultSpecUpdate.model_validate({"spec-id": new.default_spec_id}))
    shown = {s.snapshot_id for s in current.snapshots}
    added = sorted((s for s in new.snapshots if s.snapshot_id not in shown),
                   key=lambda s: s.sequence_number or 0)
    changes += [AddSnapshotUpdate(snapshot=s) for s in added]
    if new.current_snapshot_id is not None:
        changes.append(SetSnapshotRefUpdate.model_validate({"ref-name": "main", "type": "branch",
                                                            "snapshot-id": new.current_snapshot_id}))
    expired = sorted(shown - {s.snapshot_id for s in new.snapshots})
    if expired:
        changes.append(RemoveSnapshotsUpdate.model_validate({"snapshot-ids": expired}))
    changed = {k: v for k, v in new.properties.items() if current.properties.get(k) != v}
    if changed:
        changes.append(SetPropertiesUpdate(updates=changed))
    gone = sorted(set(current.properties) - set(new.properties))
    if gone:
        changes.append(RemovePropertiesUpdate(removals=gone))
    return requirements, tuple(changes)
