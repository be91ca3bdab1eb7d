"""Every statement of fixtures/statements.sql parses into its node and round-trips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlglot import exp

from arctic_sql.parser import parse, parse_one, statements, to_spark_sql

FIXTURES = Path(__file__).parent / "fixtures" / "statements.sql"
_HEADER = re.compile(r"-- (?P<node>\w+)$")


def _load_fixtures() -> list[tuple[str, str]]:
    """(node class name, statement without its ';') for each entry of the fixture file."""
    entries = []
    for block in FIXTURES.read_text().split("\n\n"):
        first, _, body = block.strip().partition("\n")
        header = _HEADER.match(first)
        if header is None:
            continue
        sql = body.strip()
        assert sql.endswith(";"), f"fixture entry does not end with ';': {sql!r}"
        entries.append((header["node"], sql[:-1]))
    return entries


FIXTURE_ENTRIES = _load_fixtures()


def _node_class(name: str) -> type[exp.Expression]:
    return getattr(statements, name, None) or getattr(exp, name)


def test_the_fixture_file_covers_every_arctic_statement() -> None:
    covered = {node for node, _ in FIXTURE_ENTRIES}
    assert {cls.__name__ for cls in statements.ARCTIC_STATEMENTS} <= covered
    assert len(FIXTURE_ENTRIES) > 80


@pytest.mark.parametrize(("node", "sql"), FIXTURE_ENTRIES, ids=[sql[:60] for _, sql in FIXTURE_ENTRIES])
def test_statement_parses_into_its_node(node: str, sql: str) -> None:
    assert type(parse_one(sql)) is _node_class(node)


@pytest.mark.parametrize(("node", "sql"), FIXTURE_ENTRIES, ids=[sql[:60] for _, sql in FIXTURE_ENTRIES])
def test_statement_round_trips(node: str, sql: str) -> None:
    tree = parse_one(sql)
    printed = to_spark_sql(tree)
    assert parse_one(printed) == tree, printed
    # Printing is stable: a second round prints the same text.
    assert to_spark_sql(parse_one(printed)) == printed


def test_the_whole_file_splits_into_its_statements_with_their_original_text() -> None:
    parsed = parse(FIXTURES.read_text())
    assert [statement.sql for statement in parsed] == [sql for _, sql in FIXTURE_ENTRIES]
    assert [type(statement.expression).__name__ for statement in parsed] == [
        node for node, _ in FIXTURE_ENTRIES
    ]
