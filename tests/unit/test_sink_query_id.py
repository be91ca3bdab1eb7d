"""The streaming sink's fallback for the query id: the checkpoint's ``metadata`` file (no Spark needed)."""

from __future__ import annotations

from arctic_sql.datasource.sink import checkpoint_query_id


def test_the_checkpoint_metadata_names_the_query(tmp_path):
    (tmp_path / "metadata").write_text('{"id":"c9f27334-1264-41f7-a5f0-4efb41b37348"}\n')
    assert checkpoint_query_id(str(tmp_path)) == "c9f27334-1264-41f7-a5f0-4efb41b37348"
    assert checkpoint_query_id(f"file://{tmp_path}") == "c9f27334-1264-41f7-a5f0-4efb41b37348"


def test_a_checkpoint_not_started_yet_has_none(tmp_path):
    assert checkpoint_query_id(str(tmp_path / "new")) is None
