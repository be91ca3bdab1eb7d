"""Small records in the table's folders (leases, optimizing records): read whole, or refused by name."""

from __future__ import annotations

import json
import socket

import pytest

from arctic_sql.errors import ExecutionError, InvalidArgumentError
from arctic_sql.table.files import storage


def test_records_are_read_and_a_broken_one_is_named(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"id": 1}))
    (tmp_path / "notes.txt").write_text("not a record")
    assert storage.json_records(str(tmp_path)) == [{"id": 1}]
    (tmp_path / "b.json").write_text("")
    with pytest.raises(
        ExecutionError, match=rf"Cannot read the record {tmp_path}/b.json: .*remove or repair it"
    ):
        storage.json_records(str(tmp_path))


# the file systems of the catalog's storage properties ------------------------------------------------
SECRET = "wJalrXUtnFEMI-not-a-real-secret"


@pytest.fixture
def restore_storage():
    before = storage.routes()
    yield
    storage.restore(before)


def s3_config(endpoint: str = "http://127.0.0.1:9000", **extra: str) -> storage.StorageConfig:
    return storage.StorageConfig.of(
        {
            "type": "sql",
            "uri": "sqlite:///catalog.db",
            "s3.endpoint": endpoint,
            "s3.access-key-id": "AKID",
            "s3.secret-access-key": SECRET,
            **extra,
        }
    )


def test_only_storage_properties_are_kept_and_iceberg_path_style_is_mapped():
    config = storage.StorageConfig.of(
        {
            "type": "rest",
            "uri": "http://cat",
            "token": "t",
            "warehouse": "s3://b/w",
            "s3.endpoint": "http://e",
            "s3.path-style-access": "true",
            "gcs.project-id": "p",
            "adls.account-name": "a",
            "hdfs.host": "nn",
        }
    )
    assert dict(config.properties) == {
        "s3.endpoint": "http://e",
        "s3.path-style-access": "true",
        "s3.force-virtual-addressing": "false",
        "s3.region": "us-east-1",
        "gcs.project-id": "p",
        "adls.account-name": "a",
        "hdfs.host": "nn",
    }
    virtual = storage.StorageConfig.of({"s3.path-style-access": "false", "s3.region": "eu-west-1"})
    assert dict(virtual.properties) == {
        "s3.path-style-access": "false",
        "s3.force-virtual-addressing": "true",
        "s3.region": "eu-west-1",
    }


@pytest.mark.parametrize("scheme", ["s3", "s3a", "s3n"])
def test_s3_schemes_share_one_cached_file_system_per_bucket(scheme, restore_storage):
    import pyarrow.fs as pafs

    storage.configure(s3_config(**{"s3.region": "eu-west-1"}))
    fs, path = storage.filesystem(f"{scheme}://lake/wh/db/t/data/a.parquet")
    assert isinstance(fs, pafs.S3FileSystem)
    assert (path, fs.region) == ("lake/wh/db/t/data/a.parquet", "eu-west-1")
    assert storage.filesystem(f"{scheme}://lake/other")[0] is fs  # made once per scheme, bucket and config
    assert storage.prefix(f"{scheme}://lake/wh/x", "lake/wh/x") == f"{scheme}://"
    storage.configure(s3_config(**{"s3.region": "us-west-2"}))
    assert storage.filesystem(f"{scheme}://lake/wh/x")[0].region == "us-west-2"  # another config, another one


def test_local_locations_need_no_configuration(tmp_path, restore_storage):
    import pyarrow.fs as pafs

    storage.configure(s3_config())
    for location, path in (
        (f"file://{tmp_path}/a", f"{tmp_path}/a"),
        (f"file:{tmp_path}/a", f"{tmp_path}/a"),
        (f"{tmp_path}/a", f"{tmp_path}/a"),
    ):
        fs, found = storage.filesystem(location)
        assert (type(fs).__name__, found) in (
            (pafs.LocalFileSystem.__name__, path),
            ("PyArrowLocalFileSystem", path),
        )


def test_an_unknown_scheme_is_named(restore_storage):
    storage.configure(s3_config())
    with pytest.raises(
        InvalidArgumentError,
        match=r"^Unknown storage scheme 'ftp://': arctic-sql reads and writes "
        r"file://, s3://.*or a local path$",
    ) as raised:
        storage.filesystem("ftp://host/wh/t")
    assert SECRET not in str(raised.value)


def test_credentials_never_show(restore_storage):
    config = s3_config(
        **{
            "s3.session-token": "TOKEN-123",
            "adls.account-key": "ADLS-KEY-456",
            "hdfs.kerberos_ticket": "/tmp/krb5cc_TICKET",
        }
    )
    shown = f"{config!r} {config} {[config]}"
    for secret in (SECRET, "TOKEN-123", "ADLS-KEY-456", "AKID", "krb5cc_TICKET"):
        assert secret not in shown
    assert "s3.endpoint='http://127.0.0.1:9000'" in shown and "s3.secret-access-key=<hidden>" in shown


def test_an_endpoint_that_does_not_answer_is_named_after_the_client_gives_up(restore_storage):
    with socket.socket() as s:  # a loopback port nothing listens on (bound, then closed)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    storage.configure(s3_config(f"http://127.0.0.1:{port}"))
    with pytest.raises(
        ExecutionError, match=rf"^Cannot reach the warehouse s3://lake/wh at 127.0.0.1:{port}: "
    ) as raised:
        storage.check_reachable("s3://lake/wh")
    assert SECRET not in str(raised.value) and "\n" not in str(raised.value)


def test_an_unreachable_store_is_named_with_the_setting_that_would_change_where_it_was_asked():
    assert storage.unreachable("s3a://lake/wh", s3_config("http://objects:9000")) == "objects:9000"
    aws = storage.unreachable("s3://lake/wh", storage.StorageConfig.of({"s3.region": "eu-west-1"}))
    assert aws == "AWS S3 (bucket lake; s3.endpoint is not set, so AWS itself was asked)"
    assert storage.unreachable("gs://bucket/wh", storage.StorageConfig()) == "bucket"


def test_a_shipped_function_applies_the_configuration_it_was_made_under(restore_storage):
    made_under = s3_config(**{"s3.region": "ap-south-1"})
    storage.configure(made_under)
    task = storage.shipped(lambda: storage.active())
    storage.configure(storage.StorageConfig())  # another process, or another catalog opened since
    assert task() == made_under
    assert storage.active() == made_under


def test_two_catalogs_on_two_stores_each_reach_their_own(restore_storage):
    import pyarrow.fs as pafs

    lake, other = s3_config(**{"s3.region": "eu-west-1"}), s3_config(**{"s3.region": "ap-south-1"})
    storage.configure(lake, locations=["s3://lake/wh"])
    storage.configure(other, locations=["s3a://other/wh"])  # opened second: also the default
    assert storage.filesystem("s3://lake/wh/db/t/x.parquet")[0].region == "eu-west-1"
    assert storage.filesystem("s3n://lake/elsewhere")[0].region == "eu-west-1"  # one store, any S3 scheme
    assert storage.filesystem("s3://other/wh/db/t/x.parquet")[0].region == "ap-south-1"
    assert storage.filesystem("s3://unnamed/x")[0].region == "ap-south-1"  # no catalog named it
    assert isinstance(storage.filesystem("/local/x")[0], pafs.LocalFileSystem)
    # A table outside its catalog's warehouse: its store joins that catalog's, the default stays.
    storage.serve(lake, "s3://tables/db/t")
    assert storage.config_of("s3://tables/db/t/base/x.parquet") == lake
    assert storage.active() == other
    # A task of one catalog (a data source's worker) serves that one configuration everywhere.
    storage.configure(lake)
    assert storage.config_of("s3://other/wh/x") == lake


def test_a_shipped_function_carries_every_store_s_configuration(restore_storage):
    lake, other = s3_config(**{"s3.region": "eu-west-1"}), s3_config(**{"s3.region": "ap-south-1"})
    storage.configure(lake, locations=["s3://lake/wh"])
    storage.configure(other, locations=["s3://other/wh"])
    task = storage.shipped(lambda: (storage.config_of("s3://lake/x"), storage.config_of("s3://other/x")))
    storage.configure(storage.StorageConfig())  # the task's process, which opened no catalog
    assert task() == (lake, other)


def test_what_travels_to_tasks_holds_only_storage_settings_and_shows_no_credentials(restore_storage):
    from arctic_sql.datasource.source import CatalogSpec

    spec = CatalogSpec(
        "lake",
        {
            "type": "rest",
            "uri": "http://cat",
            "credential": "id:CATALOG-SECRET",
            "s3.endpoint": "http://127.0.0.1:9000",
            "s3.secret-access-key": SECRET,
        },
    )
    assert "CATALOG-SECRET" not in repr(spec) and SECRET not in repr(spec)
    assert dict(spec.storage().properties) == {
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.secret-access-key": SECRET,
        "s3.region": "us-east-1",
    }


def test_the_stores_tasks_read_carry_no_catalog_uri_or_credential(tmp_path, restore_storage):
    import pickle

    from iceberg_tables import create
    from pyiceberg.catalog import load_catalog

    from arctic_sql.table.catalog import ArcticCatalog
    from arctic_sql.table.reading.node_merge import Store

    iceberg = load_catalog(
        "t",
        type="sql",
        uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse=f"file://{tmp_path}",
        **{"credential": "id:CATALOG-SECRET", "s3.secret-access-key": SECRET},
    )
    catalog = ArcticCatalog(iceberg)
    catalog.create_database("db")
    table = create(catalog)
    assert "CATALOG-SECRET" in str(table.base.io.properties)  # what pyiceberg's own FileIO holds
    shipped = pickle.dumps(Store.of(table.base))
    assert b"CATALOG-SECRET" not in shipped and b"catalog.db" not in shipped
    assert Store.of(table.base).io.properties["s3.secret-access-key"] == SECRET
