"""What arctic's own file I/O costs in requests on an S3 API server (moto's, on loopback, counting
every request it answers: tests/s3_harness.py). No Spark."""

from __future__ import annotations

import os

import pytest
from s3_harness import BUCKET, catalog_properties, objects, s3_server

from arctic_sql.table.files import storage
from arctic_sql.table.records import leases

ROOT = f"s3://{BUCKET}/wh/db/t"


@pytest.fixture(scope="module")
def server():
    with s3_server() as started:
        yield started


@pytest.fixture
def on_server(server, monkeypatch):
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    before = storage.routes()
    storage.configure(
        storage.StorageConfig.of(catalog_properties("/unused", server.endpoint, "s3://lake/wh"))
    )
    yield server
    storage.restore(before)


def test_a_write_lease_is_two_puts_and_an_ended_lease_protects_nothing(on_server):
    with on_server.log.measure() as requests:
        lease = leases.take(ROOT, "insert")
        leases.release(ROOT, lease.lease_id)
    assert len(requests) <= 3, requests.table()
    assert requests.count("PUT", "/writes/") == 2 and requests.count("HEAD") == 0, requests.table()
    assert leases.find(ROOT, lease.lease_id) is None and leases.live_leases(ROOT) == []
    assert leases.expire(ROOT) == 1  # orphan removal deletes the ended record
    assert objects(on_server.client(), "wh/db/t/writes/") in ([], ["wh/db/t/writes/"])


def test_a_small_file_is_one_put_with_no_folder_markers(on_server):
    with on_server.log.measure() as requests:
        fs, path = storage.folder(f"{ROOT}/change/data/n=1")
        with fs.open_output_stream(f"{path}/part-0.parquet") as out:
            out.write(b"x" * 1000)
    assert [(r.method, r.path) for r in requests.requests] == [
        ("PUT", "/lake/wh/db/t/change/data/n=1/part-0.parquet")
    ]
    assert objects(on_server.client(), "wh/db/t/change/") == ["wh/db/t/change/data/n=1/part-0.parquet"]


def test_a_metadata_file_written_through_the_tables_file_io_is_one_put_and_knows_its_length(on_server):
    io = storage.file_io(storage.active())  # what the catalog's tables use too (py-io-impl)
    output = io.new_output(f"{ROOT}/metadata/m0.avro")
    with on_server.log.measure() as requests:
        with output.create(overwrite=True) as out:
            out.write(b"y" * 5000)
        assert len(output) == 5000  # pyiceberg asks this of every manifest it writes
    assert [r.method for r in requests.requests] == ["PUT"], requests.table()
    assert len(io.new_input(f"{ROOT}/metadata/m0.avro")) == 5000
