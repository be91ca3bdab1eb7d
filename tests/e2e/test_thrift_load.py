"""Load: 8 PyHive sessions at once run mixed upserts and reads against one Thrift server for a bounded
time; afterwards every committed row is there and the server still answers.

Each session owns its keys, so it can check its own reads as it goes (a read after a committed upsert
returns that upsert) and the final check knows each key's last committed value exactly.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from thrift_harness import rows, shared_server

pytestmark = pytest.mark.spark

SESSIONS = 8
DURATION_S = 25  # no new statement starts after this; the one in flight finishes
MAX_STATEMENTS = 60  # per session, a second bound on the work
KEYS_PER_SESSION = 5
JOIN_TIMEOUT_S = 600


class Worker(threading.Thread):
    def __init__(self, server, index: int, deadline: float) -> None:
        super().__init__(name=f"load-{index}", daemon=True)
        self.server, self.index, self.deadline = server, index, deadline
        self.committed: dict[int, int] = {}  # key -> last value whose INSERT returned success
        self.uncertain: dict[int, set[int]] = {}  # key -> values of INSERTs that failed (may have landed)
        self.errors: list[str] = []
        self.mismatches: list[str] = []
        self.statements = 0

    def run(self) -> None:
        from pyhive.exc import OperationalError

        rng = random.Random(self.index)
        keys = [self.index * 1000 + i for i in range(KEYS_PER_SESSION)]
        conn = self.server.connect(database="load")
        cur = conn.cursor()
        value = 0
        try:
            while time.monotonic() < self.deadline and self.statements < MAX_STATEMENTS:
                self.statements += 1
                key = rng.choice(keys)
                try:
                    if rng.random() < 0.5:
                        value += 1
                        try:
                            cur.execute(f"INSERT INTO kv VALUES ({key}, {self.index}, {value})")
                        except OperationalError:
                            self.uncertain.setdefault(key, set()).add(value)
                            raise
                        self.committed[key] = value
                        self.uncertain.pop(key, None)
                    elif rng.random() < 0.5:
                        cur.execute(f"SELECT n FROM kv WHERE k = {key}")
                        got = [r[0] for r in rows(cur)]
                        allowed = {self.committed.get(key)} | self.uncertain.get(key, set())
                        expected = [self.committed[key]] if key in self.committed else []
                        if got != expected and not (len(got) == 1 and got[0] in allowed):
                            self.mismatches.append(f"key {key}: read {got}, committed {expected}")
                    else:
                        cur.execute("SELECT writer, count(*), max(n) FROM kv GROUP BY writer")
                        rows(cur)
                except OperationalError as e:
                    self.errors.append(str(e)[:300])
        finally:
            conn.close()


def test_eight_sessions_of_mixed_upserts_and_reads():
    server = shared_server()
    with server.connect() as conn:
        cur = conn.cursor()
        cur.execute("CREATE DATABASE IF NOT EXISTS load")
        cur.execute("CREATE TABLE load.kv (k INT, writer INT, n INT, PRIMARY KEY (k))")

    started = time.monotonic()
    workers = [Worker(server, i, started + DURATION_S) for i in range(SESSIONS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(JOIN_TIMEOUT_S)
    elapsed = time.monotonic() - started
    assert not any(w.is_alive() for w in workers), "a session did not finish its last statement"

    statements = sum(w.statements for w in workers)
    upserts = sum(len(w.committed) for w in workers)
    print(
        f"\n{SESSIONS} sessions, {statements} statements in {elapsed:.1f} s "
        f"({statements / elapsed:.2f}/s), {upserts} keys upserted"
    )
    errors = [e for w in workers for e in w.errors]
    # Writers own disjoint keys, so arctic-sql's committer retries their appends; nothing may fail.
    assert not errors, errors[:5]
    assert not [m for w in workers for m in w.mismatches]
    assert all(w.statements > 0 for w in workers)

    with server.connect(database="load") as conn:
        cur = conn.cursor()
        cur.execute("SELECT k, writer, n FROM kv")
        final = {k: (writer, n) for k, writer, n in rows(cur)}
        for w in workers:
            for key, value in w.committed.items():
                assert final.get(key) == (w.index, value), f"key {key}: {final.get(key)} != {value}"
        assert len(final) == sum(len(w.committed) for w in workers)
        cur.execute("SELECT 'still answering'")
        assert rows(cur) == [("still answering",)]
    assert server.alive()
