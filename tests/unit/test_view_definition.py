"""How a view's definition is kept in its database's properties."""

from __future__ import annotations

from arctic_sql.table.catalog import VIEW_KEY_PREFIX, VIEW_PART_CHARS, ViewDefinition


def test_a_long_query_is_kept_in_parts_and_read_back_whole():
    sql = "SELECT " + ", ".join(f"c{i} AS `é {i}`" for i in range(400)) + " FROM db.t"
    view = ViewDefinition(sql, ("a", "b"))
    properties = view.properties("v")
    assert len(sql) > 3 * VIEW_PART_CHARS
    assert all(len(value) <= VIEW_PART_CHARS for value in properties.values())
    assert ViewDefinition.of("v", {**properties, "other": "x"}) == view
    assert ViewDefinition.of("w", properties) is None


def test_the_parts_of_one_view_are_not_another_view():
    properties = ViewDefinition("SELECT 1", ()).properties("v")
    assert sorted(properties) == [VIEW_KEY_PREFIX + "v", VIEW_KEY_PREFIX + "v.0"]
