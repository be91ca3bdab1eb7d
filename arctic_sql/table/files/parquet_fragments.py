"""Parquet fragments whose footers are read once per process.

A table's data files never change once written (every write names its files anew), so a file's
Parquet footer, once read, is that file's for good. pyarrow's dataset reads a file in two requests
on an object store: the footer (from the end of the file, whose size the manifest gives, so no
HEAD), then the column chunks. A fragment keeps the footer it read: reading the same file again
costs the one request for its columns, and no footer is parsed again (a scan of many small change
files spends much of its time there). Each process keeps the fragments of the files it read last,
a bounded number (the parsed footer of a small file is a few KB): the driver for its lookups, each
Spark Python worker (reused across tasks) for the node merges it runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import pyarrow.dataset as ds
import pyarrow.fs as pafs

# Fragments kept per process: more than a large table's live files per node group read at once.
MAX_FRAGMENTS = 4096

_fragments: OrderedDict[tuple[str, int, frozenset[str]], ds.ParquetFileFragment] = OrderedDict()
_formats: dict[frozenset[str], ds.ParquetFileFormat] = {}
_lock = threading.Lock()


def file_format(dictionary: frozenset[str] = frozenset()) -> ds.ParquetFileFormat:
    """The Parquet format reading ``dictionary``'s columns dictionary-encoded (one per set, so that
    fragments made with it can be kept and reused)."""
    with _lock:
        found = _formats.get(dictionary)
        if found is None:
            found = ds.ParquetFileFormat(
                read_options=ds.ParquetReadOptions(dictionary_columns=set(dictionary))
            )
            _formats[dictionary] = found
        return found


def fragment(
    location: str, fs: pafs.FileSystem, path: str, size: int, dictionary: frozenset[str] = frozenset()
) -> ds.ParquetFileFragment:
    """The fragment of the data file at ``location`` (``path`` in ``fs``) of ``size`` bytes, read with
    :func:`file_format` of ``dictionary``: the one made before in this process, with the footer it
    read, or a new one."""
    dictionary = frozenset(dictionary)
    key = (location, size, dictionary)
    with _lock:
        found = _fragments.get(key)
        if found is not None:
            _fragments.move_to_end(key)
            return found
    made = file_format(dictionary).make_fragment(path, fs, file_size=size)
    with _lock:
        _fragments[key] = made
        while len(_fragments) > MAX_FRAGMENTS:
            _fragments.popitem(last=False)
    return made
