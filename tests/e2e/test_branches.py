"""Branches: a line of history beside main in both stores, read, written and fast-forwarded."""

from __future__ import annotations

import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.update import SetPropertiesUpdate, SetSnapshotRefUpdate

from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.table.format import versions
from arctic_sql.table.reading import branches
from arctic_sql.table.records import fast_forwards
from arctic_sql.table.writing import fast_forward_intents

pytestmark = pytest.mark.spark

MAIN = [(1, "a"), (2, "b"), (3, "c")]


def _rows(arctic, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def _refs(arctic) -> dict[str, tuple[str, int]]:
    return {r["name"]: (r["type"], r["version"]) for r in arctic.sql("SELECT * FROM db.t.refs").collect()}


def _history(arctic, name: str = "db.t") -> list[int]:
    return [r["version"] for r in arctic.sql(f"SELECT version FROM {name}.history").collect()]


@pytest.fixture
def branched(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")
    arctic.sql("INSERT INTO db.t VALUES (3, 'c')")
    arctic.sql("ALTER TABLE db.t CREATE BRANCH audit")
    return arctic


def test_each_dml_on_a_branch_leaves_main_alone(branched):
    history = _history(branched)
    branched.sql("INSERT INTO db.t.branch_audit VALUES (4, 'd'), (1, 'A')")
    branched.sql("UPDATE db.t.branch_audit SET v = 'B' WHERE id = 2")
    branched.sql("DELETE FROM db.t.branch_audit WHERE id = 3")
    branched.sql(
        "CREATE OR REPLACE TEMPORARY VIEW src AS SELECT * FROM VALUES (4, 'D'), (5, 'e') AS s(id, v)"
    )
    branched.sql(
        "MERGE INTO db.t.branch_audit t USING src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
    )
    audit = [(1, "A"), (2, "B"), (4, "D"), (5, "e")]
    assert _rows(branched, "SELECT * FROM db.t.branch_audit") == audit
    read = branched.spark.read.format("arctic").option("branch", "audit").load("db.t")
    assert sorted(tuple(r) for r in read.select("id", "v").collect()) == audit
    assert _rows(branched, "SELECT * FROM db.t") == MAIN
    assert _history(branched) == history
    assert _refs(branched)["audit"] == ("BRANCH", _history(branched, "db.t.branch_audit")[-1])
    assert _refs(branched)["main"] == ("BRANCH", history[-1])
    # a write to main does not reach the branch either
    branched.sql("INSERT INTO db.t VALUES (9, 'z')")
    assert _rows(branched, "SELECT * FROM db.t.branch_audit") == audit
    assert _rows(branched, "SELECT * FROM db.t") == [*MAIN, (9, "z")]


def test_fast_forward_publishes_the_branch_in_both_stores(branched):
    branched.sql("INSERT INTO db.t.branch_audit VALUES (4, 'd')")
    branched.sql("DELETE FROM db.t.branch_audit WHERE id = 1")
    audit_history = _history(branched, "db.t.branch_audit")
    out = branched.sql("CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')").collect()
    assert [tuple(r) for r in out] == [("main", 2, audit_history[-1])]
    assert _rows(branched, "SELECT * FROM db.t") == [(2, "b"), (3, "c"), (4, "d")]
    assert _history(branched) == audit_history
    table = branched.table("db.t")
    for store in (table.base, table.change):
        assert store.metadata.refs["main"].snapshot_id == store.metadata.refs["audit"].snapshot_id
    # main is at the branch's head: writing on either again keeps them apart
    branched.sql("INSERT INTO db.t VALUES (7, 'g')")
    assert _rows(branched, "SELECT * FROM db.t.branch_audit") == [(2, "b"), (3, "c"), (4, "d")]


def test_fast_forward_is_refused_when_main_moved_on(branched):
    branched.sql("INSERT INTO db.t.branch_audit VALUES (4, 'd')")
    branched.sql("INSERT INTO db.t VALUES (9, 'z')")
    refs = _refs(branched)
    with pytest.raises(
        InvalidArgumentError, match=r"^Cannot fast-forward 'main' of db.t to 'audit': 'main' has"
    ):
        branched.sql("CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')")
    assert _refs(branched) == refs
    assert _rows(branched, "SELECT * FROM db.t") == [*MAIN, (9, "z")]
    with pytest.raises(InvalidArgumentError, match=r"^db.t.branch_audit is a branch: procedures"):
        branched.sql("CALL system.expire_snapshots(table => 'db.t.branch_audit')")


def _crash_between_stores(arctic, monkeypatch) -> list[tuple]:
    """Give audit commits of both kinds (an optimize, an INSERT OVERWRITE: base-store commits) and
    newer changes, then run a fast-forward of main that dies after moving the base store; returns
    audit's rows."""
    arctic.sql("INSERT INTO db.t.branch_audit VALUES (4, 'd')")
    arctic.sql("DELETE FROM db.t.branch_audit WHERE id = 1")
    arctic.sql("CALL system.optimize(table => 'db.t.branch_audit', mode => 'full')")
    arctic.sql("INSERT OVERWRITE db.t.branch_audit VALUES (2, 'b'), (3, 'c'), (4, 'd'), (6, 'x')")
    arctic.sql("DELETE FROM db.t.branch_audit WHERE id = 6")
    arctic.sql("INSERT INTO db.t.branch_audit VALUES (5, 'e')")
    head = _rows(arctic, "SELECT * FROM db.t.branch_audit")
    assert head == [(2, "b"), (3, "c"), (4, "d"), (5, "e")]
    monkeypatch.setenv("ARCTIC_FAULT", "raise:fast-forward-between-stores")
    with pytest.raises(Exception, match="injected fault at fast-forward-between-stores"):
        arctic.sql("CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')")
    monkeypatch.delenv("ARCTIC_FAULT")
    return head


def _stores(arctic):
    """The table's two stores as the catalog holds them (the table a read loads shows main's base as it
    was while a fast-forward is pending: reading/branches.as_read)."""
    table = arctic.table("db.t")
    table.base.refresh()
    return table.base, table.change


def _published(arctic, audit_history: list[int]) -> None:
    """main is audit: the same refs in both stores, the same history, and no intent left."""
    base, change = _stores(arctic)
    for store in (base, change):
        assert store.metadata.refs["main"].snapshot_id == store.metadata.refs["audit"].snapshot_id
    assert fast_forwards.key("main") not in change.properties
    assert fast_forwards.key("main") not in change.metadata.refs
    assert _history(arctic)[: len(audit_history)] == audit_history


def test_a_fast_forward_that_dies_between_the_stores_reads_as_before_and_a_rerun_completes(
    branched, monkeypatch
):
    """The base store moves first: a fast-forward that dies before the change store moves leaves its
    intent pending, main reading as it did (each version, not the moved base with the older change
    line, which would show audit's INSERT OVERWRITE without the changes before it), and running it
    again completes it."""
    history = _history(branched)
    head = _crash_between_stores(branched, monkeypatch)
    audit_history = _history(branched, "db.t.branch_audit")
    base, change = _stores(branched)
    assert base.metadata.refs["main"].snapshot_id == base.metadata.refs["audit"].snapshot_id
    assert change.metadata.refs["main"].snapshot_id != change.metadata.refs["audit"].snapshot_id
    intent = fast_forwards.pending(change, "main")
    assert intent is not None and intent.base_to == base.metadata.refs["audit"].snapshot_id
    assert change.metadata.refs[fast_forwards.key("main")].snapshot_id == intent.change_to
    assert _rows(branched, "SELECT * FROM db.t") == MAIN  # main reads as before: nothing published
    assert _history(branched) == history
    for version in history:
        assert _rows(branched, f"SELECT * FROM db.t VERSION AS OF {version}") in (MAIN, MAIN[:2])
    assert set(_refs(branched)) == {"main", "audit"}  # the intent's tag is no ref of the table's
    out = branched.sql("CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')")
    assert [tuple(r) for r in out.collect()] == [("main", audit_history[-1], audit_history[-1])]
    assert _rows(branched, "SELECT * FROM db.t") == head
    _published(branched, audit_history)
    assert _history(branched) == audit_history


def test_an_insert_into_main_after_a_fast_forward_died_between_the_stores_lands_after_it(
    branched, monkeypatch
):
    """The next commit on main finishes the pending fast-forward first (roll forward: the base already
    moved), then commits on the published pair: main reads audit's rows with the insert on top, every
    version of audit reads the same on main, and a rerun of the fast-forward has nothing left to do."""
    head = _crash_between_stores(branched, monkeypatch)
    audit_history = _history(branched, "db.t.branch_audit")
    audit_versions = {
        v: _rows(branched, f"SELECT * FROM db.t.branch_audit VERSION AS OF {v}") for v in audit_history
    }
    branched.sql("INSERT INTO db.t VALUES (2, 'B'), (7, 'g')")
    expected = sorted({**dict(head), 2: "B", 7: "g"}.items())
    assert _rows(branched, "SELECT * FROM db.t") == expected
    moved_on = _history(branched)
    assert moved_on[:-1] == audit_history and moved_on[-1] > audit_history[-1]
    for version, rows in audit_versions.items():
        assert _rows(branched, f"SELECT * FROM db.t VERSION AS OF {version}") == rows
    _, change = _stores(branched)
    assert fast_forwards.pending(change, "main") is None
    out = branched.sql("CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')")
    latest = moved_on[-1]
    assert [tuple(r) for r in out.collect()] == [("main", latest, latest)]  # audit is in main already
    assert _rows(branched, "SELECT * FROM db.t") == expected
    assert _rows(branched, "SELECT * FROM db.t.branch_audit") == head


def test_an_optimize_of_main_after_a_fast_forward_died_between_the_stores_finishes_it_first(
    branched, monkeypatch
):
    """An optimizing commit goes through the same commit loop: it finishes the fast-forward before it
    commits anything, and what it commits (or drops, its inputs having moved) keeps audit's rows."""
    head = _crash_between_stores(branched, monkeypatch)
    audit_history = _history(branched, "db.t.branch_audit")
    branched.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    assert _rows(branched, "SELECT * FROM db.t") == head
    base, change = _stores(branched)
    assert change.metadata.refs["main"].snapshot_id == change.metadata.refs["audit"].snapshot_id
    assert fast_forwards.pending(change, "main") is None
    assert _history(branched) == audit_history
    branched.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    assert _rows(branched, "SELECT * FROM db.t") == head
    assert _history(branched) == audit_history  # optimizing makes no version
    branched.sql("CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')")
    assert _rows(branched, "SELECT * FROM db.t") == head
    branched.sql("INSERT INTO db.t VALUES (8, 'h')")
    assert _rows(branched, "SELECT * FROM db.t") == [*head, (8, "h")]


def test_a_pending_fast_forward_refuses_change_commits_that_did_not_see_it_and_is_finished_once(
    branched, monkeypatch
):
    """Concurrency: a change-store commit on main carries the requirement that no intent of main is
    pending, which the catalog checks with the commit itself, so a writer that loaded the table before
    the intent cannot land beside it; two processes that both found the intent finish it once, the
    second finding nothing left to do."""
    head = _crash_between_stores(branched, monkeypatch)
    first, second = branched.table("db.t"), branched.table("db.t")  # both loaded with the intent pending
    change = first.change
    with pytest.raises(CommitFailedException):
        change.catalog.commit_table(
            change, (fast_forward_intents.guard(None),), (SetPropertiesUpdate(updates={"x": "y"}),)
        )
    assert fast_forward_intents.settle(first)
    assert not fast_forward_intents.settle(first)
    heads = [s.metadata.refs["main"].snapshot_id for s in _stores(branched)]
    assert fast_forward_intents.finish("db.t", second.base, second.change, "main")  # found it done
    assert [s.metadata.refs["main"].snapshot_id for s in _stores(branched)] == heads
    assert _rows(branched, "SELECT * FROM db.t") == head
    _published(branched, _history(branched, "db.t.branch_audit"))


def test_expiration_finishes_a_pending_fast_forward_before_it_plans(branched, monkeypatch):
    """Expiration plans on the table's real refs: with an intent pending that would be the moved base
    with main's older change line, so it finishes the fast-forward first."""
    head = _crash_between_stores(branched, monkeypatch)
    audit_history = _history(branched, "db.t.branch_audit")
    out = branched.sql("CALL system.expire_snapshots(table => 'db.t', retain_last => 1)").collect()
    assert out[0]["expired_snapshots_count"] == 0  # nothing old enough: only the fast-forward moved
    assert _rows(branched, "SELECT * FROM db.t") == head
    _published(branched, audit_history)
    assert _history(branched) == audit_history


def test_a_pending_fast_forward_that_cannot_be_completed_is_rolled_back(branched, monkeypatch):
    """Only an intent whose refs moved in a way it does not know (a writer unaware of intents moved
    main's change head) is undone: the base store's main goes back where it was and the intent is
    cleared, and the fast-forward then runs again from there."""
    head = _crash_between_stores(branched, monkeypatch)
    base, change = _stores(branched)
    intent = fast_forwards.pending(change, "main")
    assert intent is not None
    audit = branches.on_branch(branched.table("db.t"), "audit")
    audit_line = [s.snapshot_id for s in versions.snapshots_in_order(audit.change)]
    elsewhere = audit_line[audit_line.index(intent.change_from) + 1]  # one of audit's, not its head
    assert elsewhere != intent.change_to
    change.catalog.commit_table(
        change,
        (),
        (SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=elsewhere),),
    )
    assert not fast_forward_intents.finish("db.t", base, change, "main")
    base, change = _stores(branched)
    assert base.metadata.refs["main"].snapshot_id == intent.base_from
    assert change.metadata.refs["main"].snapshot_id == elsewhere
    assert fast_forwards.pending(change, "main") is None
    assert fast_forwards.key("main") not in change.metadata.refs
    branched.sql("CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')")
    assert _rows(branched, "SELECT * FROM db.t") == head
    _published(branched, _history(branched, "db.t.branch_audit"))


def test_a_branch_made_at_an_old_version_reads_that_version_and_is_dropped(branched):
    branched.sql("ALTER TABLE db.t CREATE BRANCH early AS OF VERSION 1")
    assert _rows(branched, "SELECT * FROM db.t.branch_early") == [(1, "a"), (2, "b")]
    branched.sql("INSERT INTO db.t.branch_early VALUES (2, 'x')")
    assert _rows(branched, "SELECT * FROM db.t.branch_early") == [(1, "a"), (2, "x")]
    assert _rows(branched, "SELECT * FROM db.t.branch_early VERSION AS OF 1") == [(1, "a"), (2, "b")]
    assert _rows(branched, "SELECT * FROM db.t") == MAIN
    branched.sql("ALTER TABLE db.t DROP BRANCH early")
    branched.sql("ALTER TABLE db.t DROP BRANCH IF EXISTS early")
    assert set(_refs(branched)) == {"main", "audit"}
    with pytest.raises(
        VersionNotFoundError, match=r"^Branch 'early' of db.t does not exist \(branches: audit"
    ):
        branched.sql("SELECT * FROM db.t.branch_early").collect()


def test_bad_branch_statements_are_refused_in_one_line_and_change_nothing(branched):
    branched.sql("ALTER TABLE db.t CREATE TAG q3")
    refs = _refs(branched)
    bad = [
        (
            "ALTER TABLE db.t CREATE BRANCH audit",
            InvalidArgumentError,
            r"^Branch 'audit' of db.t already exists$",
        ),
        (
            "ALTER TABLE db.t CREATE BRANCH q3",
            InvalidArgumentError,
            r"^'q3' is a tag of db.t: a branch needs",
        ),
        (
            "ALTER TABLE db.t CREATE TAG audit",
            InvalidArgumentError,
            r"^'audit' is a branch of db.t: a tag needs",
        ),
        (
            "ALTER TABLE db.t CREATE BRANCH main",
            InvalidArgumentError,
            r"^'main' is not a branch name of db.t",
        ),
        (
            "ALTER TABLE db.t CREATE BRANCH b AS OF VERSION 99",
            VersionNotFoundError,
            r"^Version 99 of db.t does not",
        ),
        (
            "ALTER TABLE db.t DROP BRANCH nope",
            VersionNotFoundError,
            r"^Branch 'nope' of db.t does not exist$",
        ),
        (
            "INSERT INTO db.t.branch_nope VALUES (5, 'e')",
            VersionNotFoundError,
            r"^Branch 'nope' of db.t does not",
        ),
        (
            "ALTER TABLE db.t.branch_audit CREATE BRANCH b",
            InvalidArgumentError,
            r"^Tags and branches belong to",
        ),
        (
            "DROP TABLE db.t.branch_audit",
            InvalidArgumentError,
            r"^DROP TABLE takes a table, not a branch: db.t.branch_audit",
        ),
        (
            "ALTER TABLE db.t.branch_audit ADD COLUMNS (w INT)",
            InvalidArgumentError,
            r"^ALTER TABLE takes a table, not a",
        ),
        (
            "CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'nope')",
            VersionNotFoundError,
            r"^Branch 'nope' of db.t does not exist",
        ),
    ]
    for sql, error, message in bad:
        with pytest.raises(error, match=message):
            branched.sql(sql).collect()
    branched.sql("ALTER TABLE db.t CREATE BRANCH IF NOT EXISTS audit")
    assert _refs(branched) == refs
    assert _rows(branched, "SELECT * FROM db.t") == MAIN
    assert _rows(branched, "SELECT * FROM db.t.branch_audit") == MAIN
    assert [f.name for f in branched.table("db.t").schema.fields] == ["id", "v"]


def test_names_like_a_branch_keep_their_meaning(arctic):
    arctic.sql("CREATE TABLE db.branch_audit (id BIGINT, branch_audit STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.branch_audit VALUES (1, 'x')")
    assert _rows(arctic, "SELECT branch_audit FROM db.branch_audit") == [("x",)]
    assert _rows(arctic, "SELECT id, db.branch_audit.branch_audit FROM db.branch_audit") == [(1, "x")]
    assert [r["version"] for r in arctic.sql("SELECT version FROM db.branch_audit.history").collect()] == [1]


def test_the_dataframe_writer_writes_to_a_branch(branched):
    df = branched.spark.createDataFrame([(4, "d"), (1, "A")], "id long, v string")
    df.write.format("arctic").mode("append").option("branch", "audit").save("db.t")
    assert _rows(branched, "SELECT * FROM db.t.branch_audit") == [(1, "A"), (2, "b"), (3, "c"), (4, "d")]
    assert _rows(branched, "SELECT * FROM db.t") == MAIN
    with pytest.raises(Exception, match=r"Branch 'nope' of db.t does not exist"):
        df.write.format("arctic").mode("append").option("branch", "nope").save("db.t")
    assert _rows(branched, "SELECT * FROM db.t") == MAIN


def test_maintenance_keeps_what_a_branch_reads_and_optimizing_keeps_the_lines_apart(branched):
    from arctic_sql.table.maintenance import expiration, orphan_removal

    branched.sql("INSERT INTO db.t.branch_audit VALUES (4, 'd')")
    branched.sql("UPDATE db.t.branch_audit SET v = 'C' WHERE id = 3")
    for i in range(3):
        branched.sql(f"INSERT INTO db.t VALUES ({10 + i}, 'm')")
    main = [*MAIN, (10, "m"), (11, "m"), (12, "m")]
    audit = [(1, "a"), (2, "b"), (3, "C"), (4, "d")]
    branched.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    branched.sql(
        "CALL system.expire_snapshots(table => 'db.t', older_than => now() + INTERVAL 1 DAY, retain_last => 1)"
    )
    orphan_removal.remove_orphan_files(
        branched.table("db.t"), older_than_ms=expiration.now_ms() + 1000, force=True
    )
    assert _rows(branched, "SELECT * FROM db.t") == main
    assert _rows(branched, "SELECT * FROM db.t.branch_audit") == audit
    assert _rows(branched, "SELECT * FROM db.t.branch_audit VERSION AS OF 2") == MAIN  # its history is kept
    main_files = {r["path"] for r in branched.sql("SELECT path FROM db.t.files").collect()}
    branch_files = {
        r["path"]: r["sequence_number"]
        for r in branched.sql("SELECT path, sequence_number FROM db.t.branch_audit.files").collect()
    }
    written_on_branch = {p for p, seq in branch_files.items() if seq > 2}  # after the fork at version 2
    assert len(written_on_branch) == 2 and not written_on_branch & main_files
    assert any("/optimize-" in p for p in main_files)
    assert not any("/optimize-" in p for p in branch_files)
    # after the branch is dropped, expiration may take what only it read
    branched.sql("ALTER TABLE db.t DROP BRANCH audit")
    branched.sql(
        "CALL system.expire_snapshots(table => 'db.t', older_than => now() + INTERVAL 1 DAY, retain_last => 1)"
    )
    assert _rows(branched, "SELECT * FROM db.t") == main


def test_a_table_without_a_key_branches_too(arctic):
    arctic.sql("CREATE TABLE db.log (id BIGINT, v STRING)")
    arctic.sql("INSERT INTO db.log VALUES (1, 'a')")
    arctic.sql("ALTER TABLE db.log CREATE BRANCH audit")
    arctic.sql("INSERT INTO db.log.branch_audit VALUES (2, 'b')")
    arctic.sql("DELETE FROM db.log.branch_audit WHERE id = 1")
    assert _rows(arctic, "SELECT * FROM db.log.branch_audit") == [(2, "b")]
    assert _rows(arctic, "SELECT * FROM db.log") == [(1, "a")]
    arctic.sql("CALL system.fast_forward(table => 'db.log', branch => 'main', to => 'audit')")
    assert _rows(arctic, "SELECT * FROM db.log") == [(2, "b")]


def test_insert_overwrite_on_a_branch_moves_both_stores_when_published(branched):
    branched.sql("INSERT OVERWRITE db.t.branch_audit VALUES (8, 'h')")
    branched.sql("INSERT INTO db.t.branch_audit VALUES (9, 'i')")
    assert _rows(branched, "SELECT * FROM db.t.branch_audit") == [(8, "h"), (9, "i")]
    assert _rows(branched, "SELECT * FROM db.t") == MAIN
    table = branched.table("db.t")
    assert table.base.metadata.refs["main"].snapshot_id != table.base.metadata.refs["audit"].snapshot_id
    branched.sql("CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')")
    assert _rows(branched, "SELECT * FROM db.t") == [(8, "h"), (9, "i")]
    assert _rows(branched, "SELECT * FROM db.t VERSION AS OF 2") == MAIN


def test_set_arctic_branch_sends_a_sessions_reads_and_writes_to_the_branch(branched):
    """Write-audit-publish with a session default (Iceberg's ``spark.wap.branch``)."""
    branched.sql("CREATE TABLE db.other (id BIGINT, v STRING, PRIMARY KEY (id))")
    branched.sql("INSERT INTO db.other VALUES (1, 'o')")
    history = _history(branched)
    branched.sql("SET arctic.branch = audit")
    try:
        branched.sql("INSERT INTO db.t VALUES (4, 'd')")
        branched.sql("UPDATE db.t SET v = 'B' WHERE id = 2")
        branched.sql("DELETE FROM db.t WHERE id = 1")
        branched.sql(
            "MERGE INTO db.t t USING (SELECT 5 AS id, 'e' AS v) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"
        )
        audit = [(2, "B"), (3, "c"), (4, "d"), (5, "e")]
        assert _rows(branched, "SELECT * FROM db.t") == audit  # the session reads its branch
        assert _rows(branched, "SELECT * FROM db.t.branch_audit") == audit
        # main did not move (metadata tables belong to the whole table)
        assert _history(branched) == history
        # a table without the branch is read on main, and a write to it is refused, changing nothing
        assert _rows(branched, "SELECT * FROM db.other") == [(1, "o")]
        with pytest.raises(InvalidArgumentError, match=r"^db.other has no branch 'audit' to write to"):
            branched.sql("INSERT INTO db.other VALUES (2, 'p')")
    finally:
        branched.sql("RESET arctic.branch")
    assert _rows(branched, "SELECT * FROM db.t") == MAIN
    assert _rows(branched, "SELECT * FROM db.other") == [(1, "o")]
    branched.sql("CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')")
    assert _rows(branched, "SELECT * FROM db.t") == audit


def _branch_only_files(arctic) -> set[str]:
    main = {r["path"] for r in arctic.sql("SELECT path FROM db.t.files").collect()}
    return {r["path"] for r in arctic.sql("SELECT path FROM db.t.branch_audit.files").collect()} - main


def test_a_branch_is_optimized_on_its_own_line(branched):
    """CALL system.optimize on a branch, and the optimizer service's round, commit to the branch's
    refs only: main's files and rows never change, and the branch's rows stay what they were."""
    from arctic_sql.optimizer.service import Service

    branched.sql("INSERT INTO db.t.branch_audit VALUES (4, 'd')")
    branched.sql("UPDATE db.t.branch_audit SET v = 'B' WHERE id = 2")
    audit = [(1, "a"), (2, "B"), (3, "c"), (4, "d")]
    main_files = {r["path"] for r in branched.sql("SELECT path FROM db.t.files").collect()}
    out = branched.sql("CALL system.optimize(table => 'db.t.branch_audit', mode => 'full')").collect()
    assert [r["committed"] for r in out] == [True]
    assert any("/optimize-" in p for p in _branch_only_files(branched))
    assert _rows(branched, "SELECT * FROM db.t.branch_audit") == audit
    assert {r["path"] for r in branched.sql("SELECT path FROM db.t.files").collect()} == main_files
    assert _rows(branched, "SELECT * FROM db.t") == MAIN

    # the service finds the branch's due minor optimizing (one change file is enough here) on its own
    branched.sql("ALTER TABLE db.t SET TBLPROPERTIES ('self-optimizing.minor.trigger.interval' = '1')")
    branched.sql("INSERT INTO db.t.branch_audit VALUES (5, 'e')")
    before = _branch_only_files(branched)
    Service(branched.spark, branched.catalog).run_once()
    assert _rows(branched, "SELECT * FROM db.t.branch_audit") == [*audit, (5, "e")]
    assert _rows(branched, "SELECT * FROM db.t") == MAIN
    made = _branch_only_files(branched) - before
    assert any("/optimize-" in p for p in made)
    assert not made & {r["path"] for r in branched.sql("SELECT path FROM db.t.files").collect()}


def test_a_branch_streams_its_changes_into_another_tables_branch(branched, tmp_path):
    """The change stream reads a branch's own line (option branch), and the sink writes a branch:
    each run delivers only what the branch committed since, and main on either side is untouched."""
    spark = branched.spark
    branched.sql("CREATE TABLE db.copy (id BIGINT, v STRING, PRIMARY KEY (id))")
    branched.sql("ALTER TABLE db.copy CREATE BRANCH audit")
    checkpoint = str(tmp_path / "cp")

    def follow() -> None:
        changes = (
            spark.readStream.format("arctic")
            .option("readChangeFeed", "true")
            .option("branch", "audit")
            .load("db.t")
            .select("id", "v", "_change_type")
        )
        query = (
            changes.writeStream.format("arctic")
            .option("branch", "audit")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start("db.copy")
        )
        query.awaitTermination()

    follow()
    assert _rows(branched, "SELECT * FROM db.copy.branch_audit") == MAIN
    branched.sql("INSERT INTO db.t.branch_audit VALUES (4, 'd')")
    branched.sql("DELETE FROM db.t.branch_audit WHERE id = 1")
    branched.sql("INSERT INTO db.t VALUES (9, 'z')")  # main's commit is not the branch's change
    follow()
    assert _rows(branched, "SELECT * FROM db.copy.branch_audit") == [(2, "b"), (3, "c"), (4, "d")]
    assert _rows(branched, "SELECT * FROM db.copy") == []
    assert _rows(branched, "SELECT * FROM db.t") == [*MAIN, (9, "z")]


def test_a_read_that_a_whole_fast_forward_lands_inside_reads_main_before_or_after_it(
    branched, fast_forward_on_load
):
    """A fast-forward run between a read's load of the base store and of the change store (by the
    catalog's own load, at that moment): the SELECT reads main after it, never main's old base with
    audit's change line (main's rows with audit's last change, which no version had)."""
    branched.sql("INSERT OVERWRITE db.t.branch_audit VALUES (8, 'h')")
    branched.sql("INSERT INTO db.t.branch_audit VALUES (9, 'i')")
    armed = fast_forward_on_load(branched.catalog, "main", "audit")
    assert _rows(branched, "SELECT * FROM db.t") == [(8, "h"), (9, "i")]
    assert not armed[0]  # the fast-forward ran inside the read


def test_time_travel_that_a_whole_fast_forward_lands_inside_reads_a_version_main_has(
    branched, fast_forward_on_load
):
    """As above for ``VERSION AS OF`` audit's newest version, which only the published pair holds."""
    branched.sql("INSERT OVERWRITE db.t.branch_audit VALUES (8, 'h')")
    branched.sql("INSERT INTO db.t.branch_audit VALUES (9, 'i')")
    version = _history(branched, "db.t.branch_audit")[-1]
    armed = fast_forward_on_load(branched.catalog, "main", "audit")
    assert _rows(branched, f"SELECT * FROM db.t VERSION AS OF {version}") == [(8, "h"), (9, "i")]
    assert not armed[0]
    assert _rows(branched, "SELECT * FROM db.t VERSION AS OF 2") == MAIN
