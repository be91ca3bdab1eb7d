"""Table metadata that does not cost more per commit as a table's history grows.

Every snapshot a store keeps is in its metadata JSON (as in Iceberg Java). pyiceberg 0.12 parses
that file on every ``load_table`` and ``refresh``, again inside every ``commit_table`` (the catalog
loads the current metadata to check the commit against it), and deep-copies the whole parsed
metadata twice per commit (``update_table_metadata`` ends in ``model_copy(deep=True)``: once for the
transaction's staged metadata, once in the catalog). At 2,000 snapshots those four passes cost
several times the rest of a 1,000-row commit. This module removes them for the whole process:

- **Parsed metadata by location.** A metadata file is written once under a new name and never
  changed (``NNNNN-<uuid>.metadata.json``), so the metadata parsed from a location is that
  location's for good: what the catalog says is current decides which file is read, and a commit
  by another process is seen as soon as the catalog names its new file. The metadata a commit
  writes is kept under the location it was written to, so the next load of the store, and the
  catalog's check of the next commit, parse nothing (pyiceberg's own table object holds that same
  metadata after a commit). A small LRU bounds the memory.
- **Snapshots parsed once.** A file another process wrote is parsed, but each snapshot and
  snapshot-log entry in it that this process already parsed for the table, with the same JSON, is
  the object parsed then (with the JSON kept for it, below): the JSON is read with pydantic's parser
  (into plain objects) and pydantic validates only the new entries and the other fields (v2 only).
- **Snapshots serialized once.** A commit writes the whole metadata again, every snapshot in it;
  pyiceberg serializes each snapshot's summary in Python, which at 2,000 snapshots costs more than
  the rest of the commit. A snapshot never changes once added, so the JSON of each snapshot and
  snapshot-log entry is kept (per table, for the entries its newest metadata holds) and a metadata
  file is written as pyiceberg writes it, from the other fields' JSON and those pieces (keys in
  another order; the same JSON value: tests/unit/table/test_history_cost.py).
- **No deep copies of frozen metadata.** pyiceberg's metadata models are frozen and every update
  builds new lists and maps (``model_copy(update=...)``); the deep copy guards against in-place
  changes that neither pyiceberg nor arctic-sql make. A deep copy of table metadata is a shallow
  one here: a new object over the same (immutable) snapshots, logs and schemas.

pyiceberg has no public hook for any of these (gaps: a metadata cache or a "current metadata location"
call on ``Catalog``; a ``TableMetadata`` that is not deep-copied per update, which its maintainers
have under review as a per-transaction cache). So :func:`install` wraps pyiceberg's metadata
(de)serializers, ``FromInputFile.table_metadata`` and ``ToOutputFile.table_metadata``, through
which every catalog that reads metadata files (SQL, Hive, Glue, DynamoDB, BigQuery) goes, and sets
``__deepcopy__`` on the metadata classes. A REST catalog sends metadata in its responses: those are
parsed per load, as before.
"""

from __future__ import annotations

import codecs
import json
import re
import threading
from collections import OrderedDict
from typing import Any

import pydantic_core
from pyiceberg.io import InputFile, OutputFile
from pyiceberg.serializers import Compressor, FromInputFile, ToOutputFile
from pyiceberg.table.metadata import TableMetadataUtil, TableMetadataV1, TableMetadataV2, TableMetadataV3
from pyiceberg.typedef import UTF8
from pyiceberg.utils.config import Config

from arctic_sql.table.files.recent import Recent

# Parsed metadata kept, most recently used last. A commit touches two stores' files (the one read,
# the one written); a service watching many tables reads each once per change.
MAX_ENTRIES = 32

_lock = threading.Lock()
_parsed: Recent[Any] = Recent(MAX_ENTRIES)  # metadata location -> TableMetadata
_installed = False
# Per table (uuid): id of a snapshot or snapshot-log entry -> (the entry, its JSON), for the entries
# of the table's newest written metadata; the entry is held so that its id is not reused meanwhile.
_pieces: OrderedDict[object, dict[int, tuple[Any, str]]] = OrderedDict()
_LISTS = (("snapshots", "snapshots"), ("snapshot_log", "snapshot-log"))  # field, JSON key
# Per table (uuid as written), for its snapshots and its snapshot log (as _LISTS): what names an entry
# (the snapshot's id; the log entry's id and time) -> (its JSON as parsed, the entry).
_Known = dict[object, tuple[Any, Any]]
_entries: OrderedDict[str, tuple[_Known, _Known]] = OrderedDict()
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # one, not one per entry
_read = FromInputFile.table_metadata
_write = ToOutputFile.table_metadata


def _remember(location: str, metadata: Any) -> None:
    _parsed.put(location, metadata)


def cached(location: str) -> Any | None:
    """The metadata held for ``location``, if any."""
    return _parsed.get(location)


def clear() -> None:
    _parsed.clear()
    with _lock:
        _pieces.clear()
        _entries.clear()


def _read_cached(input_file: InputFile, encoding: str = UTF8) -> Any:
    metadata = cached(input_file.location)
    if metadata is None:
        with input_file.open() as stream:  # as pyiceberg's FromByteStream.table_metadata reads it
            with Compressor.get_compressor(location=input_file.location).stream_decompressor(stream) as data:
                text = codecs.getreader(encoding)(data).read()
        metadata = parse_metadata(text)
        _remember(input_file.location, metadata)
    return metadata


def parse_metadata(text: str) -> Any:
    """``TableMetadataUtil.parse_raw(text)``, reusing the snapshots and snapshot-log entries parsed
    before for the table (and the JSON kept for them)."""
    # pydantic's own parser (which pyiceberg's models need anyway), about twice as fast as the
    # standard library's on a metadata file: 10 ms against 18 ms at 2,000 snapshots (1.3 MB).
    raw = pydantic_core.from_json(text)
    if raw.get("format-version") != 2 or not all(isinstance(raw.get(key, []), list) for _, key in _LISTS):
        return TableMetadataUtil.parse_raw(text)
    table = str(raw.get("table-uuid"))
    with _lock:
        known = _entries.get(table, ({}, {}))
    given: dict[str, list[Any]] = {}
    names: dict[str, list[object]] = {}
    for (_, key), seen in zip(_LISTS, known, strict=True):
        items = raw.get(key)
        if items is None:
            continue
        names[key] = [_key_of(key, item) for item in items]
        given[key] = []
        for name, item in zip(names[key], items, strict=True):
            hit = seen.get(name) if name is not None else None
            given[key].append(hit[1] if hit is not None and hit[0] == item else item)
    metadata = TableMetadataUtil.parse_obj({**raw, **given})
    with _lock:
        held = _pieces.get(metadata.table_uuid, {})
    # The JSON each entry was read from is its piece for the next write: a process that commits once
    # (a Spark worker's commit of df.write or of a stream's batch) would otherwise serialize every
    # snapshot in Python, the cost this module exists to remove. An entry reused from an earlier
    # parse keeps its piece: encoding 4,000 entries again was most of a parse at 2,000 snapshots.
    pieces: dict[int, tuple[Any, str]] = {}
    kept: list[_Known] = []
    for field, key in _LISTS:
        items, entries = raw.get(key) or [], getattr(metadata, field)
        by_key: _Known = {}
        if len(items) == len(entries):
            for name, item, entry in zip(names.get(key, []), items, entries, strict=True):
                by_key[name] = (item, entry)
                piece = held.get(id(entry))
                if piece is None or piece[0] is not entry:
                    piece = (entry, _ENCODER.encode(item))
                pieces[id(entry)] = piece
        kept.append(by_key)
    with _lock:
        _entries[table] = (kept[0], kept[1])
        _entries.move_to_end(table)
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)
    _keep_pieces(metadata.table_uuid, pieces)
    return metadata


def _key_of(key: str, item: Any) -> object:
    """What names an entry of list ``key`` of the metadata JSON (None: nothing, never reused)."""
    if not isinstance(item, dict):
        return None
    if key == "snapshots":
        return item.get("snapshot-id")
    return (item.get("snapshot-id"), item.get("timestamp-ms"))


def _keep_pieces(table: object, pieces: dict[int, tuple[Any, str]]) -> None:
    """Keep ``pieces`` as the JSON of the entries of ``table``'s newest metadata seen (parsed or written)."""
    with _lock:
        _pieces[table] = pieces
        _pieces.move_to_end(table)
        while len(_pieces) > MAX_ENTRIES:
            _pieces.popitem(last=False)


# A metadata file named as pyiceberg's catalogs and clone_metadata.py name a new one: a version and a
# fresh uuid (``00006-<uuid>.metadata.json``, compressed or not).
_NEW_NAME = re.compile(
    r"/\d+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(\.gz)?\.metadata\.json$"
)


def _write_remembered(metadata: Any, output_file: OutputFile, overwrite: bool = False) -> None:
    # pyiceberg checks that no file is there first. Under a fresh uuid none can be, and the check
    # is a HEAD and a LIST on S3 (pyarrow asks whether the name is a folder too), a tenth of a small
    # commit's requests; nor is the check what makes a commit atomic (the catalog's compare-and-swap
    # of the metadata location is). Iceberg Java writes new metadata files with overwrite too.
    overwrite = overwrite or _NEW_NAME.search(output_file.location) is not None
    if isinstance(metadata, TableMetadataV2):
        with output_file.create(overwrite=overwrite) as stream:
            text = metadata_json(metadata).encode(UTF8)
            stream.write(Compressor.get_compressor(output_file.location).bytes_compressor()(text))
    else:  # v1 drops fields of its snapshots on the way out; v3 pyiceberg does not write
        _write(metadata, output_file, overwrite)
    _remember(output_file.location, metadata)


def metadata_json(metadata: TableMetadataV2) -> str:
    """``metadata`` as pyiceberg's ``ToOutputFile.table_metadata`` writes it, its snapshots and
    snapshot log from the pieces kept for them."""
    exclude_none = not Config().get_bool("legacy-current-snapshot-id")  # pyiceberg's own rule
    fields = metadata.model_dump_json(exclude_none=exclude_none, exclude={field for field, _ in _LISTS})
    with _lock:
        known = _pieces.get(metadata.table_uuid, {})
    pieces: dict[int, tuple[Any, str]] = {}
    lists = []
    for field, key in _LISTS:
        texts = []
        for entry in getattr(metadata, field):
            piece = known.get(id(entry))
            if piece is None or piece[0] is not entry:
                piece = (entry, entry.model_dump_json(exclude_none=exclude_none))
            pieces[id(entry)] = piece
            texts.append(piece[1])
        lists.append(f'"{key}":[{",".join(texts)}]')
    _keep_pieces(metadata.table_uuid, pieces)
    return fields[:-1] + "," + ",".join(lists) + "}"


def _shallow_deepcopy(self: Any, memo: dict[int, Any] | None = None) -> Any:
    return self.__copy__()


def install() -> None:
    """Cache parsed metadata by location and make metadata deep copies shallow (idempotent)."""
    global _installed
    if _installed:
        return
    FromInputFile.table_metadata = staticmethod(_read_cached)  # type: ignore[method-assign]
    ToOutputFile.table_metadata = staticmethod(_write_remembered)  # type: ignore[method-assign]
    for cls in (TableMetadataV1, TableMetadataV2, TableMetadataV3):
        cls.__deepcopy__ = _shallow_deepcopy  # type: ignore[method-assign]
    _installed = True
