"""Arctic tables in a pyiceberg catalog.

A primary-key table ``db.t`` is two Iceberg v2 tables: the base store ``db.t`` and the change store
``db.t__change`` (hidden from SHOW TABLES). The primary key is the base store's Iceberg identifier
fields; arctic-sql's own bookkeeping lives in ``arctic.*`` properties that users cannot set.
A table without a primary key is the base store alone.

A table is found by its base store: creating it is a DDL's commit point, dropping it the first step
of DROP. Stores without a base store (a change store, a CTAS's staged ``db.t__creating``) are what
an interrupted DDL left; they are invisible, and the next CREATE or DROP of the name removes them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchNamespaceError
from pyiceberg.exceptions import NoSuchTableError as IcebergNoSuchTable
from pyiceberg.exceptions import TableAlreadyExistsError as IcebergTableExists
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from arctic_sql.errors import (
    IncompleteTableError,
    InvalidArgumentError,
    NoSuchDatabaseError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from arctic_sql.faults import fault_point
from arctic_sql.table.files import metadata_cache, storage
from arctic_sql.table.format import layout, versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.maintenance import purge as _purge
from arctic_sql.table.model import properties as props
from arctic_sql.table.model.identifiers import (
    CHANGE_SUFFIX,
    CLONE_OF_KEY,
    FORMAT_KEY,
    PURGING_KEY,
    RESERVED_COLUMN_PREFIX,
    STAGED_SUFFIX,
    STORE_KEY,
    TableIdentifier,
    whole_table,
)
from arctic_sql.table.model.merge_engine import MergeEngine
from arctic_sql.table.model.table import STORE_DEFAULTS, ArcticTable
from arctic_sql.table.reading import branches, pairs
from arctic_sql.table.reading.tags import PREFIX as TAG_PREFIX
from arctic_sql.table.reading.time_travel import checked_version
from arctic_sql.table.records import clones, fast_forwards, leases
from arctic_sql.table.writing import clone_metadata, commit, store_sync, tag_writes
from arctic_sql.table.writing.commit import MAINTENANCE_PENDING_KEY

metadata_cache.install()  # a commit's cost must not grow with the snapshots a store keeps

# A view over arctic tables: namespace properties of its database (pyiceberg's SqlCatalog has no
# views), its header under ``arctic.view.<name>`` and its query in parts of at most VIEW_PART_CHARS
# (SqlCatalog's property values are VARCHAR(1000)) under ``arctic.view.<name>.<i>``.
VIEW_KEY_PREFIX = "arctic.view."
VIEW_PART_CHARS = 900


@dataclass(frozen=True)
class ViewDefinition:
    """A view's query (Spark SQL text, names as written) and the column names its CREATE gave."""

    sql: str
    columns: tuple[str, ...] = ()

    def properties(self, name: str) -> dict[str, str]:
        parts = [self.sql[i : i + VIEW_PART_CHARS] for i in range(0, len(self.sql), VIEW_PART_CHARS)] or [""]
        header = json.dumps({"columns": list(self.columns), "parts": len(parts)})
        return {
            VIEW_KEY_PREFIX + name: header,
            **{f"{VIEW_KEY_PREFIX}{name}.{i}": p for i, p in enumerate(parts)},
        }

    @classmethod
    def of(cls, name: str, properties: Mapping[str, str]) -> ViewDefinition | None:
        header = properties.get(VIEW_KEY_PREFIX + name)
        if header is None:
            return None
        fields = json.loads(header)
        sql = "".join(properties[f"{VIEW_KEY_PREFIX}{name}.{i}"] for i in range(fields["parts"]))
        return cls(sql, tuple(fields["columns"]))


class ArcticCatalog:
    """Databases and arctic tables over any pyiceberg catalog."""

    def __init__(self, catalog: Catalog) -> None:
        self.iceberg = catalog
        # Table files go through the file systems the catalog's storage properties describe: for
        # the store of its warehouse, of each table it loads, and of any store no catalog named.
        self.storage = storage.StorageConfig.of(catalog.properties)
        storage.configure(self.storage, locations=[catalog.properties.get("warehouse") or ""])

    # databases -------------------------------------------------------------------------------
    def create_database(self, name: str, if_not_exists: bool = False) -> None:
        try:
            self.iceberg.create_namespace(name.lower())
        except NamespaceAlreadyExistsError:
            if not if_not_exists:
                raise InvalidArgumentError(f"Database '{name}' already exists") from None

    def database_exists(self, name: str) -> bool:
        return (name.lower(),) in {tuple(ns) for ns in self.iceberg.list_namespaces()}

    def list_databases(self) -> list[str]:
        return sorted(".".join(ns) for ns in self.iceberg.list_namespaces())

    def drop_database(self, name: str, if_exists: bool = False, cascade: bool = False) -> None:
        if not self.database_exists(name):
            if if_exists:
                return
            raise NoSuchDatabaseError(f"Database '{name}' does not exist")
        tables = self.list_tables(name)
        if (tables or self.list_views(name)) and not cascade:
            raise InvalidArgumentError(f"Database '{name}' is not empty; use DROP DATABASE ... CASCADE")
        for table in tables:
            self.drop_table(TableIdentifier(name.lower(), table), purge=True)
        for ident in self.iceberg.list_tables(name.lower()):  # what interrupted DDL left: hidden stores
            hidden = ident[-1]
            for suffix in (STAGED_SUFFIX, CHANGE_SUFFIX):
                if hidden.endswith(suffix):
                    self.remove_leftovers(TableIdentifier(name.lower(), hidden[: -len(suffix)]))
        try:
            self.iceberg.drop_namespace(name.lower())
        except NoSuchNamespaceError:
            pass

    # views -----------------------------------------------------------------------------------
    def _database_properties(self, database: str) -> dict[str, str]:
        try:
            return dict(self.iceberg.load_namespace_properties(database.lower()))
        except NoSuchNamespaceError:
            return {}

    def load_view(self, identifier: TableIdentifier) -> ViewDefinition | None:
        """The view ``identifier`` names, or None."""
        return ViewDefinition.of(identifier.name, self._database_properties(identifier.database))

    def list_views(self, database: str) -> list[str]:
        names = {
            key[len(VIEW_KEY_PREFIX) :]
            for key in self._database_properties(database)
            if key.startswith(VIEW_KEY_PREFIX)
        }
        return sorted(n for n in names if "." not in n)

    def create_view(
        self, identifier: TableIdentifier, view: ViewDefinition, *, replace: bool = False
    ) -> None:
        """Create (or with ``replace``, replace) a view; one catalog update."""
        if not self.database_exists(identifier.database):
            raise NoSuchDatabaseError(f"Database '{identifier.database}' does not exist")
        if self.table_exists(identifier):
            raise TableAlreadyExistsError(f"Cannot create view {identifier}: a table of that name exists")
        old = self.load_view(identifier)
        if old is not None and not replace:
            raise TableAlreadyExistsError(f"View {identifier} already exists")
        updates = view.properties(identifier.name)
        stale = set(old.properties(identifier.name)) - set(updates) if old is not None else set()
        self.iceberg.update_namespace_properties(identifier.database, removals=stale, updates=updates)

    def drop_view(self, identifier: TableIdentifier) -> bool:
        """Drop a view; False when there is none of that name."""
        old = self.load_view(identifier)
        if old is None:
            return False
        self.iceberg.update_namespace_properties(
            identifier.database, removals=set(old.properties(identifier.name))
        )
        return True

    # tables ----------------------------------------------------------------------------------
    def list_tables(self, database: str) -> list[str]:
        if not self.database_exists(database):
            raise NoSuchDatabaseError(f"Database '{database}' does not exist")
        names = [ident[-1] for ident in self.iceberg.list_tables(database.lower())]
        return sorted(n for n in names if not _hidden(n))

    def table_exists(self, identifier: TableIdentifier) -> bool:
        """Whether ``identifier`` names a table; a store's own name (``t__change``) names none."""
        return not _hidden(identifier.name) and self.iceberg.table_exists(identifier.base_id)

    def load_table(self, identifier: TableIdentifier) -> ArcticTable:
        """The table's stores, a pair the table had (reading/pairs.py: the base store, the change
        store, the base store again). A change store an interrupted ALTER left behind is brought into
        line with the base store's schema first (store_sync)."""
        if _hidden(identifier.name):
            raise NoSuchTableError(f"Table or view not found: {identifier}")
        base = self._load(identifier.base_id)
        if base is None:
            raise NoSuchTableError(f"Table or view not found: {identifier}")
        change = None
        if base.properties.get(FORMAT_KEY) == "keyed":
            change = self._load(identifier.change_id)
            if change is None:
                raise IncompleteTableError(
                    f"Table {identifier} is incomplete: its change store {identifier}{CHANGE_SUFFIX} is missing; "
                    f"DROP TABLE {identifier} removes what is left"
                )
        name = str(identifier.on_branch(None))
        table = pairs.confirm(
            ArcticTable(identifier.on_branch(None), base, change),
            lambda b, c: store_sync.align(name, b.schema(), c),
        )
        storage.serve(self.storage, table.base.location())  # a table may lie outside the warehouse's store
        if identifier.branch is not None:
            table = branches.on_branch(table, identifier.branch)  # pinned as main is (pairs.as_read)
        return table

    def _load(self, ident: tuple[str, str]) -> Table | None:
        try:
            return self.iceberg.load_table(ident)
        except (IcebergNoSuchTable, NoSuchNamespaceError):
            return None

    def create_table(
        self,
        identifier: TableIdentifier,
        schema: Schema,
        spec: PartitionSpec,
        properties: Mapping[str, str],
        location: str | None = None,
        *,
        staged: bool = False,
        system: Mapping[str, str] | None = None,
    ) -> ArcticTable:
        """Create the stores of a table. ``schema`` carries the primary key as identifier fields.
        ``system``: properties of arctic-sql's own (reserved ``arctic.*`` keys, a materialized
        view's definition), stored as given.

        The change store comes first: no statement sees it (SHOW TABLES lists base stores, and a
        table is found by its base store), so the base store's creation is the commit point. A
        crash in between leaves a change store alone, which the next CREATE or DROP of the name
        removes. ``staged`` (CTAS) creates the base store under a hidden name that
        :meth:`publish` renames once the rows are committed.
        """
        self.check_new_name(identifier)
        for field in schema.fields:
            if field.name.lower().startswith(RESERVED_COLUMN_PREFIX):
                raise InvalidArgumentError(
                    f"Column names starting with '{RESERVED_COLUMN_PREFIX}' are reserved"
                )
        keyed = bool(schema.identifier_field_ids)
        user = props.validate(properties, creating=True)
        MergeEngine.of(
            user, schema
        )  # the engine's keys must fit the columns: refused before anything is written
        self.remove_leftovers(identifier)
        root = self._new_table_root(identifier, location)
        base_props = {
            **user,
            **(system or {}),
            **STORE_DEFAULTS,
            FORMAT_KEY: "keyed" if keyed else "unkeyed",
            STORE_KEY: Store.BASE,
        }
        change = None
        if keyed:
            try:
                change = self.iceberg.create_table(
                    identifier.change_id,
                    _change_schema(schema),
                    location=f"{root}/change" if root else None,
                    partition_spec=spec,
                    properties={**STORE_DEFAULTS, FORMAT_KEY: "keyed", STORE_KEY: Store.CHANGE},
                )
            except IcebergTableExists:  # another CREATE of this name is under way
                raise TableAlreadyExistsError(f"Table {identifier} already exists") from None
            fault_point("create-between-stores")
        try:
            base = self.iceberg.create_table(
                identifier.staged_id if staged else identifier.base_id,
                schema,
                location=f"{root}/base" if root else None,
                partition_spec=spec,
                properties=base_props,
            )
        except Exception as e:
            if change is not None:
                self._drop_stores([change], purge=True)
            if isinstance(e, IcebergTableExists):
                raise TableAlreadyExistsError(f"Table {identifier} already exists") from None
            raise
        return ArcticTable(identifier, base, change)

    def check_new_name(self, identifier: TableIdentifier) -> None:
        """Raise unless a new table may take the name ``identifier``."""
        whole_table(identifier, "a new table")
        if _hidden(identifier.name):
            raise InvalidArgumentError(
                f"Table names ending in '{CHANGE_SUFFIX}' or '{STAGED_SUFFIX}' are reserved: {identifier}"
            )
        if not self.database_exists(identifier.database):
            raise NoSuchDatabaseError(f"Database '{identifier.database}' does not exist")
        if self.table_exists(identifier):
            raise TableAlreadyExistsError(f"Table {identifier} already exists")
        if self.load_view(identifier) is not None:
            raise TableAlreadyExistsError(f"Cannot create table {identifier}: a view of that name exists")

    def shallow_clone(
        self, source: ArcticTable, identifier: TableIdentifier, version: int | None
    ) -> ArcticTable:
        """``CREATE TABLE identifier SHALLOW CLONE source [VERSION AS OF version]`` (default: the newest
        version): a table whose stores' metadata names ``source``'s files at ``version``
        (writing/clone_metadata.py); nothing but metadata is written.

        The clone holds a write lease on the source while it is made, waits for a running expiration
        of the source to end (an expiration that starts later keeps every version while the lease
        lives), checks the version, and claims the files before its stores exist
        (records/clones.py): in the source's folder and in those of every table the source itself
        was cloned from. The base store's registration is the commit point, as in CREATE TABLE.
        """
        self.check_new_name(identifier)
        with leases.writing(source, clones.CLONING):
            tag_writes.wait_for_expiration(source, f"Clone {identifier} of {source.identifier}")
            try:
                pairs.reload(source)
            except IcebergNoSuchTable:
                raise NoSuchTableError(f"Cannot clone {source.identifier}: no such table") from None
            history = versions.history(source.base, source.change)
            version = history.latest if version is None and history.commits else (version or 0)
            checked_version(source, history, version)
            base_snapshot, change_snapshot = clone_metadata.snapshots_at(source, version)
            claim = clones.Claim.new(
                str(identifier), [s.manifest_list for s in (base_snapshot, change_snapshot) if s is not None]
            )
            holders = [layout.table_root(source.base.location()), *_clone_of(source.base)["holders"]]
            for holder in holders:
                clones.save(holder, claim)
            try:
                self._check_still_there(source)
                return self._register_clone(
                    source,
                    identifier,
                    base_snapshot,
                    change_snapshot,
                    {"claim": claim.claim_id, "holders": holders},
                )
            except BaseException:
                for holder in holders:
                    clones.release(holder, claim.claim_id)
                raise

    def _check_still_there(self, source: ArcticTable) -> None:
        """Raise unless ``source`` is still in the catalog, after its clone's claim was written: a
        DROP ... PURGE reads the claims after it drops the base store, so either it sees the claim
        or this sees the table gone."""
        found = self._load(source.identifier.base_id)
        if found is None or found.metadata.table_uuid != source.base.metadata.table_uuid:
            raise NoSuchTableError(
                f"Cannot clone {source.identifier}: it was dropped while the clone was made"
            )

    def _register_clone(
        self,
        source: ArcticTable,
        identifier: TableIdentifier,
        base_snapshot: Snapshot | None,
        change_snapshot: Snapshot | None,
        clone_of: dict[str, object],
    ) -> ArcticTable:
        self.remove_leftovers(identifier)
        root = self._new_table_root(identifier, None)
        if root is None:
            raise InvalidArgumentError(
                f"Cannot clone {source.identifier}: the catalog has no warehouse to place {identifier} in"
            )
        written: list[str] = []
        change = None
        try:
            if source.change is not None:
                written.append(
                    clone_metadata.write_first_metadata(
                        source.change,
                        change_snapshot,
                        f"{root}/change",
                        _clone_properties(source.change, None),
                    )
                )
                change = self.iceberg.register_table(identifier.change_id, written[-1])
            written.append(
                clone_metadata.write_first_metadata(
                    source.base, base_snapshot, f"{root}/base", _clone_properties(source.base, clone_of)
                )
            )
            base = self.iceberg.register_table(identifier.base_id, written[-1])
        except BaseException as e:
            if change is not None:
                self._drop_ident(identifier.change_id)
            storage.delete_files(written)
            _purge.remove_empty_folders(root)
            if isinstance(e, IcebergTableExists):
                raise TableAlreadyExistsError(f"Table {identifier} already exists") from None
            raise
        return ArcticTable(identifier, base, change)

    def publish(self, table: ArcticTable) -> ArcticTable:
        """Make a staged table (CTAS) visible under its name: one rename in the catalog."""
        identifier = table.identifier
        fault_point("ctas-before-publish")
        try:
            self.iceberg.rename_table(identifier.staged_id, identifier.base_id)
        except IcebergTableExists:
            self.discard_staged(table)
            raise TableAlreadyExistsError(f"Table {identifier} already exists") from None
        return self.load_table(identifier)

    def discard_staged(self, table: ArcticTable) -> None:
        """Drop a staged table and purge its files (a CTAS whose query failed)."""
        self._drop_stores([table.base] + ([table.change] if table.change is not None else []), purge=True)

    def _new_table_root(self, identifier: TableIdentifier, location: str | None) -> str | None:
        """Where a new table's stores go: ``{root}/base`` and ``{root}/change`` (Amoro's layout).

        A LOCATION that holds files is refused, as Delta refuses it: orphan removal and PURGE would
        otherwise treat those files as the table's. The default folder under the warehouse may hold
        the files of an earlier table of the same name dropped without PURGE; they stay where they
        are, and the new table takes a folder of its own beside them.
        """
        if location is not None:
            root = location.rstrip("/")
            storage.serve(self.storage, root)
            if not _purge.is_empty(root):
                raise InvalidArgumentError(
                    f"Cannot create table {identifier} at '{location}': the location is not empty"
                )
            if (outer := _purge.enclosing_table(root)) is not None:
                raise InvalidArgumentError(
                    f"Cannot create table {identifier} at '{location}': it is inside the "
                    f"folder of another table ({outer})"
                )
            return root
        warehouse = self.iceberg.properties.get("warehouse")
        if not warehouse:
            return None  # the catalog places the stores
        root = f"{warehouse.rstrip('/')}/{identifier.database}/{identifier.name}"
        return root if _purge.is_empty(root) else f"{root}-{uuid.uuid4().hex[:8]}"

    def drop_table(self, identifier: TableIdentifier, purge: bool = False) -> None:
        """Drop a table: the base store first (the commit point: the table is gone), then the change
        store. Works on a table whose change store is missing.

        With ``purge`` the files the stores' metadata names are deleted (purge.py), never a folder
        with what is in it. The change store goes last and first records where the base store's
        metadata is, so that a purge cut short is finished by the next CREATE or DROP of the name
        (:meth:`remove_leftovers`).
        """
        whole_table(identifier, "DROP TABLE")
        base = self._load(identifier.base_id)
        if base is None or _hidden(identifier.name):
            raise NoSuchTableError(f"Table or view not found: {identifier}")
        change = self._load(identifier.change_id) if base.properties.get(FORMAT_KEY) == "keyed" else None
        self._drop_and_purge(identifier, base, change, purge=purge)
        if purge:  # a shallow clone purged lets go of its sources' files (records/clones.py)
            clone_of = _clone_of(base)
            for holder in clone_of["holders"]:
                clones.release(holder, clone_of["claim"])

    def _drop_and_purge(
        self, identifier: TableIdentifier, base: Table, change: Table | None, *, purge: bool
    ) -> None:
        files = _purge.files_of_table(ArcticTable(identifier, base, change)) if purge else None
        if change is not None and (files is not None or PURGING_KEY in change.properties):
            # A journal left by an earlier PURGE cut short goes.
            if files is not None:
                commit.set_properties(change, {PURGING_KEY: base.metadata_location})
            else:
                commit.set_properties(change, removals=[PURGING_KEY])
            fault_point("drop-before-base")
        self._drop_ident(identifier.base_id)
        fault_point("drop-between-stores")
        if files is None:
            if change is not None:
                self._drop_ident(identifier.change_id)
            return
        # Clones' claims are read after the drop: a clone in the making checks after its claim that
        # its source is still there (shallow_clone), so one of the two sees the other.
        files.keep_owned(layout.table_root(base.location()), base.io)
        self._purge(files, base, change)

    def _purge(self, files: _purge.TableFiles, base: Table | None, change: Table | None) -> None:
        """Delete the files, the journal (the change store) last but its own metadata files."""
        _purge.delete_content(files)
        fault_point("purge-before-metadata")
        if base is not None:
            _purge.delete_metadata(base, files)
        if change is not None:
            self._drop_ident(tuple(change.name()))
            _purge.delete_metadata(change, files)
        _purge.remove_folders(files, _purge.root_of(base or change))  # type: ignore[arg-type]

    def remove_leftovers(self, identifier: TableIdentifier) -> bool:
        """Remove what an interrupted CREATE, CTAS or DROP left of a table whose base store is gone:
        a change store, a staged base store. A purge cut short is finished; the files of stores no
        statement ever saw are purged (a change store without snapshots, a CTAS that never
        published); a change store with data is what a DROP without PURGE left, and its files stay.
        Returns whether there was anything to remove."""
        if self.table_exists(identifier):
            return False
        staged = self._load(identifier.staged_id)
        change = self._load(identifier.change_id)
        if staged is not None:
            self._drop_stores([staged] + ([change] if change is not None else []), purge=True)
        elif change is not None and PURGING_KEY in change.properties:
            base = _purge.static_store(change.properties[PURGING_KEY])
            files = _purge.files_of([change] + ([base] if base is not None else []))
            files.keep_owned(_purge.root_of(change) or change.location(), change.io)
            self._purge(files, base, change)
        elif change is not None:
            self._drop_stores([change], purge=not change.snapshots())
        return staged is not None or change is not None

    def _drop_stores(self, stores: list[Table], purge: bool) -> None:
        files = _purge.files_of(stores) if purge else None
        for store in stores:
            self._drop_ident(tuple(store.name()))
        if files is not None:
            _purge.delete_content(files)
            for store in stores:
                _purge.delete_metadata(store, files)
            _purge.remove_folders(files, _purge.root_of(stores[0]))

    def _drop_ident(self, ident: tuple[str, ...]) -> None:
        try:
            self.iceberg.drop_table(ident)
        except IcebergNoSuchTable:
            pass  # a concurrent DROP got there first


def _clone_of(base: Table) -> dict:
    """Whose files a shallow clone claims: ``{"claim": id, "holders": [table folders]}`` (none for
    a table that is no shallow clone)."""
    raw = base.properties.get(CLONE_OF_KEY)
    return json.loads(raw) if raw else {"claim": None, "holders": []}


# A clone's properties: the source store's, without what names the source's history or work.
# A pending fast-forward belongs to the source: its snapshot ids name refs the clone does not have.
_NOT_CLONED = (TAG_PREFIX, PURGING_KEY, CLONE_OF_KEY, MAINTENANCE_PENDING_KEY, fast_forwards.PREFIX)


def _clone_properties(store: Table, clone_of: dict[str, object] | None) -> dict[str, str]:
    kept = {k: v for k, v in store.properties.items() if not k.startswith(_NOT_CLONED)}
    if clone_of is not None:
        kept[CLONE_OF_KEY] = json.dumps(clone_of, sort_keys=True)
    return kept


def _hidden(name: str) -> bool:
    return name.endswith(CHANGE_SUFFIX) or name.endswith(STAGED_SUFFIX)


def _change_schema(schema: Schema) -> Schema:
    """The change store's schema: the table's, with every non-key column optional (delete rows)."""
    keys = set(schema.identifier_field_ids)
    fields = [f if f.field_id in keys else _optional(f) for f in schema.fields]
    return Schema(*fields, identifier_field_ids=list(schema.identifier_field_ids))


def _optional(field):  # -> NestedField
    from pyiceberg.types import NestedField

    return NestedField(field.field_id, field.name, field.field_type, required=False, doc=field.doc)
