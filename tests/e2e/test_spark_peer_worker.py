"""The Spark peers benchmark's worker protocol: Delta on its own Spark (pyspark 4.2.1, Delta 4.4.0 jars)
takes the benchmark's MERGE of CDC batches, one request at a time, and ends with the reference model's rows.

What benchmarks/spark_peers.py relies on: the worker answers every request with one JSON line, the
table is the one Delta's docs advise for upserts (deletion vectors on), and its rows after the
commits are the model's (``datagen``'s checksum after the same commits).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from arctic_sql.jars import MissingJarsError

# benchmarks/ is not installed with the package: import it from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import datagen  # noqa: E402
from benchmarks.systems.spark_peer import PEERS, Peer, StepError  # noqa: E402


def test_the_delta_worker_merges_cdc_batches_to_the_models_rows(tmp_path):
    workload = datagen.Workload(scale=0.0005, commits=2, seed=7, fixed_batch_rows=100)  # 1,000 rows
    data = datagen.generate(workload, str(tmp_path / "data"), log=lambda _: None)
    reference = datagen.read_manifest(data)["reference_checksums"]
    try:
        peer = Peer(PEERS["delta"], str(tmp_path / "delta"), {"spark.master": "local[1]"}, timeout=300)
    except (MissingJarsError, StepError) as e:
        pytest.skip(f"Delta's Spark runtime is not here: {e}")
    try:
        peer.ready()
        assert peer.info["versions"]["spark"] == "4.2.1"
        assert peer.load("orders", data) > 0
        for index in range(workload.commits):
            assert peer.merge("orders", datagen.batch_path(data, index)) > 0
        assert peer.checksum("orders") == reference[workload.commits]
        properties = {r["key"]: r["value"] for r in peer.query("orders", "SHOW TBLPROPERTIES {table}")[0]}
        assert properties.get("delta.enableDeletionVectors") == "true"
        with pytest.raises(StepError, match="orders_missing"):
            peer.query("orders", "SELECT * FROM bench.orders_missing")
        assert peer.checksum("orders") == reference[workload.commits]  # the worker goes on after an error
    finally:
        peer.close()
