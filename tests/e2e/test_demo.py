"""The demo (``bash scripts/demo.sh``) runs, and what it tells a newcomer to try next runs too."""

from __future__ import annotations

import shlex

import pytest

from arctic_sql.frontends import demo

pytestmark = pytest.mark.spark


def test_the_demo_runs_and_what_it_suggests_next_works(arctic, warehouse):
    said: list[str] = []
    demo.run(arctic, said.append)
    assert "\narctic> SELECT * FROM demo.orders VERSION AS OF 1 ORDER BY order_id" in said

    text = demo.try_next(warehouse)
    for needle in ("system.optimize", "VERSION BETWEEN", "VERSION AS OF", "thriftserver"):
        assert needle in text, needle
    commands = [shlex.split(line) for line in text.splitlines() if " -e " in line]
    suggested = [words[words.index("-e") + 1] for words in commands]
    assert suggested == [sql for _, sql in demo.TRY_NEXT]
    assert all(words[words.index("--warehouse") + 1] == warehouse for words in commands)

    optimized = arctic.sql(suggested[0]).collect()
    assert optimized and all(row["committed"] for row in optimized)
    changes = {(r["order_id"], r["_change_type"]) for r in arctic.sql(suggested[1]).collect()}
    # After version 1: order 1 updated, 2 deleted by the MERGE, 3 deleted, 4 and 5 new.
    assert changes == {(1, "upsert"), (2, "delete"), (3, "delete"), (4, "upsert"), (5, "upsert")}
    before_last = {r["order_id"] for r in arctic.sql(suggested[2]).collect()}
    assert before_last == {1, 2, 4}  # the state before the MERGE (the optimize is not a version)
