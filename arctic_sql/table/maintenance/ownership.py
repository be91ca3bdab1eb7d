"""Which files a table may delete: its own, and of those only what no clone still claims.

A table owns the files under its own folder (its stores' locations and the table folder around
them). A shallow clone names files under its source's folder, which it never deletes, and leaves
a claim in that folder (records/clones.py) which every deleting path of the source reads: snapshot
expiration before it deletes, orphan removal after it reads the metadata, DROP ... PURGE before it
deletes. docs/design.md ("Who owns which files") says why that is enough.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from pyiceberg.manifest import read_manifest_list

from arctic_sql.errors import IncompleteTableError
from arctic_sql.table.format import layout
from arctic_sql.table.records import clones

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

    from arctic_sql.table.model.table import ArcticTable


def normalized(path: str) -> str:
    """One spelling per file: ``file:///x``, ``file:/x`` and ``/x`` are the same local file."""
    if path.startswith("file:"):
        return urlparse(path).path
    return path


def _prefixes(folders: Iterable[str]) -> tuple[str, ...]:
    return tuple(normalized(f).rstrip("/") + "/" for f in folders)


def claimed_by(io: FileIO, claim: clones.Claim) -> set[str]:
    """The files one claim holds (normalized): its manifest lists, their manifests and the data and
    delete files those list as live."""
    held: set[str] = set()
    for manifest_list in claim.manifest_lists:
        held.add(manifest_list)
        try:
            manifests = list(read_manifest_list(io.new_input(manifest_list)))
        except FileNotFoundError as e:
            # Never expected: the claim keeps it. Without it the clone's files are unknown: delete nothing.
            raise IncompleteTableError(
                f"The manifest list {manifest_list} that clone {claim.clone} holds is "
                "missing; no file is deleted until it is known what the clone reads"
            ) from e
        for manifest in manifests:
            held.add(manifest.manifest_path)
            held.update(
                e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=True)
            )
    return {normalized(p) for p in held}


def claimed_under(table_root: str, io: FileIO) -> set[str]:
    """Every file under the table folder ``table_root`` that a shallow clone still claims (normalized)."""
    held: set[str] = set()
    for claim in clones.claims(table_root):
        held |= claimed_by(io, claim)
    return held


def claimed(table: ArcticTable) -> set[str]:
    return claimed_under(layout.table_root(table.base.location()), table.base.io)


def deletable_under(
    table_root: str, store_folders: Iterable[str], io: FileIO, paths: Iterable[str]
) -> list[str]:
    """Those of ``paths`` that the table at ``table_root`` (stores at ``store_folders``) may delete:
    under its own folders and claimed by no clone. Read the claims after the metadata that made
    the paths unreferenced (see docs/design.md)."""
    folders = _prefixes([table_root, *store_folders])
    own = [p for p in paths if normalized(p).startswith(folders)]
    if not own:
        return []
    held = claimed_under(table_root, io)
    return [p for p in own if normalized(p) not in held]


def deletable(table: ArcticTable, paths: Iterable[str]) -> list[str]:
    stores = [table.base] + ([table.change] if table.change is not None else [])
    return deletable_under(
        layout.table_root(table.base.location()), [s.location() for s in stores], table.base.io, paths
    )
