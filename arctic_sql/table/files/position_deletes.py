"""Iceberg v2 position-delete files of the base store: which rows of a base file are gone.

Minor optimizing (issue: optimizing that writes what changed) leaves a large base file in place
when only a few of its keys changed, and writes a position-delete file for the rows the changes
supersede, as Amoro's minor optimizing and Iceberg's merge-on-read writers do. The files follow the
Iceberg spec, so any Iceberg reader (pyiceberg's scan included) applies them:

- columns ``file_path`` (field id 2147483546) and ``pos`` (2147483545), sorted by both;
- *file-scoped*: one delete file names one data file, and the ``file_path`` bounds in the manifest
  are that file's location, which is how Iceberg readers match it without reading it. A data file
  has at most one delete file: a minor that deletes more rows of it writes one file with the old
  and the new positions and removes the old file in the same commit.

Delete files live beside the base files of their node, named ``pos-deletes-*.parquet``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table

from arctic_sql.table.files import storage

PATH_FIELD_ID = 2147483546  # Iceberg's reserved ids of a position-delete file's columns
POS_FIELD_ID = 2147483545
PREFIX = "pos-deletes-"

SCHEMA = pa.schema(
    [
        pa.field(
            "file_path",
            pa.string(),
            nullable=False,
            metadata={b"PARQUET:field_id": str(PATH_FIELD_ID).encode()},
        ),
        pa.field(
            "pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_FIELD_ID).encode()}
        ),
    ]
)


def is_delete_file(path: str) -> bool:
    """Whether ``path`` is a position-delete file by its name (as the writers here name them)."""
    return path.rsplit("/", 1)[-1].startswith(PREFIX)


def is_position_deletes(data_file: DataFile) -> bool:
    return data_file.content == DataFileContent.POSITION_DELETES


def referenced_path(delete_file: DataFile) -> str | None:
    """The data file a file-scoped delete file names (its ``file_path`` bounds are equal), or None."""
    lower = (delete_file.lower_bounds or {}).get(PATH_FIELD_ID)
    upper = (delete_file.upper_bounds or {}).get(PATH_FIELD_ID)
    return lower.decode() if lower is not None and lower == upper else None


def write(directory: str, data_path: str, positions: np.ndarray) -> str:
    """Write the sorted, distinct ``positions`` of the data file ``data_path`` as one delete file
    under ``directory``; return its location."""
    fs, path = storage.folder(directory)
    location = f"{path.rstrip('/')}/{PREFIX}{uuid.uuid4().hex}.parquet"
    rows = pa.table(
        [
            pa.array(np.full(len(positions), data_path, dtype=object), pa.string()),
            pa.array(positions, pa.int64()),
        ],
        schema=SCHEMA,
    )
    pq.write_table(rows, location, filesystem=fs, use_dictionary=["file_path"])
    return storage.prefix(directory, path) + location


def data_file(store: Table, location: str) -> DataFile:
    """The Iceberg entry of a delete file written by :func:`write`: partition and spec of its
    folder, the referenced data file as its ``file_path`` bounds, the position range."""
    from arctic_sql.table.format.partitioning import record_from_path

    input_file = store.io.new_input(location)
    with input_file.open() as stream:
        parquet = pq.ParquetFile(stream)
        count = parquet.metadata.num_rows
        first = parquet.read_row_group(0, columns=["file_path"]).column(0)[0].as_py() if count else ""
        positions = parquet.read(columns=["pos"]).column(0) if count else pa.array([], pa.int64())
    target = first.encode()
    low = int(positions[0].as_py()) if count else 0
    high = int(positions[-1].as_py()) if count else 0
    return DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=record_from_path(location, store.spec(), store.schema()),
        record_count=count,
        file_size_in_bytes=len(input_file),
        column_sizes=None,
        value_counts={PATH_FIELD_ID: count, POS_FIELD_ID: count},
        null_value_counts={PATH_FIELD_ID: 0, POS_FIELD_ID: 0},
        nan_value_counts=None,
        lower_bounds={PATH_FIELD_ID: target, POS_FIELD_ID: low.to_bytes(8, "little", signed=True)},
        upper_bounds={PATH_FIELD_ID: target, POS_FIELD_ID: high.to_bytes(8, "little", signed=True)},
        split_offsets=None,
        equality_ids=None,
        sort_order_id=None,
        spec_id=store.spec().spec_id,
        key_metadata=None,
    )


def positions(io: FileIO, delete_files: Iterable[DataFile]) -> dict[str, np.ndarray]:
    """Per data file location: the sorted positions its delete files delete."""
    found: dict[str, list[np.ndarray]] = {}
    for delete_file in delete_files:
        with io.new_input(delete_file.file_path).open() as stream:
            rows = pq.read_table(stream, columns=["file_path", "pos"])
        paths = rows.column(0).to_numpy(zero_copy_only=False)
        pos = rows.column(1).to_numpy()
        for path in np.unique(paths):
            found.setdefault(str(path), []).append(pos[paths == path])
    return {path: np.unique(np.concatenate(parts)) for path, parts in found.items()}


def attach(
    data_files: Sequence[tuple[str, str, int]], delete_files: Sequence[tuple[DataFile, str, int]]
) -> dict[str, tuple[DataFile, ...]]:
    """Per data file location, the delete files that apply to it.

    ``data_files``: (location, partition, data sequence number); ``delete_files``: (file, partition,
    sequence number). A file-scoped delete file applies to the file it names; any other (written by
    another engine) to every data file of its partition at or below its sequence number, which is
    Iceberg's rule (readers then match rows by ``file_path``).
    """
    result: dict[str, list[DataFile]] = {}
    wide: dict[str, list[tuple[DataFile, int]]] = {}
    for delete_file, partition, sequence in delete_files:
        target = referenced_path(delete_file)
        if target is not None:
            result.setdefault(target, []).append(delete_file)
        else:
            wide.setdefault(partition, []).append((delete_file, sequence))
    if wide:
        for location, partition, sequence in data_files:
            for delete_file, delete_sequence in wide.get(partition, ()):
                if sequence <= delete_sequence:
                    result.setdefault(location, []).append(delete_file)
    return {location: tuple(files) for location, files in result.items()}
