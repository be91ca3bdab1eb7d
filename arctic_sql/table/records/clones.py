"""The clones of a table: which shallow clones still read files under its folder.

A shallow clone (``CREATE TABLE t2 SHALLOW CLONE t``) is metadata of its own that names ``t``'s
files. ``t`` must not delete them while the clone may read them, so a clone leaves a **claim** in the
folder of every table whose files it names: ``{table}/clones/{claim id}.json``, with the manifest
lists of the snapshots it was made from. Every file the clone will ever name outside its own folder
is reachable from those manifest lists (its own commits write files only under its own folder), so
the files they reach stay, whatever the clone does later, until the claim is released: when the
clone is dropped with PURGE. The claim is written before the clone's stores exist, so a crash
leaves a claim without a clone (files kept for nothing), never a clone without a claim.

A claim is one object written once and deleted once, never renamed, like the leases beside it
(records/leases.py). Reading the files a claim holds is maintenance/ownership.py's.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass

from arctic_sql.table.files import storage

FOLDER = "clones"
CLONING = "clone"  # the operation of a clone's write lease on its source, which expiration looks for


@dataclass(frozen=True)
class Claim:
    """One clone's hold on the files of one table."""

    claim_id: str
    clone: str  # the clone's name when it was made (db.t2), for people reading the folder
    created_ms: int
    manifest_lists: tuple[str, ...]  # of the snapshots the clone was made from

    @classmethod
    def new(cls, clone: str, manifest_lists: list[str]) -> Claim:
        return cls(uuid.uuid4().hex, clone, int(time.time() * 1000), tuple(manifest_lists))


def folder(table_root: str) -> str:
    return f"{table_root.rstrip('/')}/{FOLDER}"


def _path(table_root: str, claim_id: str) -> str:
    return f"{folder(table_root)}/{claim_id}.json"


def save(table_root: str, claim: Claim) -> None:
    storage.replace_file(
        _path(table_root, claim.claim_id), json.dumps(asdict(claim), sort_keys=True).encode()
    )


def claims(table_root: str) -> list[Claim]:
    """Every claim on the table's files. An unreadable claim raises: nothing may be deleted without
    knowing what the clones hold."""
    found = []
    for record in storage.json_records(folder(table_root)):
        found.append(
            Claim(
                record["claim_id"],
                record["clone"],
                int(record["created_ms"]),
                tuple(record["manifest_lists"]),
            )
        )
    return found


def release(table_root: str, claim_id: str) -> None:
    storage.delete_files([_path(table_root, claim_id)])
