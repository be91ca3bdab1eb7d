"""Where files go and what their paths say.

Writers lay files out as ``{store location}/data/{write id}/{partition dirs}/arctic_node={id}/
arctic_op={upsert|delete}/part-*.parquet``: the tree node and (in the change store) the kind of
change are directory names that Spark's ``partitionBy`` writes, so a file's path records its node
and kind without any side table. Base files have no ``arctic_op`` directory.
"""

from __future__ import annotations

import uuid
from enum import StrEnum


class Store(StrEnum):
    """The two Iceberg tables of an arctic table (a str: paths, properties and rows carry the value)."""

    BASE = "base"
    CHANGE = "change"


NODE_COLUMN = "arctic_node"
OP_COLUMN = "arctic_op"
UPSERT = "upsert"
DELETE = "delete"


def table_root(base_location: str) -> str:
    """The folder of a whole table (both stores, optimizing records, write leases) from its base store's."""
    return base_location.rstrip("/").removesuffix("/base")


def new_write_location(store_location: str) -> str:
    return f"{store_location.rstrip('/')}/data/{uuid.uuid4().hex}"


def write_folder(path: str) -> str:
    """The folder of the write that made the data file at ``path`` (``{store}/data/{write id}``, see
    :func:`new_write_location`); the file's own folder for a path outside that layout."""
    head, data, rest = path.rpartition("/data/")
    if not data or "/" not in rest:
        return path.rsplit("/", 1)[0]
    return f"{head}/data/{rest.split('/', 1)[0]}"


def parse_file_path(path: str) -> tuple[int, bool]:
    """(node id, is a delete file) of a data file; files outside the layout are the root node."""
    node_id, is_delete = 1, False
    for segment in path.split("/"):
        if segment.startswith(NODE_COLUMN + "="):
            node_id = int(segment.split("=", 1)[1])
        elif segment.startswith(OP_COLUMN + "="):
            is_delete = segment.split("=", 1)[1] == DELETE
    return node_id, is_delete
