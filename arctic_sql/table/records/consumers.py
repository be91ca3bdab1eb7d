"""Consumers: streams that tell the table how far they have read, so expiration waits for them.

A stream read with ``consumerId`` records, each time Spark fixes a micro-batch, the version whose
changes the batch reads after (for a first batch of the table's rows, that batch's version) in
``{table}/consumers/{consumer id}.json``: from its first batch on, what the stream needs next is held. A consumer is *live* while
it recorded progress within ``consumer.expiration-time`` minutes; ``expire_snapshots`` keeps every
version a live consumer has not read yet (the changes after its version), whatever
``snapshot.keep.duration`` says. A consumer that stops for longer stops holding history back, and
its file stays as a record (``db.t.consumers`` lists every one) until it is read from again.

Spark fixes a batch only once the batches before it were written, and may replay a fixed batch after
a crash, so the record lags what the stream delivered by a batch (the last batch of an availableNow
run included): the history it keeps is a little more than needed, never less.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.records.leases import now_ms

if TYPE_CHECKING:
    from arctic_sql.table.model.table import ArcticTable

FOLDER = "consumers"


@dataclass(frozen=True)
class Consumer:
    """One consumer's progress: it has read every change up to ``version``."""

    consumer_id: str
    version: int
    updated_ms: int

    def live(self, expiration_minutes: int, at_ms: int | None = None) -> bool:
        return (now_ms() if at_ms is None else at_ms) - self.updated_ms < expiration_minutes * 60_000


def _folder(table_root: str) -> str:
    return f"{table_root.rstrip('/')}/{FOLDER}"


def _root(table: ArcticTable) -> str:
    return layout.table_root(table.base.location())


def record(table: ArcticTable, consumer_id: str, version: int) -> Consumer:
    """Save that ``consumer_id`` has read ``table`` up to ``version`` (atomically replaced)."""
    consumer = Consumer(consumer_id, version, now_ms())
    storage.replace_file(f"{_folder(_root(table))}/{consumer_id}.json", json.dumps(asdict(consumer)).encode())
    return consumer


def consumers(table: ArcticTable) -> list[Consumer]:
    """Every consumer of ``table``, live or not, by id."""
    found = [Consumer(**record) for record in storage.json_records(_folder(_root(table)))]
    return sorted(found, key=lambda c: c.consumer_id)


def find(table: ArcticTable, consumer_id: str) -> Consumer | None:
    return next((c for c in consumers(table) if c.consumer_id == consumer_id), None)


def oldest_needed(table: ArcticTable) -> int | None:
    """The smallest version a live consumer has read up to (it needs the changes after it); None
    when no consumer is live."""
    minutes = table.settings.consumer_expiration_time
    live = [c.version for c in consumers(table) if c.live(minutes)]
    return min(live) if live else None
