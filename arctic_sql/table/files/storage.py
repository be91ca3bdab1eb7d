"""File-system access through pyarrow, so local paths, S3, GCS, ADLS and HDFS work alike.

Every read and write of table files goes through one pyarrow file system per scheme and bucket,
built from the catalog's storage properties (pyiceberg's names: ``s3.endpoint``,
``s3.access-key-id``, ``gcs.project-id``, ``adls.account-name``, ``hdfs.host`` ...) by pyiceberg's
own ``PyArrowFileIO``, so arctic's files and pyiceberg's metadata reach the same store the same way.

The configuration is per process and per store: :func:`configure` sets it where a catalog is opened
(the driver, the service, a data source's planning worker) for the stores its warehouse and its
tables are on (a scheme and a bucket: ``s3://lake``), so two catalogs on two stores (another endpoint,
other credentials) work side by side in one driver; a store no catalog named gets the configuration
set last. Every function that runs in a Spark task carries the process's routes in its closure or
plan and applies them first (:func:`shipped`), since an executor is another process that never opened
the catalog. Environment variables are never needed.

>>> configure(StorageConfig.of({"s3.endpoint": "http://127.0.0.1:9000", "s3.secret-access-key": "x"}))
>>> active()
StorageConfig(s3.endpoint='http://127.0.0.1:9000', s3.region='us-east-1', s3.secret-access-key=<hidden>)
>>> configure(StorageConfig.of({"s3.endpoint": "http://127.0.0.1:9100"}), locations=["s3://other/wh"])
>>> config_of("s3a://other/wh/db/t/data/x.parquet").get("s3.endpoint")
'http://127.0.0.1:9100'
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlparse

import pyarrow.fs as pafs

from arctic_sql.errors import ExecutionError, InvalidArgumentError

# The catalog properties that configure file I/O (pyiceberg's FileIO property families); nothing
# else of a catalog's properties (its URI, its own credentials) is kept or shipped to tasks.
STORAGE_PREFIXES = ("s3.", "client.", "gcs.", "adls.", "hdfs.", "oss.")
# Schemes pyiceberg's PyArrowFileIO maps to a pyarrow file system (``_initialize_fs``).
SCHEMES = ("file", "s3", "s3a", "s3n", "oss", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs", "hdfs", "viewfs")
REMOTE_SCHEMES = tuple(s for s in SCHEMES if s != "file")
# Stores of whole objects, written at once when an upload completes, with no rename and no folders.
OBJECT_STORE_SCHEMES = ("s3", "s3a", "s3n", "oss", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs")
# A property whose name holds one of these words is a credential: never shown.
_SECRET_WORDS = (
    "secret",
    "key",
    "token",
    "password",
    "credential",
    "sas",
    "connection-string",
    "signer",
    "ticket",
)

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class StorageConfig:
    """The storage properties of a catalog: what builds its file systems. Hashable (it keys the
    per-process cache of file systems) and picklable (tasks carry it); its repr hides credentials."""

    properties: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, properties: Mapping[str, Any]) -> StorageConfig:
        """The storage part of catalog ``properties``, in the form pyiceberg's FileIO reads."""
        kept = {k: str(v) for k, v in properties.items() if k.startswith(STORAGE_PREFIXES)}
        # Gap: pyiceberg 0.12 reads s3.force-virtual-addressing but not Iceberg's (Java)
        # s3.path-style-access, its inverse; without either, pyarrow uses path-style requests for a
        # custom endpoint and virtual-host ones for AWS.
        path_style = kept.get("s3.path-style-access", "").strip().lower()
        if path_style in ("true", "false") and "s3.force-virtual-addressing" not in kept:
            kept["s3.force-virtual-addressing"] = "false" if path_style == "true" else "true"
        # Gap: without a region pyiceberg asks AWS where the bucket is (a request to amazonaws.com);
        # a custom endpoint (MinIO, Ceph, moto...) is not AWS: take the usual default there.
        if "s3.endpoint" in kept and "s3.region" not in kept and "client.region" not in kept:
            kept["s3.region"] = "us-east-1"
        return cls(tuple(sorted(kept.items())))

    def get(self, key: str) -> str | None:
        return dict(self.properties).get(key)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={'<hidden>' if is_secret(k) else repr(v)}" for k, v in self.properties)
        return f"StorageConfig({shown})"

    __str__ = __repr__

    def filesystem(self, scheme: str, netloc: str) -> pafs.FileSystem:
        """The file system of ``scheme://netloc``, made once per process and configuration."""
        if scheme not in SCHEMES:
            raise InvalidArgumentError(
                f"Unknown storage scheme '{scheme}://': arctic-sql reads and writes "
                f"{', '.join(s + '://' for s in SCHEMES)} or a local path"
            )
        return file_io(self).fs_by_scheme(scheme, netloc)


def is_secret(key: str) -> bool:
    return any(word in key.lower() for word in _SECRET_WORDS)


@functools.lru_cache(maxsize=16)
def file_io(config: StorageConfig) -> Any:
    """pyiceberg's FileIO for ``config``, one per process and configuration; its ``fs_by_scheme``
    caches a file system per scheme and netloc (one S3 client per bucket, not per call)."""
    from arctic_sql.table.files.file_io import ArcticFileIO

    return ArcticFileIO(dict(config.properties))


# The names of one store's schemes: s3a://b/x and s3://b/x are the same object.
_FAMILIES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfss": "abfs", "wasb": "abfs", "wasbs": "abfs"}


def store_of(location: str) -> tuple[str, str] | None:
    """The store a remote ``location`` is on, ``("s3", "lake")`` for ``s3a://lake/wh``: its scheme's
    family and its bucket (container, name node); None for a local path."""
    if not is_remote(location):
        return None
    parsed = urlparse(location)
    scheme = parsed.scheme.lower()
    return _FAMILIES.get(scheme, scheme), parsed.netloc


@dataclass(frozen=True)
class Routes:
    """Which configuration reaches which store: ``stores`` by :func:`store_of`, ``default`` for the
    rest. Picklable and small (tasks carry it)."""

    default: StorageConfig = StorageConfig()
    stores: tuple[tuple[tuple[str, str], StorageConfig], ...] = ()

    def config(self, location: str) -> StorageConfig:
        store = store_of(location)
        for key, config in self.stores:
            if key == store:
                return config
        return self.default

    def serving(self, config: StorageConfig, locations: Iterable[str]) -> Routes:
        """These routes with the stores of ``locations`` reached through ``config``."""
        stores = dict(self.stores)
        for location in locations:
            store = store_of(location)
            if store is not None:
                stores[store] = config
        return Routes(self.default, tuple(stores.items()))


_routes = Routes()


def configure(config: StorageConfig, *, locations: Iterable[str] = ()) -> None:
    """Make ``config`` this process's storage configuration: of the stores of ``locations`` (a catalog's
    warehouse) and of every store no catalog named; without ``locations``, of every store (the
    process serves one configuration, as a task of a catalog's does)."""
    global _routes
    locations = list(locations)
    base = _routes if locations else Routes()
    _routes = Routes(config, base.stores).serving(config, locations)


def serve(config: StorageConfig, location: str) -> None:
    """Reach the store of ``location`` (a table's, which may lie outside its catalog's warehouse)
    through ``config``, leaving the default as it is."""
    global _routes
    if store_of(location) is not None and _routes.config(location) != config:
        _routes = _routes.serving(config, [location])


def active() -> StorageConfig:
    """The configuration of the stores no catalog named (the one set last)."""
    return _routes.default


def config_of(location: str) -> StorageConfig:
    """The configuration that reaches ``location``'s store."""
    return _routes.config(location)


def routes() -> Routes:
    return _routes


def restore(saved: Routes) -> None:
    """Put back routes saved with :func:`routes` (a test's fixture, a task's first step)."""
    global _routes
    _routes = saved


def shipped(function: F) -> F:
    """``function`` carrying this process's storage routes, which it applies before it runs: for
    functions Spark pickles into tasks (``mapInArrow``, ``flatMap``)."""
    saved = _routes

    @functools.wraps(function)
    def in_task(*args: Any, **kwargs: Any) -> Any:
        restore(saved)
        return function(*args, **kwargs)

    return in_task  # type: ignore[return-value]


def scheme_of(location: str) -> str:
    """``s3`` of ``s3://b/x``; ``file`` of a local path."""
    return urlparse(location).scheme.lower() if "://" in location else "file"


def is_remote(location: str) -> bool:
    """Whether ``location`` is a URI of another store than the local disk (``s3://``, ``hdfs://``...)."""
    return scheme_of(location) != "file"


def filesystem(location: str, config: StorageConfig | None = None) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem of a location (through ``config``, default this process's), and the
    path within it."""
    if location.startswith("file:"):
        return pafs.LocalFileSystem(), urlparse(location).path
    if "://" not in location:
        return pafs.LocalFileSystem(), location
    from pyiceberg.io.pyarrow import PyArrowFileIO

    scheme, netloc, path = PyArrowFileIO.parse_location(location)
    return (config or _routes.config(location)).filesystem(scheme.lower(), netloc), path


def is_object_store(location: str) -> bool:
    """Whether ``location`` is on a store of whole objects (S3, GCS, Azure Blob): no folders, no rename."""
    return scheme_of(location) in OBJECT_STORE_SCHEMES


def folder(location: str) -> tuple[pafs.FileSystem, str]:
    """``filesystem(location)`` of a folder about to get files: made first on a file system. An
    object store has no folders; pyarrow would PUT a marker object per level, and its writes need none."""
    fs, path = filesystem(location)
    if not is_object_store(location):
        fs.create_dir(path, recursive=True)
    return fs, path


def check_reachable(location: str, config: StorageConfig | None = None) -> None:
    """Raise a one-line error naming the store when ``location`` cannot be reached: a remote
    warehouse is checked when its catalog is opened, before anything is written. pyarrow's S3 client
    gives up after its retry strategy (three attempts by default; ``s3.connect-timeout`` and
    ``s3.request-timeout`` bound each)."""
    if not is_remote(location):
        return
    config = config or _routes.config(location)
    fs, path = filesystem(location, config)
    try:
        fs.get_file_info(path)
    except OSError as e:
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ExecutionError(
            f"Cannot reach the warehouse {location} at {unreachable(location, config)}: {detail}"
        ) from None


def unreachable(location: str, config: StorageConfig) -> str:
    """Where ``location``'s store was asked, for an error saying it did not answer: the endpoint's
    host, or, for S3 without ``s3.endpoint``, AWS itself and the property that would change that
    (the usual slip with MinIO, Ceph or another S3-compatible store)."""
    store = store_of(location)
    if store is None or store[0] not in ("s3", "oss"):
        return urlparse(location).netloc
    endpoint = config.get("s3.endpoint")
    if endpoint:
        return urlparse(endpoint).netloc or endpoint
    return f"AWS S3 (bucket {urlparse(location).netloc}; s3.endpoint is not set, so AWS itself was asked)"


def prefix(location: str, path: str) -> str:
    """What ``filesystem`` stripped from ``location`` to get ``path`` (``file://``, ``s3://bucket``...):
    prepended to a path of that filesystem, it makes a full location again."""
    return location[: len(location) - len(path)] if location.endswith(path) else ""


def file_infos(locations: list[str], under: str | None = None) -> list[pafs.FileInfo]:
    """What the filesystem says of each of ``locations`` (files of one store: one filesystem and
    scheme), in one batched call (on S3 a client per call would cost more than the calls).
    ``under``: a folder holding them all and little else (a write's own folder); on an object store
    one listing of it (a request per 1,000 objects) then replaces a HEAD request per file. When a
    location is not under it, each is asked for instead (a listing would not see it)."""
    if not locations:
        return []
    if (
        under is not None
        and is_object_store(under)
        and all(location.startswith(under.rstrip("/") + "/") for location in locations)
    ):
        fs, folder_path = filesystem(under)
        head = prefix(under, folder_path)
        listed = fs.get_file_info(pafs.FileSelector(folder_path, recursive=True, allow_not_found=True))
        found = {info.path: info for info in listed}
        paths = [location[len(head) :] for location in locations]
        return [found.get(path) or pafs.FileInfo(path, pafs.FileType.NotFound) for path in paths]
    fs, first = filesystem(locations[0])
    head = prefix(locations[0], first)
    return fs.get_file_info([location[len(head) :] for location in locations])


def list_files(location: str, suffix: str = ".parquet") -> list[str]:
    """Every file under ``location`` whose name ends in ``suffix``, as full locations."""
    fs, path = filesystem(location)
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    scheme = prefix(location, path)
    return sorted(
        scheme + info.path
        for info in infos
        if info.type == pafs.FileType.File
        and info.base_name.endswith(suffix)
        and not info.base_name.startswith(".")
    )


def json_records(folder: str) -> list[dict]:
    """The JSON objects of the ``*.json`` files directly in ``folder`` (small records such as
    leases); a file removed while listing is skipped, an unreadable one raises."""
    import json

    fs, path = filesystem(folder)
    found = []
    for info in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True)):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".json"):
            continue
        try:
            with fs.open_input_stream(info.path) as stream:
                found.append(json.loads(stream.read()))
        except FileNotFoundError:
            continue  # removed while we listed
        except ValueError as e:  # not JSON: refuse to guess what it was protecting, and say where it is
            raise ExecutionError(
                f"Cannot read the record {prefix(folder, path)}{info.path}: {e}; remove or repair it"
            ) from None
    return found


# A record's temporary file on a local file system (``replace_file``): ``<name>.<6 hex>.tmp``, beside
# it. One a writer left when it died is removed by orphan removal once old enough.
TEMPORARY = re.compile(r"\.[0-9a-f]{6}\.tmp$")


def replace_file(location: str, data: bytes) -> None:
    """Write ``data`` to ``location`` so that the record is never missing while others read it (a
    small record rewritten: a lease, a process record), and never half written where the store
    allows it.

    - An object store: one whole-object PUT (the object changes when its upload completes), with no
      rename (a copy and a delete there) and no folder marker.
    - HDFS: written in place. The name node replaces the file and creates the new one in one step,
      so the path is never missing; until the writer closes it a reader sees it empty, which
      :func:`json_records` refuses rather than reading as no record. (A rename over it would be a
      delete, then the rename: pyarrow's ``move`` on HDFS.)
    - A local or network file system: a temporary file renamed over the old one (atomic in POSIX).
    """
    fs, path = filesystem(location)
    if not is_object_store(location):  # an object store has no folders (a marker PUT each)
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    if is_object_store(location) or scheme_of(location) in ("hdfs", "viewfs"):
        with fs.open_output_stream(path) as out:
            out.write(data)
        return
    tmp = f"{path}.{uuid.uuid4().hex[:6]}.tmp"
    with fs.open_output_stream(tmp) as out:
        out.write(data)
    fs.move(tmp, path)


def delete_files(locations: Iterable[str], config: StorageConfig | None = None) -> int:
    """Delete files, in the order given; missing ones are fine. Returns how many were deleted.
    ``config``: the store's own configuration (default this process's)."""
    deleted = 0
    for location in locations:
        fs, path = filesystem(location, config)
        try:
            fs.delete_file(path)
            deleted += 1
        except FileNotFoundError:
            pass
    return deleted


def delete_tree(location: str) -> None:
    fs, path = filesystem(location)
    try:
        fs.delete_dir(path)
    except FileNotFoundError:
        pass


def spark_path(location: str) -> str:
    """How Spark's ``_metadata.file_path`` spells a location (``file:/x`` for ``file:///x`` or ``/x``)."""
    if location.startswith("file:///"):
        return "file:/" + location[len("file:///") :]
    if location.startswith("/"):
        return "file:" + location
    return location
