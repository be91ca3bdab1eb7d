"""The metadata of a shallow clone: a store's first metadata file, naming its source's files.

``CREATE TABLE t2 SHALLOW CLONE t VERSION AS OF v`` gives each store of ``t2`` one snapshot: the
snapshot of ``t``'s store that version ``v`` reads (the base snapshot whose merged state is at or
before ``v``, the change snapshot at ``v``). The snapshot is the source's own, unchanged: the same
manifest list, so the same files with the same sequence numbers (the change store's transaction
numbers), watermarks and summaries, and the clone reads exactly what the source reads at ``v``. Its
history starts there, as a Delta clone's does: the clone's one version is ``v``, its next commits
``v + 1``, ``v + 2``... (the store's last sequence number is the snapshot's). Everything else is the
clone's own: a new table UUID, its location, no metadata log, no statistics, and the source's
properties without its tags and bookkeeping.

Nothing but this metadata file is written; catalog.py registers it and claims the source's files
(records/clones.py) before.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from pyiceberg.serializers import ToOutputFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadataV2
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import Snapshot, SnapshotLogEntry

from arctic_sql.errors import UnsupportedOperationError
from arctic_sql.table.format import versions
from arctic_sql.table.model.table import ArcticTable


def snapshots_at(table: ArcticTable, version: int) -> tuple[Snapshot | None, Snapshot | None]:
    """The (base, change) snapshots that version ``version`` of ``table`` reads (None: the store is
    empty then)."""
    if table.change is None:
        return versions.snapshot_at(table.base, version), None
    return versions.base_snapshot_for(table.base, version), versions.snapshot_at(table.change, version)


def write_first_metadata(
    source: Table, snapshot: Snapshot | None, location: str, properties: Mapping[str, str]
) -> str:
    """Write the first metadata file of a clone's store at ``location`` whose one snapshot is
    ``snapshot`` of ``source`` (none: an empty store); return the file's location."""
    metadata = source.metadata
    if not isinstance(metadata, TableMetadataV2):
        raise UnsupportedOperationError(
            f"Cannot clone {source.name()}: only Iceberg format version 2 stores clone"
        )
    update: dict[str, object] = {
        "location": location.rstrip("/"),
        "table_uuid": uuid.uuid4(),
        "last_updated_ms": int(time.time() * 1000),
        "snapshots": [],
        "current_snapshot_id": None,
        "snapshot_log": [],
        "refs": {},
        "metadata_log": [],
        "statistics": [],
        "partition_statistics": [],
        "properties": dict(properties),
    }
    if snapshot is not None:
        # The source's parents are not the clone's: its history begins here (as after an expiration).
        own = snapshot.model_copy(update={"parent_snapshot_id": None})
        update.update(
            {
                "snapshots": [own],
                "current_snapshot_id": own.snapshot_id,
                "snapshot_log": [
                    SnapshotLogEntry(snapshot_id=own.snapshot_id, timestamp_ms=own.timestamp_ms)
                ],
                "refs": {
                    # The pydantic plugin misses the defaults pyiceberg gives inside Annotated[...].
                    MAIN_BRANCH: SnapshotRef(  # type: ignore[call-arg]
                        snapshot_id=own.snapshot_id, snapshot_ref_type=SnapshotRefType.BRANCH
                    )
                },
                "last_sequence_number": own.sequence_number,
            }
        )
    path = f"{location.rstrip('/')}/metadata/00000-{uuid.uuid4()}.metadata.json"
    ToOutputFile.table_metadata(metadata.model_copy(update=update), source.io.new_output(path))
    return path
