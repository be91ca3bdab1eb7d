"""Views over arctic tables: kept in the arctic catalog, read afresh by every statement that names them."""

from __future__ import annotations

import pytest

from arctic_sql.errors import InvalidArgumentError, NoSuchTableError, TableAlreadyExistsError

pytestmark = pytest.mark.spark


def rows(session, sql: str) -> list[tuple]:
    return [tuple(r) for r in session.sql(sql).collect()]


@pytest.fixture
def people(arctic):
    arctic.sql("CREATE TABLE db.people (id INT, name STRING, city STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.people VALUES (1, 'ann', 'oslo'), (2, 'bob', 'rome'), (3, 'cy', 'oslo')")
    return arctic


def test_a_view_reads_its_tables_as_they_are_now(people):
    people.sql("CREATE VIEW db.oslo AS SELECT id, name FROM db.people WHERE city = 'oslo'")
    assert rows(people, "SELECT * FROM db.oslo ORDER BY id") == [(1, "ann"), (3, "cy")]
    people.sql("INSERT INTO db.people VALUES (4, 'di', 'oslo')")
    people.sql("DELETE FROM db.people WHERE id = 1")
    assert rows(people, "SELECT * FROM db.oslo ORDER BY id") == [(3, "cy"), (4, "di")]
    # A view over a view, with column names of its own; unqualified names are the creator's database.
    people.sql("USE db")
    people.sql("CREATE VIEW initials (person, initial) AS SELECT id, upper(substr(name, 1, 1)) FROM oslo")
    people.sql("USE default")
    assert rows(people, "SELECT * FROM db.initials ORDER BY person") == [(3, "C"), (4, "D")]
    assert rows(
        people,
        "SELECT i.initial, p.city FROM db.initials i JOIN db.people p ON i.person = p.id ORDER BY i.person",
    ) == [("C", "oslo"), ("D", "oslo")]
    assert rows(people, "DESCRIBE db.initials") == [("person", "int", None), ("initial", "string", None)]
    assert ("db", "initials", False) in rows(people, "SHOW TABLES IN db")
    ((_, _, _, information),) = rows(people, "SHOW TABLE EXTENDED IN db LIKE 'initials'")
    assert "Type: VIEW" in information and "FROM db.oslo" in information
    ((statement,),) = rows(people, "SHOW CREATE TABLE db.initials")
    assert statement == (
        "CREATE VIEW `db`.`initials` (`person`, `initial`) AS "
        "SELECT id, UPPER(SUBSTRING(name, 1, 1)) FROM db.oslo"
    )
    # OR REPLACE and ALTER VIEW ... AS change what it reads; DROP VIEW removes it.
    people.sql("CREATE OR REPLACE VIEW db.oslo AS SELECT id, name FROM db.people WHERE city = 'rome'")
    assert rows(people, "SELECT * FROM db.initials") == [(2, "B")]
    people.sql("ALTER VIEW db.oslo AS SELECT id, name FROM db.people WHERE id = 3")
    assert rows(people, "SELECT * FROM db.initials") == [(3, "C")]
    people.sql("DROP VIEW db.initials")
    people.sql("DROP VIEW IF EXISTS db.initials")
    assert ("db", "initials", False) not in rows(people, "SHOW TABLES IN db")
    with pytest.raises(NoSuchTableError):
        people.sql("SELECT * FROM db.initials")


def test_a_view_may_join_spark_tables_and_read_metadata_tables(people):
    spark = people.spark
    spark.sql("CREATE TABLE IF NOT EXISTS db.views_cities (city STRING, country STRING) USING parquet")
    try:
        spark.sql("INSERT OVERWRITE db.views_cities VALUES ('oslo', 'NO'), ('rome', 'IT')")
        people.sql(
            "CREATE VIEW db.located AS SELECT p.id, c.country FROM db.people p "
            "JOIN db.views_cities c ON p.city = c.city"
        )
        assert rows(people, "SELECT * FROM db.located ORDER BY id") == [(1, "NO"), (2, "IT"), (3, "NO")]
        people.sql("CREATE VIEW db.commits AS SELECT count(*) AS n FROM db.people.history")
        people.sql("INSERT INTO db.people VALUES (5, 'ed', 'rome')")
        assert rows(people, "SELECT n FROM db.commits") == [(2,)]
    finally:
        spark.sql("DROP TABLE IF EXISTS db.views_cities")


def test_views_refuse_what_spark_refuses_and_change_nothing(people):
    people.sql("CREATE VIEW db.v AS SELECT id FROM db.people WHERE id < 3")
    people.sql("CREATE VIEW db.w AS SELECT id FROM db.v")
    cases = [
        ("CREATE VIEW db.v AS SELECT 1", TableAlreadyExistsError, "View db.v already exists"),
        ("CREATE OR REPLACE VIEW db.v AS SELECT * FROM db.w", InvalidArgumentError, "View db.v reads itself"),
        (
            "CREATE OR REPLACE VIEW db.v (a, b) AS SELECT id FROM db.people",
            InvalidArgumentError,
            "View db.v names 2 columns but its query returns 1",
        ),
        ("CREATE OR REPLACE VIEW db.v AS SELECT nope FROM db.people", InvalidArgumentError, "nope"),
        (
            "CREATE VIEW db.people AS SELECT 1 FROM db.v",
            TableAlreadyExistsError,
            "a table of that name exists",
        ),
        (
            "CREATE TABLE db.v (id INT, PRIMARY KEY (id))",
            TableAlreadyExistsError,
            "a view of that name exists",
        ),
        ("SELECT * FROM db.v VERSION AS OF 1", InvalidArgumentError, "db.v is a view"),
        ("DROP TABLE db.v", InvalidArgumentError, "use DROP VIEW"),
        ("DROP VIEW db.people", InvalidArgumentError, "use DROP TABLE"),
        ("DROP DATABASE db", InvalidArgumentError, "is not empty"),
    ]
    for sql, error, message in cases:
        with pytest.raises(error, match=message):
            people.sql(sql)
    people.sql("CREATE VIEW IF NOT EXISTS db.v AS SELECT 1")  # there already: nothing happens
    assert rows(people, "SELECT * FROM db.w ORDER BY id") == [(1,), (2,)]
    assert rows(people, "SELECT count(*) FROM db.people") == [(3,)]
