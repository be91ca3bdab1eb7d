"""What keeps a commit's cost flat as a table's history grows (issue 28, item 5), on a real pyiceberg
SQLite catalog without Spark: parsed metadata reused by location and never stale, metadata copies that
share the (immutable) snapshots, merged manifests that still give each version its own files, and a
bounded metadata log that keeps every version readable."""

from __future__ import annotations

import copy
import json

from iceberg_tables import catalog_at, create, write
from pyiceberg.catalog import load_catalog

from arctic_sql.table.catalog import ArcticCatalog
from arctic_sql.table.files import metadata_cache
from arctic_sql.table.format import versions
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.reading.changes import Range, change_files
from arctic_sql.table.reading.scan import live_files, plan_read
from arctic_sql.table.writing import commit

T = TableIdentifier("db", "t")


def _second_catalog(folder) -> ArcticCatalog:  # noqa: ANN001 - a pytest tmp_path
    """Another catalog instance on the same SQLite catalog: what another process sees."""
    return ArcticCatalog(
        load_catalog("t", type="sql", uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}")
    )


def _two_inserts(folder):  # noqa: ANN001, ANN202 - a pytest tmp_path -> ArcticTable
    table = create(catalog_at(folder))
    for key in (1, 2):
        commit.commit_change(table, [write(table, [(key, None, "a")])], "insert")
    return table


def _change_metadata_text(table) -> str:  # noqa: ANN001 - ArcticTable
    with open(table.change.metadata_location.removeprefix("file://")) as f:
        return f.read()


def test_a_cached_metadata_never_hides_a_commit_made_through_another_catalog(tmp_path):
    first = catalog_at(tmp_path)
    table = create(first)
    other = _second_catalog(tmp_path)
    assert commit.commit_change(table, [write(table, [(1, None, "a")])], "insert") == 1
    seen = other.load_table(T)
    assert seen.change.metadata is other.load_table(T).change.metadata  # parsed once, then reused
    assert [c.version for c in versions.data_commits(seen.base, seen.change)] == [1]
    # The other catalog commits on what it loaded; the first one's next load must see it ...
    assert commit.commit_change(seen, [write(seen, [(2, None, "b")])], "insert") == 2
    again = first.load_table(T)
    assert [c.version for c in versions.data_commits(again.base, again.change)] == [1, 2]
    # ... and a commit from the first catalog's stale handle lands after it, not over it.
    assert commit.commit_change(table, [write(table, [(3, None, "c")])], "insert") == 3
    last = other.load_table(T)
    assert [c.version for c in versions.data_commits(last.base, last.change)] == [1, 2, 3]
    assert sorted(
        f.sequence_number for f in live_files(last.change, last.change.current_snapshot(), "change")
    ) == [1, 2, 3]


def test_the_metadata_a_commit_wrote_is_what_the_next_load_gets_without_parsing(tmp_path):
    table = create(catalog_at(tmp_path))
    commit.commit_change(table, [write(table, [(1, None, "a")])], "insert")
    written = metadata_cache.cached(table.change.metadata_location)
    assert written is table.change.metadata  # the committed object, kept under its new location
    metadata_cache.clear()
    reloaded = _second_catalog(tmp_path).load_table(T).change.metadata  # parsed from the file
    assert reloaded == written and reloaded is not written


def test_a_metadata_copy_shares_the_snapshots_and_a_commit_leaves_the_old_metadata_as_it_was(tmp_path):
    table = create(catalog_at(tmp_path))
    for key in (1, 2):
        commit.commit_change(table, [write(table, [(key, None, "a")])], "insert")
    before = table.change.metadata
    snapshots = list(before.snapshots)
    copied = copy.deepcopy(before)
    assert copied is not before and copied == before
    assert all(a is b for a, b in zip(copied.snapshots, before.snapshots, strict=True))
    commit.commit_change(table, [write(table, [(3, None, "c")])], "insert")
    assert before.snapshots == snapshots and len(before.snapshots) == 2  # not changed in place
    assert len(table.change.metadata.snapshots) == 3


def test_snapshots_in_order_follow_the_parents_not_the_list(tmp_path):
    table = create(catalog_at(tmp_path))
    for key in range(1, 6):
        commit.commit_change(table, [write(table, [(key, None, "a")])], "insert")
    chain = versions.snapshots_in_order(table.change)
    assert [s.sequence_number for s in chain] == [1, 2, 3, 4, 5]
    assert all(b.parent_snapshot_id == a.snapshot_id for a, b in zip(chain, chain[1:], strict=False))


def test_merged_manifests_keep_each_version_its_own_files_and_rows(tmp_path):
    table = create(catalog_at(tmp_path))
    assert table.change.properties["commit.manifest-merge.enabled"] == "true"
    assert table.base.properties["commit.manifest-merge.enabled"] == "true"
    commit.set_properties(table.change, {"commit.manifest.min-count-to-merge": "3"})
    added = {}
    for key in range(1, 11):
        path = write(table, [(key, None, f"v{key}")])
        added[commit.commit_change(table, [path], "insert")] = path
    table.change.refresh()
    current = table.change.current_snapshot()
    assert len(current.manifests(table.change.io)) < 5  # ten commits, merged as they went
    assert {f.path: f.sequence_number for f in live_files(table.change, current, "change")} == {
        p: v for v, p in added.items()
    }
    for version, path in added.items():  # each version's changes: its own file, nothing merged in
        assert [f.path for f in change_files(table, Range(version - 1, version))] == [path]
        assert sorted(f.sequence_number for f in plan_read(table, version).change_files) == list(
            range(1, version + 1)
        )


def test_a_bounded_metadata_log_keeps_every_version_readable(tmp_path):
    table = create(catalog_at(tmp_path))
    assert table.change.properties["write.metadata.previous-versions-max"] == "100"
    commit.set_properties(table.change, {"write.metadata.previous-versions-max": "2"})
    for key in range(1, 7):
        commit.commit_change(table, [write(table, [(key, None, "a")])], "insert")
    table.change.refresh()
    assert len(table.change.metadata.metadata_log) == 2
    history = versions.history(table.base, table.change)
    assert history.complete and [c.version for c in history.commits] == [1, 2, 3, 4, 5, 6]
    assert [len(plan_read(table, v).change_files) for v in (1, 3, 6)] == [1, 3, 6]


def test_metadata_written_from_kept_pieces_is_the_json_pyiceberg_writes(tmp_path):
    table = create(catalog_at(tmp_path))
    for key in range(1, 5):
        commit.commit_change(table, [write(table, [(key, None, "a")])], "insert")
    metadata = table.change.metadata
    assert json.loads(metadata_cache.metadata_json(metadata)) == json.loads(metadata.model_dump_json())
    # Expiration rewrites the parent id of the oldest survivor: a new snapshot object, a new piece.
    oldest = versions.snapshots_in_order(table.change)[0]
    commit.expire_snapshots(table.change, [oldest.snapshot_id])
    table.change.refresh()
    metadata = table.change.metadata
    assert versions.snapshots_in_order(table.change)[0].parent_snapshot_id is None
    assert json.loads(metadata_cache.metadata_json(metadata)) == json.loads(metadata.model_dump_json())
    metadata_cache.clear()
    assert _second_catalog(tmp_path).load_table(T).change.metadata == metadata  # the file, parsed


def test_a_process_that_only_parsed_the_metadata_writes_its_snapshots_from_the_json_it_read(
    tmp_path, monkeypatch
):
    # A Spark worker that commits one batch parses the metadata once and writes it once: its snapshots
    # must not be serialized again in Python (at 2,000 snapshots that was most of the commit).
    from pyiceberg.table.snapshots import Snapshot, SnapshotLogEntry

    table = create(catalog_at(tmp_path))
    for key in range(1, 5):
        commit.commit_change(table, [write(table, [(key, None, "a")])], "insert")
    metadata_cache.clear()  # as in a process that has parsed nothing yet
    with open(table.change.metadata_location.removeprefix("file://")) as f:
        parsed = metadata_cache.parse_metadata(f.read())

    def serialized_again(self, **kwargs):  # noqa: ANN001, ANN003
        raise AssertionError(f"{type(self).__name__} serialized again")

    monkeypatch.setattr(Snapshot, "model_dump_json", serialized_again)
    monkeypatch.setattr(SnapshotLogEntry, "model_dump_json", serialized_again)
    written = metadata_cache.metadata_json(parsed)
    monkeypatch.undo()
    assert len(parsed.snapshots) == 4 and len(parsed.snapshot_log) == 4
    assert json.loads(written) == json.loads(parsed.model_dump_json())


def test_a_file_another_process_wrote_is_parsed_as_pyiceberg_parses_it_reusing_known_snapshots(tmp_path):
    from pyiceberg.table.metadata import TableMetadataUtil

    table = _two_inserts(tmp_path)
    metadata_cache.clear()  # as in a process that has parsed nothing yet
    text = _change_metadata_text(table)
    assert metadata_cache.parse_metadata(text) == TableMetadataUtil.parse_raw(
        text
    )  # nothing known: all parsed
    raw = json.loads(text)  # the metadata of version 1, as an earlier file held it
    first = metadata_cache.parse_metadata(
        json.dumps(
            {
                **raw,
                "snapshots": raw["snapshots"][:1],
                "refs": {},
                "snapshot-log": raw["snapshot-log"][:1],
                "current-snapshot-id": raw["snapshots"][0]["snapshot-id"],
            }
        )
    )
    second = metadata_cache.parse_metadata(text)
    assert second == TableMetadataUtil.parse_raw(text)
    assert second.snapshots[0] is first.snapshots[0] and len(second.snapshots) == 2
    # A snapshot whose JSON differs under the same id is parsed again, not taken from before.
    changed = json.loads(text)
    changed["snapshots"][0]["summary"]["arctic.operation"] = "merge"
    third = metadata_cache.parse_metadata(json.dumps(changed))
    assert third.snapshots[0] is not first.snapshots[0]
    assert versions.operation_of(third.snapshots[0]) == "merge"


def test_the_history_of_unchanged_metadata_is_worked_out_once_and_a_commit_gives_a_new_one(tmp_path):
    catalog = catalog_at(tmp_path)
    table = create(catalog)
    commit.commit_change(table, [write(table, [(1, None, "a")])], "insert")
    first = catalog.load_table(T)
    again = catalog.load_table(T)
    assert versions.history(first.base, first.change) is versions.history(again.base, again.change)
    commit.commit_change(again, [write(again, [(2, None, "b")])], "insert")
    after = catalog.load_table(T)
    assert [c.version for c in versions.history(after.base, after.change).commits] == [1, 2]
    assert [c.version for c in versions.history(first.base, first.change).commits] == [1]


def test_a_file_another_process_wrote_reuses_the_known_log_entries_and_their_json(tmp_path):
    # A Spark worker parses each file the driver or another worker wrote: at 2,000 snapshots, parsing
    # the snapshot log again and encoding every entry's JSON again was most of that parse.
    table = _two_inserts(tmp_path)
    metadata_cache.clear()  # as in a process that has parsed nothing yet
    first = metadata_cache.parse_metadata(_change_metadata_text(table))
    pieces = dict(metadata_cache._pieces[first.table_uuid])
    commit.commit_change(table, [write(table, [(3, None, "c")])], "insert")  # as another process
    text = _change_metadata_text(table)
    second = metadata_cache.parse_metadata(text)
    assert len(second.snapshot_log) == 3 and len(second.snapshots) == 3
    old = [*first.snapshots, *first.snapshot_log]
    assert all(a is b for a, b in zip(second.snapshot_log, first.snapshot_log[:2], strict=False))
    held = metadata_cache._pieces[second.table_uuid]
    assert all(held[id(entry)][1] is pieces[id(entry)][1] for entry in old)  # not encoded again
    assert json.loads(metadata_cache.metadata_json(second)) == json.loads(text)


def test_a_read_of_a_recent_version_looks_at_the_newest_snapshots_only(tmp_path, monkeypatch):
    # VERSION AS OF and the change stream's planning find the snapshot of a version near the head:
    # walking all 2,000 snapshots from the oldest for it grew their planning with the history.
    table = create(catalog_at(tmp_path))
    for key in range(1, 21):
        commit.commit_change(table, [write(table, [(key, None, "a")])], "insert")
    seen = []
    real = versions.sequence_of
    monkeypatch.setattr(versions, "sequence_of", lambda snap: seen.append(snap) or real(snap))
    found = versions.snapshot_at(table.change, 18)
    looked_at = len(seen)
    monkeypatch.undo()
    assert found is not None and real(found) == 18
    assert looked_at == 3  # versions 20, 19 and 18
    assert [real(versions.snapshot_at(table.change, v)) for v in (1, 7, 20, 25)] == [1, 7, 20, 20]
    assert versions.snapshot_at(table.change, 0) is None
