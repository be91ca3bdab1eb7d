"""One set of catalog and Spark options for every entry point (arctic_sql.options), without Spark.

Each entry point's ``main`` runs up to the point where it would open a session; ``arctic_sql.connect``
is replaced by a recorder there, so the tests see exactly what each would have connected with.
"""

from __future__ import annotations

import argparse
import logging

import pytest

import arctic_sql
from arctic_sql import options, session
from arctic_sql.errors import InvalidArgumentError
from arctic_sql.frontends import cli, demo, optimizer_command
from arctic_sql.spark import driver_address, spark_warehouse
from arctic_sql.thrift import server

PARSERS = {
    "shell": cli.build_arg_parser,
    "optimizer": optimizer_command.build_arg_parser,
    "thriftserver": server.build_arg_parser,
    "demo": demo.build_arg_parser,
}
# What each main needs besides the shared options to get as far as connecting.
MAINS = {
    "shell": (cli.main, ["-e", "SELECT 1"]),
    "optimizer": (optimizer_command.main, ["--once"]),
    "thriftserver": (server.main, ["--port", "0"]),
    "demo": (demo.main, []),
}
REST = [
    "--catalog-type",
    "rest",
    "--catalog-uri",
    "http://127.0.0.1:8181",
    "--catalog-name",
    "lake",
    "--catalog-prop",
    "warehouse=s3://bucket/wh",
    "--catalog-prop",
    "credential=id:secret",
]


class _Connecting(Exception):
    """Raised where an entry point would start Spark."""


@pytest.fixture
def connects(monkeypatch):
    """The keyword arguments of every ``arctic_sql.connect`` call; the call itself stops the caller."""
    calls: list[dict] = []

    def record(**kwargs):
        calls.append(kwargs)
        raise _Connecting

    monkeypatch.setattr(arctic_sql, "connect", record)
    yield calls
    logging.disable(logging.NOTSET)  # the shell silences logging for its own run


def _connect_kwargs(connects, name: str, flags: list[str]) -> dict:
    main, extra = MAINS[name]
    try:
        main([*flags, *extra])
    except _Connecting:
        pass  # the optimizer and the demo let the error out; the shell and the server report it
    assert len(connects) == 1, f"{name} did not connect exactly once"
    return connects.pop()


@pytest.mark.parametrize(
    "flags",
    [
        [],
        REST,
        ["--catalog-uri", "sqlite:////tmp/cat.db", "--master", "spark://10.0.0.1:7077,10.0.0.2:7077"],
        [
            "--warehouse",
            "s3://bucket/wh",
            "--catalog-type",
            "glue",
            "--master",
            "local[2]",
            "--conf",
            "spark.executor.memory=2g",
            "--conf",
            "spark.ui.showConsoleProgress=true",
        ],
    ],
)
def test_every_entry_point_connects_with_the_same_arguments_for_the_same_flags(connects, tmp_path, flags):
    flags = ["--warehouse", str(tmp_path / "wh"), *flags]  # a later --warehouse wins
    seen = {name: _connect_kwargs(connects, name, flags) for name in MAINS}
    # The shell and the optimizer hide Spark's progress bars by default; a --conf of that key wins.
    if "spark.ui.showConsoleProgress=true" not in flags:
        for kwargs in seen.values():
            kwargs["spark_conf"].pop("spark.ui.showConsoleProgress", None)
    assert seen["shell"] == seen["optimizer"] == seen["thriftserver"] == seen["demo"]
    assert seen["shell"] == options.connect_options(PARSERS["shell"]().parse_args(flags))


def test_the_flags_mean_what_they_say(connects, tmp_path):
    kwargs = _connect_kwargs(
        connects, "thriftserver", [*REST, "--master", "spark://head:7077", "--conf", "spark.executor.cores=2"]
    )
    assert kwargs["catalog_properties"] == {
        "type": "rest",
        "uri": "http://127.0.0.1:8181",
        "warehouse": "s3://bucket/wh",
        "credential": "id:secret",
    }
    assert kwargs["catalog_name"] == "lake" and kwargs["master"] == "spark://head:7077"
    assert kwargs["spark_conf"] == {"spark.executor.cores": "2"}


def test_the_thrift_servers_client_sessions_use_its_catalog(monkeypatch):
    calls: list[dict] = []
    monkeypatch.setattr(arctic_sql, "connect", lambda **kwargs: calls.append(kwargs))
    args = server.build_arg_parser().parse_args([*REST, "--master", "spark://head:7077"])
    spark = object()
    server._new_session_factory(args)(spark)
    assert calls == [
        {
            "spark": spark,
            "warehouse": options.warehouse_path("./warehouse"),
            "catalog_name": "lake",
            "catalog_properties": options.catalog_properties(args),
        }
    ]


def test_rest_catalog_properties_reach_pyiceberg_load_catalog(monkeypatch):
    import pyiceberg.catalog

    loaded: list[tuple] = []

    def load_catalog(name, **properties):
        loaded.append((name, properties))
        raise _Connecting

    monkeypatch.setattr(pyiceberg.catalog, "load_catalog", load_catalog)
    args = cli.build_arg_parser().parse_args(REST)
    with pytest.raises(_Connecting):  # the real connect: the catalog is opened before Spark starts
        session.connect(**options.connect_options(args))
    assert loaded == [
        (
            "lake",
            {
                "type": "rest",
                "uri": "http://127.0.0.1:8181",
                "warehouse": "s3://bucket/wh",
                "credential": "id:secret",
                "py-io-impl": options.FILE_IO,
            },
        )
    ]


def test_a_sql_catalog_uri_keeps_table_data_in_the_warehouse(tmp_path):
    args = cli.build_arg_parser().parse_args(
        ["--warehouse", str(tmp_path / "data"), "--catalog-uri", f"sqlite:///{tmp_path / 'cat.db'}"]
    )
    kwargs = options.catalog_options(args)
    catalog = options.load_catalog(kwargs["warehouse"], "arctic", kwargs["catalog_properties"], None)
    assert type(catalog).__name__ == "SqlCatalog"
    assert catalog.properties["warehouse"] == f"file://{tmp_path / 'data'}"
    assert catalog.properties["uri"] == f"sqlite:///{tmp_path / 'cat.db'}"


def test_the_default_catalog_and_a_config_file(tmp_path):
    embedded = options.load_catalog(str(tmp_path / "wh"), "arctic", None, None)
    assert embedded.properties["uri"] == f"sqlite:///{tmp_path / 'wh' / 'catalog.db'}"
    config = tmp_path / "pyiceberg.yaml"
    config.write_text(
        f"catalog:\n  lake:\n    type: sql\n    uri: sqlite:///{tmp_path / 'lake.db'}\n"
        f"    warehouse: file://{tmp_path / 'lake'}\n",
        encoding="utf-8",
    )
    lake = options.load_catalog(None, "lake", None, str(config))
    assert lake.name == "lake" and lake.properties["uri"] == f"sqlite:///{tmp_path / 'lake.db'}"
    with pytest.raises(InvalidArgumentError, match="has no catalog 'sea'"):
        options.load_catalog(None, "sea", None, str(config))
    with pytest.raises(InvalidArgumentError, match="needs a warehouse folder"):
        options.load_catalog(None, "arctic", None, None)


def test_a_catalog_config_file_keeps_the_credentials_off_the_command_line(connects, tmp_path):
    config = tmp_path / "catalog.yaml"
    config.write_text(
        "catalog:\n  arctic:\n    type: sql\n    uri: postgresql+psycopg2://u:secret@db/c\n", encoding="utf-8"
    )
    flags = ["--warehouse", "s3://lake/wh", "--catalog-config", str(config)]
    seen = {name: _connect_kwargs(connects, name, flags) for name in MAINS}
    for kwargs in seen.values():
        assert kwargs["config_file"] == str(config) and kwargs["catalog_properties"] is None, kwargs
    args = PARSERS["demo"]().parse_args(flags)
    assert options.command_line(args) == ["--catalog-config", str(config)]


@pytest.mark.parametrize("name", sorted(MAINS))
@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--master", "spark//head:7077"], "argument --master: expected local[N]"),
        (["--master", "local[x]"], "argument --master"),
        (["--conf", "spark.executor.memory"], "argument --conf: expected KEY=VALUE"),
        (["--catalog-prop", "=x"], "argument --catalog-prop: expected KEY=VALUE"),
        (["--catalog-type", "mongo"], "argument --catalog-type: invalid choice"),
        (["--catalog-prop", "token=x"], "--catalog-prop needs --catalog-type or --catalog-uri"),
        (
            ["--catalog-config", "/no/such/catalog.yaml"],
            "--catalog-config: no such file: /no/such/catalog.yaml",
        ),
        (
            ["--catalog-config", "c.yaml", "--catalog-uri", "sqlite:///c.db"],
            "--catalog-config cannot be combined",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_the_option(connects, capsys, name, flags, named):
    main, extra = MAINS[name]
    with pytest.raises(SystemExit) as exited:
        main([*flags, *extra])
    assert exited.value.code == 2 and not connects
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert named in last and last.count("\n") == 0


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[*]",
        "local[4]",
        "local[2,3]",
        "local-cluster[2,1,1024]",
        "spark://head:7077",
        "spark://a:7077,b:7077",
        "yarn",
        "k8s://https://k:6443",
    ],
)
def test_spark_masters_are_accepted(master):
    assert options.master_url(master) == master


def test_the_master_comes_from_the_flag_then_the_environment_then_local(monkeypatch):
    monkeypatch.delenv(options.MASTER_ENV, raising=False)
    assert options.spark_master(None) == "local[*]"
    monkeypatch.setenv(options.MASTER_ENV, "local[2]")
    assert options.spark_master(None) == "local[2]"
    assert options.spark_master("spark://head:7077") == "spark://head:7077"


def test_the_driver_listens_on_loopback_unless_a_cluster_must_reach_it(monkeypatch):
    loopback = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    assert driver_address("local[2]") == loopback
    assert driver_address("spark://head:7077") == {}  # Spark picks an address the executors can reach
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.2.3")
    assert driver_address("spark://head:7077") == {
        "spark.driver.host": "10.1.2.3",
        "spark.driver.bindAddress": "10.1.2.3",
    }
    assert driver_address("local[*]") == loopback


def test_connect_refuses_a_master_for_a_session_it_does_not_start():
    with pytest.raises(InvalidArgumentError, match="master"):
        session.connect(spark=object(), master="spark://head:7077")


def test_the_demo_suggests_commands_with_the_same_catalog_and_master(tmp_path):
    flags = [*REST, "--master", "spark://head:7077", "--conf", "spark.executor.memory=2g"]
    args = demo.build_arg_parser().parse_args(flags)
    again = argparse.Namespace(**vars(cli.build_arg_parser().parse_args(options.command_line(args))))
    assert options.connect_options(again) == options.connect_options(args)
    text = demo.try_next(str(tmp_path), options.command_line(args))
    assert text.count("--master spark://head:7077") == len(demo.TRY_NEXT) + 1  # and the Thrift server's line


@pytest.mark.parametrize(
    "warehouse", ["s3://lake/wh", "s3a://lake/wh", "gs://lake/wh", "abfss://c@acct/wh", "hdfs://nn:8020/wh"]
)
def test_a_remote_warehouse_needs_catalog_properties_and_makes_no_local_folder(
    tmp_path, monkeypatch, warehouse
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        InvalidArgumentError,
        match=rf"^The warehouse {warehouse} is not a local folder: the "
        r"embedded catalog .* Give catalog properties",
    ):
        options.load_catalog(warehouse, "arctic", None, None)
    args = cli.build_arg_parser().parse_args(["--warehouse", warehouse])
    with pytest.raises(InvalidArgumentError, match="is not a local folder"):
        session.connect(**options.connect_options(args))  # before any JVM starts
    assert list(tmp_path.iterdir()) == []  # no ./s3:/lake/wh


def test_an_unknown_warehouse_scheme_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        InvalidArgumentError,
        match=r"^Unknown storage scheme 'ftp://' in the warehouse ftp://h/wh: "
        r"use a local folder or one of file://, s3://",
    ):
        options.load_catalog("ftp://h/wh", "arctic", None, None)
    with pytest.raises(InvalidArgumentError, match=r"^Unknown storage scheme 'ftp://'"):
        options.load_catalog(
            None,
            "arctic",
            {"type": "sql", "uri": f"sqlite:///{tmp_path}/c.db", "warehouse": "ftp://h/wh"},
            None,
        )
    assert list(tmp_path.iterdir()) == []


def test_spark_keeps_its_own_tables_in_a_local_warehouse_only(tmp_path):
    local = {
        "spark.sql.warehouse.dir": f"{tmp_path}/spark-warehouse",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={tmp_path}",
    }
    assert spark_warehouse(str(tmp_path)) == local
    assert spark_warehouse(f"file://{tmp_path}") == local
    assert spark_warehouse("s3://lake/wh") == {}  # Spark's default; s3:// would need the hadoop-aws connector
