"""Chaos: writer and optimizer processes killed with SIGKILL at random moments while forced orphan
removal races them. Afterwards every acknowledged statement is in the table, no statement is partly
applied at any version, and every version reads.

Bounded: ``ROUNDS`` rounds of one writer and one optimizer process, each killed once per round
(seeded, so a failure can be replayed with the same ``ARCTIC_CHAOS_SEED``)."""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from host_load import scaled

from arctic_sql.table.maintenance import expiration, orphan_removal

pytestmark = pytest.mark.spark

ROUNDS = 2
KEYS = 5  # rows per statement: a partly applied statement shows as fewer

WRITER = textwrap.dedent(
    """
    import random, sys
    import arctic_sql
    s = arctic_sql.connect(warehouse=sys.argv[1], spark_conf={"spark.master": "local[1]"})
    run, rng = int(sys.argv[2]), random.Random(int(sys.argv[3]))
    live = []  # this run's acknowledged inserts not deleted yet
    print("ready", flush=True)
    for n in range(1, 1000):
        i = run * 1000 + n
        if live and rng.random() < 0.4:
            target = rng.choice(live)
            lo, hi = target * 10, target * 10 + 4
            if rng.random() < 0.5:
                live.remove(target)
                print("begin", i, "delete", target, flush=True)
                s.sql(f"DELETE FROM db.t WHERE id BETWEEN {lo} AND {hi}")
            else:
                print("begin", i, "update", target, flush=True)
                s.sql(f"UPDATE db.t SET v = 'u{i}' WHERE id BETWEEN {lo} AND {hi}")
        else:
            print("begin", i, "insert", i, flush=True)
            s.sql("INSERT INTO db.t VALUES " + ", ".join(f"({i * 10 + j}, 's{i}')" for j in range(5)))
            live.append(i)
        print("ack", i, flush=True)
    """
)

OPTIMIZER = textwrap.dedent(
    """
    import sys
    import arctic_sql
    s = arctic_sql.connect(warehouse=sys.argv[1], spark_conf={"spark.master": "local[1]"})
    print("ready", flush=True)
    for n in range(1000):
        mode = ("minor", "major", "full")[n % 3]
        print("begin", mode, flush=True)
        s.sql(f"CALL system.optimize(table => 'db.t', mode => '{mode}')").collect()
        print("ack", mode, flush=True)
    """
)


class Actor:
    """A subprocess whose output lines are read as they come (a thread per pipe)."""

    def __init__(self, script: str, *args: str) -> None:
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "ARCTIC_WRITE_LEASE_SECONDS": "20"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.err: list[str] = []
        self.pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.err.append), daemon=True),
        ]
        for pump in self.pumps:
            pump.start()

    @staticmethod
    def _pump(stream, put) -> None:  # noqa: ANN001
        for line in stream:
            put(line.strip())

    def drain(self, wait: float = 0) -> list[str]:
        """Every line so far, after waiting up to ``wait`` seconds for a new one."""
        try:
            self.seen.append(self.lines.get(timeout=wait) if wait else self.lines.get_nowait())
        except queue.Empty:
            return self.seen
        return self.drain()

    def count(self, word: str) -> int:
        return sum(1 for line in self.drain() if line.startswith(word))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)
        for pump in self.pumps:  # they end at the pipes' end: everything written before the kill is read
            pump.join(timeout=60)
        self.drain()


def _state(arctic, version: int | None = None) -> dict[int, str]:
    at = f" VERSION AS OF {version}" if version is not None else ""
    return {r[0]: r[1] for r in arctic.sql(f"SELECT id, v FROM db.t{at}").collect()}


def _effect(before: dict[int, str], after: dict[int, str]) -> tuple[str, int, int | None]:
    """What one version did, as (kind, the statement whose keys it touched, its own statement id when
    the data says it); a diff that is not exactly one whole statement fails the test."""
    added = {k: v for k, v in after.items() if k not in before}
    removed = {k for k in before if k not in after}
    changed = {k: v for k, v in after.items() if k in before and before[k] != v}
    targets = {k // 10 for k in [*added, *removed, *changed]}
    assert len(targets) == 1, f"a version touched several statements' keys: {sorted(targets)}"
    target = targets.pop()
    keys = {target * 10 + j for j in range(KEYS)}
    if added:
        assert not removed and not changed and set(added) == keys and set(added.values()) == {f"s{target}"}, (
            f"a partly applied INSERT: {added}"
        )
        return "insert", target, target
    if removed:
        assert not changed and removed == keys, f"a partly applied DELETE: {sorted(removed)}"
        return "delete", target, None
    values = set(changed.values())
    assert set(changed) == keys and len(values) == 1, f"a partly applied UPDATE: {changed}"
    return "update", target, int(values.pop()[1:])


def test_chaos_kills_and_forced_orphan_removal_lose_nothing(arctic, warehouse):
    seed = int(os.environ.get("ARCTIC_CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id)) "
        "TBLPROPERTIES ('base.file-index.hash-bucket' = '2', 'change.file-index.hash-bucket' = '2')"
    )
    statements: dict[int, tuple[str, int]] = {}  # id -> (kind, target) of every statement begun
    acked: list[int] = []
    passes = removed = optimizes = 0
    for run in range(1, ROUNDS + 1):
        writer = Actor(WRITER, warehouse, str(run), str(rng.randrange(1 << 30)))
        optimizer = Actor(OPTIMIZER, warehouse)
        kill_writer_after = rng.randint(2, 6)  # acknowledged statements
        kill_optimizer_after = rng.randint(1, 3)  # optimizes begun
        deadline = time.monotonic() + scaled(180)  # a bound: longer on a busy host
        writer_killed = optimizer_killed = False
        while not (writer_killed and optimizer_killed) and time.monotonic() < deadline:
            removed += len(
                orphan_removal.remove_orphan_files(
                    arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1000, force=True
                )
            )
            passes += 1
            writer.drain(wait=0.2)  # the next pass once the writer moves on, or after a fifth of a second
            if not writer_killed and writer.count("ack") >= kill_writer_after:
                time.sleep(rng.uniform(0, 1.5))  # a random moment of the next statement
                writer.kill()
                writer_killed = True
            if not optimizer_killed and optimizer.count("begin") >= kill_optimizer_after:
                time.sleep(rng.uniform(0, 3))
                optimizer.kill()
                optimizer_killed = True
            for actor in (writer, optimizer):
                assert actor.proc.poll() is None or actor.proc.returncode == -signal.SIGKILL, (
                    f"an actor failed on its own (seed {seed}): " + "\n".join(actor.err[-30:])
                )
        writer.kill()
        optimizer.kill()
        assert writer_killed and optimizer_killed, f"round {run} ran out of time (seed {seed})"
        optimizes += optimizer.count("ack")
        for line in writer.seen:
            word, *fields = line.split()
            if word == "begin":
                statements[int(fields[0])] = (fields[1], int(fields[2]))
            elif word == "ack":
                acked.append(int(fields[0]))

    # Every version is the one before it plus exactly one whole statement, in the order they ran.
    deletes = {target: i for i, (kind, target) in statements.items() if kind == "delete"}
    versions = [r[0] for r in arctic.sql("SELECT version FROM db.t.history ORDER BY version").collect()]
    landed: list[int] = []
    before: dict[int, str] = {}
    for version in versions:
        after = _state(arctic, version)
        kind, target, statement = _effect(before, after)
        landed.append(deletes[target] if kind == "delete" else statement)  # type: ignore[arg-type]
        assert statements.get(landed[-1]) == (kind, target), (
            f"version {version} is no statement's (seed {seed})"
        )
        before = after
    assert landed == sorted(landed), f"versions out of statement order (seed {seed}): {landed}"
    assert before == _state(arctic)
    missing = sorted(set(acked) - set(landed))
    assert not missing, f"acknowledged statements missing (seed {seed}): {missing}"
    in_flight = len(statements) - len(acked)
    print(
        f"chaos (seed {seed}): {len(statements)} statements tried, {len(acked)} acknowledged and all held; "
        f"{in_flight} killed in flight, all-or-nothing held ({len(landed) - len(acked)} of them landed); "
        f"{ROUNDS} writer and {ROUNDS} optimizer kills, {optimizes} optimizes finished; {passes} forced "
        f"orphan removal passes deleted {removed} files; {len(versions)} versions read back whole"
    )
