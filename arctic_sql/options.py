"""The catalog and Spark options every entry point shares, and the catalog they open.

The ``arctic-sql`` shell, ``arctic-sql optimizer``, ``arctic-sql thriftserver`` and the demo all take
the same flags, so a warehouse, a catalog or a cluster that works with one works with all:

    --warehouse DIR|URI  --catalog-uri URI  --catalog-type rest|hive|glue|sql  --catalog-prop K=V ...
    --catalog-name NAME  --catalog-config FILE  --master URL  --conf K=V ...

>>> parser = argparse.ArgumentParser()
>>> add_connect_arguments(parser)
>>> args = parser.parse_args(["--catalog-type", "rest", "--catalog-uri", "http://cat:8181",
...                           "--master", "spark://head:7077"])
>>> options = connect_options(args)
>>> options["catalog_properties"], options["master"]
({'type': 'rest', 'uri': 'http://cat:8181'}, 'spark://head:7077')

Nothing here starts Spark: flags are parsed and checked (one line naming the flag, exit code 2)
before any JVM starts. :func:`load_catalog` opens the pyiceberg catalog that
:func:`arctic_sql.connect` uses.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.files import storage

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

CATALOG_TYPES = ("rest", "hive", "glue", "sql")
DEFAULT_WAREHOUSE = "./warehouse"
DEFAULT_MASTER = "local[*]"
MASTER_ENV = "ARCTIC_SPARK_MASTER"

# What Spark takes as a master: local[N[,F]], local-cluster[N,C,M], spark://h:p[,h:p], yarn, k8s://...
_MASTER = re.compile(
    r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://[^\s,/:]+:\d+(,[^\s,/:]+:\d+)*"
    r"|yarn|k8s://\S+"
)


# arguments --------------------------------------------------------------------------------------


def add_connect_arguments(parser: argparse.ArgumentParser) -> None:
    """The catalog and the Spark options, each in its own group of ``--help``."""
    add_catalog_arguments(parser.add_argument_group("catalog"))
    add_spark_arguments(parser.add_argument_group("spark"))


def add_catalog_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Where tables live: the warehouse and the pyiceberg catalog (see :func:`catalog_properties`)."""
    parser.add_argument(
        "--warehouse",
        default=DEFAULT_WAREHOUSE,
        metavar="DIR",
        help="warehouse folder or URI for table data (default: ./warehouse)",
    )
    parser.add_argument(
        "--catalog-uri",
        metavar="URI",
        help="catalog URI: a SQLAlchemy URI (a SQL catalog unless --catalog-type says "
        "otherwise), a REST endpoint, a Hive metastore thrift://...",
    )
    parser.add_argument("--catalog-type", choices=CATALOG_TYPES, help="pyiceberg catalog type")
    parser.add_argument(
        "--catalog-prop",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="pyiceberg catalog property (repeatable)",
    )
    parser.add_argument("--catalog-name", default=None, metavar="NAME", help="catalog name (default: arctic)")
    # Flags are visible to every user of the machine (ps); a file keeps the catalog's credentials off them.
    parser.add_argument(
        "--catalog-config",
        default=None,
        metavar="FILE",
        help="pyiceberg YAML file (catalog: {NAME: {uri: ..., s3.secret-access-key: ...}}) "
        "instead of --catalog-uri/--catalog-type/--catalog-prop",
    )


def add_spark_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Where the work runs: the Spark master and Spark settings (see :func:`spark_master`)."""
    parser.add_argument(
        "--master",
        type=master_url,
        default=None,
        metavar="URL",
        help=f"Spark master: local[N], spark://HOST:PORT, yarn, k8s://URL "
        f"(default: ${MASTER_ENV}, else {DEFAULT_MASTER})",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable), e.g. spark.executor.memory=4g",
    )


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair; argparse turns the error into ``argument --conf: expected ...``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def master_url(text: str) -> str:
    """A Spark master URL, checked here so a typo fails before a JVM starts."""
    if not _MASTER.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(
            f"expected local[N], local[*], spark://HOST:PORT, yarn or k8s://URL, got {text!r}"
        )
    return text.strip()


def check_connect_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Combinations argparse cannot see; exits with code 2 and one line, as argparse does."""
    properties = catalog_properties(args)
    if args.catalog_config is not None:
        if properties is not None:
            parser.error(
                "--catalog-config cannot be combined with --catalog-uri, --catalog-type or --catalog-prop"
            )
        if not os.path.isfile(args.catalog_config):
            parser.error(f"--catalog-config: no such file: {args.catalog_config}")
    if properties is not None and "type" not in properties and "uri" not in properties:
        parser.error("--catalog-prop needs --catalog-type or --catalog-uri (or a type= or uri= property)")


# what the arguments mean ------------------------------------------------------------------------


def connect_options(
    args: argparse.Namespace, spark_defaults: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Keyword arguments of :func:`arctic_sql.connect` for parsed options.

    ``spark_defaults`` are an entry point's own Spark settings; a ``--conf`` of the same key wins.
    """
    return {
        **catalog_options(args),
        "master": args.master,
        "spark_conf": {**(spark_defaults or {}), **dict(args.conf)},
    }


def catalog_options(args: argparse.Namespace) -> dict[str, Any]:
    """The catalog part of :func:`connect_options`: what a session on an existing Spark needs."""
    options: dict[str, Any] = {
        "warehouse": warehouse_path(args.warehouse),
        "catalog_properties": catalog_properties(args),
    }
    if args.catalog_name is not None:
        options["catalog_name"] = args.catalog_name
    if args.catalog_config is not None:
        options["config_file"] = os.path.abspath(args.catalog_config)
    return options


def catalog_properties(args: argparse.Namespace) -> dict[str, str] | None:
    """The ``catalog_properties`` for :func:`arctic_sql.connect`; ``None`` for the embedded default."""
    if args.catalog_uri is None and args.catalog_type is None and not args.catalog_prop:
        return None
    properties: dict[str, str] = {}
    if args.catalog_type is not None:
        properties["type"] = args.catalog_type
    elif args.catalog_uri is not None:
        properties["type"] = "sql"
    if args.catalog_uri is not None:
        properties["uri"] = args.catalog_uri
    properties.update(dict(args.catalog_prop))
    if properties.get("type") == "sql":
        # A SQL catalog keeps only metadata pointers; table files go to the warehouse.
        properties.setdefault("warehouse", warehouse_uri(args.warehouse))
    return properties


def warehouse_path(warehouse: str) -> str:
    """An absolute folder, or a URI as given: the same warehouse whatever folder a process starts in."""
    return warehouse if "://" in warehouse else os.path.abspath(warehouse)


def warehouse_uri(warehouse: str) -> str:
    return warehouse if "://" in warehouse else f"file://{os.path.abspath(warehouse)}"


def command_line(args: argparse.Namespace) -> list[str]:
    """The flags that give another entry point the same catalog and Spark as ``args`` (warehouse aside)."""
    flags: list[str] = []
    for flag, value in (
        ("--catalog-uri", args.catalog_uri),
        ("--catalog-type", args.catalog_type),
        ("--catalog-name", args.catalog_name),
        ("--catalog-config", args.catalog_config),
        ("--master", args.master),
    ):
        if value is not None:
            flags += [flag, value]
    flags += [part for key, value in args.catalog_prop for part in ("--catalog-prop", f"{key}={value}")]
    flags += [part for key, value in args.conf for part in ("--conf", f"{key}={value}")]
    return flags


def spark_master(master: str | None = None) -> str:
    """The master to use: the one asked for, else ``$ARCTIC_SPARK_MASTER``, else ``local[*]``."""
    return master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER


def is_local_master(master: str) -> bool:
    """Whether everything runs on this machine (``local``, ``local[N]``, ``local-cluster[...]``), so
    Spark can listen on loopback only."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


# the catalog ------------------------------------------------------------------------------------


# The FileIO of the catalog's tables, unless the properties name one: pyiceberg's, with fewer
# requests per file on object stores (table/files/file_io.py).
FILE_IO = "arctic_sql.table.files.file_io.ArcticFileIO"


def load_catalog(
    warehouse: str | None,
    name: str,
    properties: Mapping[str, str] | None,
    config_file: str | None,
) -> Catalog:
    """The pyiceberg catalog :func:`arctic_sql.connect` opens: from a pyiceberg YAML ``config_file``,
    from ``properties`` as they are, or else the embedded default, SQLite inside ``warehouse``."""
    from pyiceberg.catalog import load_catalog as pyiceberg_load_catalog

    if config_file is not None or properties:
        given = (
            _config_file_properties(config_file, name) if config_file is not None else dict(properties or {})
        )
        check_storage(given)
        given.setdefault("py-io-impl", FILE_IO)
        return pyiceberg_load_catalog(name, **given)
    if warehouse is None:
        raise InvalidArgumentError("connect() needs a warehouse folder, a catalog, or catalog properties")
    check_warehouse_scheme(warehouse)
    if storage.is_remote(warehouse):
        raise InvalidArgumentError(
            f"The warehouse {warehouse} is not a local folder: the embedded catalog keeps its SQLite file in "
            "the warehouse folder. Give catalog properties for it (e.g. --catalog-uri sqlite:////local/catalog.db "
            f"--catalog-prop warehouse={warehouse} --catalog-prop s3.endpoint=...)"
        )
    root = os.path.abspath(warehouse)
    os.makedirs(root, exist_ok=True)
    return pyiceberg_load_catalog(
        name,
        type="sql",
        uri=f"sqlite:///{os.path.join(root, 'catalog.db')}",
        warehouse=f"file://{root}",
        **{"py-io-impl": FILE_IO},
    )


def check_warehouse_scheme(warehouse: str | None) -> None:
    """A warehouse URI of a scheme no file system serves fails here, naming it, before anything runs."""
    if warehouse and "://" in warehouse and storage.scheme_of(warehouse) not in storage.SCHEMES:
        raise InvalidArgumentError(
            f"Unknown storage scheme '{storage.scheme_of(warehouse)}://' in the warehouse {warehouse}: "
            f"use a local folder or one of {', '.join(s + '://' for s in storage.SCHEMES)}"
        )


def check_storage(properties: Mapping[str, str]) -> None:
    """The catalog's warehouse, when it is a URI, must answer through the file system of its storage
    properties: an unknown scheme or an endpoint that does not answer fails here, naming it, before
    the catalog is opened (a SQL catalog creates its tables on opening) or anything is written."""
    location = str(properties.get("warehouse") or "")
    check_warehouse_scheme(location)
    # A REST catalog's warehouse may be a name, and its server may hand out the storage settings.
    if storage.is_remote(location) and properties.get("type") != "rest":
        storage.check_reachable(location, storage.StorageConfig.of(properties))


def _config_file_properties(config_file: str, name: str) -> dict[str, str]:
    import strictyaml  # what pyiceberg itself reads .pyiceberg.yaml with

    with open(config_file, encoding="utf-8") as f:
        config = strictyaml.load(f.read()).data or {}
    catalogs = config.get("catalog", {})
    if name not in catalogs:
        raise InvalidArgumentError(f"Config file {config_file} has no catalog '{name}'")
    return {k: str(v) for k, v in catalogs[name].items()}
