"""File-system access through pyarrow, so local paths, S3 and HDFS work alike."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from urllib.parse import urlparse

import pyarrow.fs as pafs


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem of a location, and the path within it."""
    if "://" not in location:
        return pafs.LocalFileSystem(), location
    if location.startswith("file:"):
        return pafs.LocalFileSystem(), urlparse(location).path
    fs, path = pafs.FileSystem.from_uri(location)
    return fs, path


def prefix(location: str, path: str) -> str:
    """What ``filesystem`` stripped from ``location`` to get ``path`` (``file://``, ``s3://bucket``...):
    prepended to a path of that filesystem, it makes a full location again."""
    return location[: len(location) - len(path)] if location.endswith(path) else ""


def file_infos(locations: list[str]) -> list[pafs.FileInfo]:
    """What the filesystem says of each of ``locations`` (files of one store: one filesystem and
    scheme), in one batched call (on S3 a client per call would cost more than the calls)."""
    if not locations:
        return []
    fs, first = filesystem(locations[0])
    head = prefix(locations[0], first)
    return fs.get_file_info([location[len(head):] for location in locations])


def list_files(location: str, suffix: str = ".parquet") -> list[str]:
    """Every file under ``location`` whose name ends in ``suffix``, as full locations."""
    fs, path = filesystem(location)
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    scheme = prefix(location, path)
    return sorted(
        scheme + info.path
        for info in infos
        if info.type == pafs.FileType.File and info.base_name.endswith(suffix) and not info.base_name.startswith(".")
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
            from arctic_sql.errors import ExecutionError

            raise ExecutionError(f"Cannot read the record {prefix(folder, path)}{info.path}: {e}; "
                                 "remove or repair it") from None
    return found


def replace_file(location: str, data: bytes) -> None:
    """Write ``data`` to ``location`` by a rename over it, so a reader sees the old or the new
    content, never half of it (a small record rewritten while others read it)."""
    fs, path = filesystem(location)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    tmp = f"{path}.{uuid.uuid4().hex[:6]}.tmp"
    with fs.open_output_stream(tmp) as out:
        out.write(data)
    fs.move(tmp, path)


def delete_files(locations: Iterable[str]) -> int:
    """Delete files, in the order given; missing ones are fine. Returns how many were deleted."""
    deleted = 0
    for location in locations:
        fs, path = filesystem(location)
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
        return "file:/" + location[len("file:///"):]
    if location.startswith("/"):
        return "file:" + location
    return location
