"""A published Iceberg table in a catalog (pyiceberg's: SQL, REST, Glue, Hive, ...), kept current: after
each publish the catalog's table shows the new snapshot. With `catalog_updates.py`, the only modules of
lakecore that import pyiceberg (the `catalog` extra).

    not in the catalog      register_table(identifier, metadata file); its namespace created if missing
    shows an older snapshot moved to the new one:
                              SQL catalog  compare-and-swap of its row to the new metadata file
                                           (`... WHERE metadata_location = <current>`)
                              others       a commit of the difference (snapshots added and expired,
                                           schemas, properties) guarded by the table's uuid and current
                                           snapshot: the catalog writes its own metadata file (beside
                                           ours, in metadata/) over the same manifests
                              rebuilt      (the published metadata restarted under a new uuid) drop_table
                                           (the entry only) and register_table: a reader may miss the
                                           table for that moment
    shows ours or newer     nothing (a slower publisher never moves the catalog back)
    another table's         refused: a name held by another location is not ours to replace

Publishing writes every file first and the catalog is the last step, so a catalog that cannot be
reached leaves the published files intact and readers by path see them; the next publish registers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakecore.errors import CatalogError, PublishConflict, PublishError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog


@dataclass(frozen=True)
class CatalogRef:
    """An Iceberg catalog and the table's identifier in it ("namespace.table"). `properties` are
    pyiceberg's catalog properties (`type`: sql, rest, glue, hive; `uri`, `warehouse`, credentials, ...),
    merged over what pyiceberg's own configuration (~/.pyiceberg.yaml, PYICEBERG_CATALOG__<NAME>__*)
    holds for catalog `name`."""

    table: str
    properties: Mapping[str, str] = field(default_factory=dict)
    name: str = "default"

    def describe(self) -> str:
        return _where(self.name, self.properties)


@dataclass(frozen=True)
class Registration:
    """What the catalog's table reads now, and what this step did."""

    table: str
    metadata: str
    action: str    # "registered", "moved", "registered again", "up to date", "kept newer"

    def describe(self, ref: CatalogRef) -> str:
        return f"{ref.describe()}: {self.table} {self.action} -> {self.metadata}"


def register(ref: CatalogRef, location: str, metadata: Mapping[str, Any]) -> Registration:
    """Make `ref.table` show the snapshot of `metadata` (the published Iceberg metadata, the file at
    `location`). Raises CatalogError when the catalog cannot be reached or refuses (nothing published is
    touched), PublishConflict when another publisher changed it meanwhile (publish again)."""
    try:
        catalog = _load(ref)
        return _register(catalog, ref.table, location, metadata)
    except (PublishError, ImportError):
        raise  # ImportError: pyiceberg is missing (the `catalog` extra), not the catalog
    except Exception as error:  # pyiceberg, HTTP and SQL client errors: all mean "not registered"
        raise CatalogError(
            f"the table is published ({location}) but {ref.describe()} could not register "
            f"{ref.table}: {type(error).__name__}: {_first_line(error)}; the published files are intact "
            "(readers by path see them): fix the catalog settings or reach it, then publish again") from error


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return " ".join(text.splitlines()[0].split()) if text else "(no message)"


def _load(ref: CatalogRef) -> Catalog:
    from pyiceberg.catalog import load_catalog

    return load_catalog(ref.name, **dict(ref.properties))


def _register(catalog: Catalog, table: str, location: str, metadata: Mapping[str, Any]) -> Registration:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import CommitFailedException, NoSuchTableError

    from lakecore.publish.catalog_updates import Shows, decide, parse, updates

    try:
        current = catalog.load_table(table)
    except NoSuchTableError:
        _ensure_namespace(catalog, table)
        catalog.register_table(table, location)
        return Registration(table, location, "registered")
    except Exception as error:
        if not _listed(catalog, table):
            raise
        raise CatalogError(
            f"the table is published ({location}) but the entry {table} in {_describe(catalog)} names "
            f"metadata that cannot be read ({type(error).__name__}: {_first_line(error)}); if it was this "
            "table's (its published metadata was deleted), drop the entry (pyiceberg: "
            f"catalog.drop_table({table!r}); no file is deleted) and publish again") from error
    new = parse(metadata)
    decision = decide(Shows.of(current.metadata), Shows.of(new))
    if decision == "foreign":
        raise CatalogError(
            f"{table} in the catalog is another table (at {current.metadata.location}, not "
            f"{new.location}); register this one under another name, or drop that entry first")
    if decision in ("same", "newer"):
        return Registration(table, current.metadata_location, "up to date" if decision == "same" else
                            "kept newer")
    if isinstance(catalog, SqlCatalog):
        _swap_sql(catalog, table, current.metadata_location, location)
        return Registration(table, location, "moved")
    if decision == "rebuilt":
        catalog.drop_table(table)
        catalog.register_table(table, location)
        return Registration(table, location, "registered again")
    requirements, changes = updates(current.metadata, new)
    try:
        response = catalog.commit_table(current, requirements, changes)
    except CommitFailedException as error:
        raise PublishConflict(f"{table} changed in the catalog meanwhile (another publisher): "
                              f"{_first_line(error)}; publish again") from error
    return Registration(table, response.metadata_location, "moved")


def _listed(catalog: Catalog, table: str) -> bool:
    """Whether the catalog lists `table` (table_exists loads it, which fails for an unreadable entry)."""
    parts = tuple(table.split("."))
    return parts in {tuple(i) for i in catalog.list_tables(parts[:-1])}


def _describe(catalog: Catalog) -> str:
    return _where(catalog.name, catalog.properties)


def _where(name: str, properties: Mapping[str, str]) -> str:
    return f"catalog {name!r} ({properties.get('uri') or properties.get('type') or 'configured'})"


def _ensure_namespace(catalog: Catalog, table: str) -> None:
    namespace = tuple(table.split(".")[:-1])
    if namespace and not catalog.namespace_exists(namespace):
        from pyiceberg.exceptions import NamespaceAlreadyExistsError

        try:
            catalog.create_namespace(namespace)
        except NamespaceAlreadyExistsError:
            pass  # another publisher made it meanwhile


def _swap_sql(catalog: Any, table: str, current: str, metadata: str) -> None:
    from pyiceberg.catalog import Catalog as Base
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import update
    from sqlalchemy.orm import Session

    namespace = Base.namespace_to_string(Base.namespace_from(table))
    statement = update(IcebergTables).where(
        IcebergTables.catalog_name == catalog.name, IcebergTables.table_namespace == namespace,
        IcebergTables.table_name == Base.table_name_from(table),
        IcebergTables.metadata_location == current,
    ).values(metadata_location=metadata, previous_metadata_location=current)
    with Session(catalog.engine) as session:
        moved = session.execute(statement).rowcount  # type: ignore[attr-defined]
        session.commit()
    if moved != 1:
        raise PublishConflict(f"{table} in the catalog moved away from {current} meanwhile (another "
                              "publisher); publish again")
