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


def test_a_data_file_read_again_in_a_process_is_one_get(on_server):
    """A file's footer is read once per process: the first read of a file is its footer's GET and its
    columns', every later one the columns' alone; none asks for a size (the manifest has it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    from arctic_sql.table.reading.node_merge import by_name

    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "v", StringType()))
    files = []
    for n in range(3):
        location = f"{ROOT}/base/data/{n:032x}/part-{n}.parquet"
        fs, path = storage.filesystem(location)
        rows = pa.table({"id": [n, n + 10], "v": ["a", "b"]}, schema=schema_to_pyarrow(schema))
        pq.write_table(rows, path, filesystem=fs)
        size = fs.get_file_info(path).size
        files.append(
            DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=location,
                file_format=FileFormat.PARQUET,
                record_count=2,
                file_size_in_bytes=size,
            )
        )
    reads = []
    for _ in range(3):
        with on_server.log.measure() as requests:
            dataset = by_name(files, schema)
            assert dataset is not None and sorted(dataset.to_table()["id"].to_pylist()) == [
                0,
                1,
                2,
                10,
                11,
                12,
            ]
        reads.append(requests)
    assert reads[0].count("HEAD") == 0 and reads[0].count("GET", ".parquet") == 2 * len(files), reads[
        0
    ].table()
    for again in reads[1:]:
        assert again.count("HEAD") == 0 and again.count("GET", ".parquet") == len(files), again.table()
        assert len(again) == len(files), again.table()


def test_a_new_metadata_file_is_one_put_with_no_existence_check(on_server):
    """A metadata file is written under a new uuid: pyiceberg's check that nothing is there was a
    HEAD and a LIST. A file under any other name is still checked (and refused when it exists)."""
    import uuid

    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.serializers import ToOutputFile
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.types import LongType, NestedField

    from arctic_sql.table.files import metadata_cache

    metadata_cache.install()
    io = storage.file_io(storage.active())
    schema = Schema(NestedField(1, "id", LongType(), required=True))
    metadata = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, ROOT)
    location = f"{ROOT}/metadata/00001-{uuid.uuid4()}.metadata.json"
    with on_server.log.measure() as requests:
        ToOutputFile.table_metadata(metadata, io.new_output(location))
    assert [(r.method, r.path) for r in requests.requests] == [("PUT", location[len("s3:/") :])]

    other = f"{ROOT}/metadata/v1.metadata.json"
    ToOutputFile.table_metadata(metadata, io.new_output(other))
    with pytest.raises(FileExistsError):
        ToOutputFile.table_metadata(metadata, io.new_output(other))


def test_an_avro_file_this_process_wrote_is_read_back_without_a_request(on_server):
    """Every commit reads its parent's manifest list, which the last commit of this process wrote:
    read from the bytes written (a HEAD and a GET before). A file written by another process (here
    straight to the store) is read from the store, and a file whose upload failed is not kept."""
    io = storage.file_io(storage.active())
    written = f"{ROOT}/metadata/snap-1-0-{'a' * 32}.avro"
    with io.new_output(written).create(overwrite=True) as out:
        out.write(b"avro" * 1000)
    with on_server.log.measure() as requests:
        with io.new_input(written).open() as stream:
            assert stream.read() == b"avro" * 1000
    assert len(requests) == 0, requests.table()

    elsewhere = f"{ROOT}/metadata/snap-2-0-{'b' * 32}.avro"
    fs, path = storage.filesystem(elsewhere)
    with fs.open_output_stream(path) as out:
        out.write(b"other" * 100)
    with on_server.log.measure() as requests:
        with io.new_input(elsewhere).open() as stream:
            assert stream.read() == b"other" * 100
    assert requests.count("GET") == 1, requests.table()

    failed = f"s3://no-such-bucket/wh/metadata/snap-3-0-{'c' * 32}.avro"
    with pytest.raises(OSError):
        with io.new_output(failed).create(overwrite=True) as out:
            out.write(b"lost")
    from arctic_sql.table.files import file_io

    assert file_io.kept(failed) is None
