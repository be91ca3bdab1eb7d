"""The upsert-stream data: an initial load and C batches, generated once from a fixed seed.

Every system reads exactly these Parquet files, so every system receives the same commits. Besides
the files, the generator keeps the table's reference state in numpy arrays (indexed by key) and
records a checksum of it after the load and after every batch: the reference model that every
system's final table must match.

Layout of a work directory (``<work>/scale-<s>-c<C>-seed<seed>/``)::

    load.parquet              N0 rows: the table's columns
    batch-000.parquet ...     C batches: the table's columns + ``op`` ('U' upsert, 'D' delete)
    manifest.json             parameters, row counts and reference checksums (written last)
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS_AT_SCALE_1 = 2_000_000
BATCH_FRACTION = 0.01
UPDATE_SHARE, INSERT_SHARE = 0.70, 0.20  # the rest (10%) are deletes
STATUSES = np.array(["open", "paid", "shipped", "delivered", "cancelled"])
REGIONS = np.array(["na-east", "na-west", "sa", "eu-west", "eu-central", "mea", "apac-north", "apac-south"])
EPOCH_US = 1_700_000_000_000_000  # 2023-11-14, microseconds
COLUMNS = ["order_id", "customer_id", "status", "amount", "region", "updated_at"]
ARROW_SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("customer_id", pa.int64()),
        pa.field("status", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("region", pa.string()),
        pa.field("updated_at", pa.timestamp("us", tz="UTC")),
    ]
)
BATCH_SCHEMA = ARROW_SCHEMA.append(pa.field("op", pa.string(), nullable=False))
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class Workload:
    scale: float
    commits: int
    seed: int = 42
    fixed_batch_rows: int | None = None  # W2: keep the batch of the smaller scale while the table grows

    @property
    def initial_rows(self) -> int:
        return max(100, round(ROWS_AT_SCALE_1 * self.scale))

    @property
    def batch_rows(self) -> int:
        if self.fixed_batch_rows is not None:
            return self.fixed_batch_rows
        return max(10, round(self.initial_rows * BATCH_FRACTION))

    def directory(self, work: str) -> str:
        name = f"scale-{self.scale:g}-c{self.commits}-seed{self.seed}"
        if self.fixed_batch_rows is not None:
            name += f"-batch{self.fixed_batch_rows}"
        return os.path.join(os.path.abspath(work), name)


def load_path(directory: str) -> str:
    return os.path.join(directory, "load.parquet")


def batch_path(directory: str, index: int) -> str:
    return os.path.join(directory, f"batch-{index:03d}.parquet")


def read_manifest(directory: str) -> dict:
    with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def checksum_of(order_id: np.ndarray, amount_cents: np.ndarray, status_code: np.ndarray) -> dict:
    """The reference checksum; systems compute the same fields from their tables (see ``checksum.py``)."""
    counts = np.bincount(status_code, minlength=len(STATUSES))
    return {
        "count": int(order_id.size),
        "sum_order_id": int(order_id.sum(dtype=np.int64)),
        "sum_amount_cents": int(amount_cents.sum(dtype=np.int64)),
        "count_by_status": {str(s): int(c) for s, c in zip(STATUSES, counts, strict=True) if c},
    }


class _State:
    """The table as columns indexed by key (keys are dense integers from 1)."""

    def __init__(self, capacity: int) -> None:
        self.alive = np.zeros(capacity + 1, dtype=bool)
        self.customer = np.zeros(capacity + 1, dtype=np.int64)
        self.status = np.zeros(capacity + 1, dtype=np.int8)
        self.cents = np.zeros(capacity + 1, dtype=np.int64)
        self.region = np.zeros(capacity + 1, dtype=np.int8)
        self.updated = np.zeros(capacity + 1, dtype=np.int64)

    def write(self, keys, customer, status, cents, region, updated) -> None:
        self.alive[keys] = True
        self.customer[keys], self.status[keys], self.cents[keys] = customer, status, cents
        self.region[keys], self.updated[keys] = region, updated

    def checksum(self) -> dict:
        keys = np.flatnonzero(self.alive)
        return checksum_of(keys, self.cents[keys], self.status[keys])


def _rows(rng: np.random.Generator, keys: np.ndarray, base_us: int) -> dict[str, np.ndarray]:
    n = keys.size
    return {
        "customer": rng.integers(1, 100_001, n, dtype=np.int64),
        "status": rng.integers(0, len(STATUSES), n, dtype=np.int8),
        "cents": rng.integers(100, 100_000_01, n, dtype=np.int64),  # 1.00 .. 100000.00
        "region": rng.integers(0, len(REGIONS), n, dtype=np.int8),
        "updated": base_us + rng.integers(0, 3_600_000_000, n, dtype=np.int64),
    }


def _table(keys: np.ndarray, rows: dict[str, np.ndarray], op: np.ndarray | None) -> pa.Table:
    arrays = [
        pa.array(keys, pa.int64()),
        pa.array(rows["customer"], pa.int64()),
        pa.array(STATUSES[rows["status"]], pa.string()),
        pa.array(rows["cents"] / 100.0, pa.float64()),
        pa.array(REGIONS[rows["region"]], pa.string()),
        pa.array(rows["updated"], pa.timestamp("us", tz="UTC")),
    ]
    if op is None:
        return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)
    return pa.Table.from_arrays([*arrays, pa.array(op, pa.string())], schema=BATCH_SCHEMA)


def generate(workload: Workload, work: str, *, log=print) -> str:
    """Write the workload's files under ``work`` (unless already there); return their directory."""
    directory = workload.directory(work)
    manifest_file = os.path.join(directory, "manifest.json")
    if os.path.exists(manifest_file) and read_manifest(directory).get("version") == MANIFEST_VERSION:
        return directory
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(workload.seed)
    n0, b = workload.initial_rows, workload.batch_rows
    n_update = round(b * UPDATE_SHARE)
    n_insert = round(b * INSERT_SHARE)
    n_delete = b - n_update - n_insert
    state = _State(n0 + workload.commits * n_insert)

    log(f"datagen: load of {n0:,} rows, {workload.commits} batches of {b:,} rows -> {directory}")
    keys = np.arange(1, n0 + 1, dtype=np.int64)
    rows = _rows(rng, keys, EPOCH_US)
    state.write(keys, **rows)
    pq.write_table(_table(keys, rows, None), load_path(directory), row_group_size=256 * 1024)
    reference = [state.checksum()]
    next_key = n0 + 1
    for index in range(workload.commits):
        live = np.flatnonzero(state.alive)
        touched = rng.choice(live, size=n_update + n_delete, replace=False)
        updated, deleted = touched[:n_update], touched[n_update:]
        inserted = np.arange(next_key, next_key + n_insert, dtype=np.int64)
        next_key += n_insert
        upsert_keys = np.concatenate([updated, inserted])
        batch_keys = np.concatenate([upsert_keys, deleted])
        base_us = EPOCH_US + (index + 1) * 3_600_000_000
        rows = _rows(rng, batch_keys, base_us)
        op = np.array(["U"] * upsert_keys.size + ["D"] * deleted.size)
        order = rng.permutation(batch_keys.size)  # updates, inserts and deletes interleaved
        pq.write_table(
            _table(batch_keys[order], {k: v[order] for k, v in rows.items()}, op[order]),
            batch_path(directory, index),
        )
        u = upsert_keys.size
        state.write(upsert_keys, **{k: v[:u] for k, v in rows.items()})
        state.alive[deleted] = False
        reference.append(state.checksum())

    manifest = {
        "version": MANIFEST_VERSION,
        "workload": asdict(workload),
        "initial_rows": n0,
        "batch_rows": b,
        "batch_mix": {"update": n_update, "insert": n_insert, "delete": n_delete},
        "reference_checksums": reference,  # [after load, after batch 1, ..., after batch C]
    }
    with open(manifest_file + ".tmp", "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    os.replace(manifest_file + ".tmp", manifest_file)
    return directory
