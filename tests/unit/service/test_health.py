"""The health score's definition (service/health.py): each component loses its points linearly up to
the optimizer's own trigger, and the breakdown says which one cost the most."""

from __future__ import annotations

from arctic_sql.service.health import HealthSettings, TableMeasure, health_score

SETTINGS = HealthSettings(minor_file_count=12, duplicate_ratio=0.1, delete_ratio=0.2)


def measure(**changes: int) -> TableMeasure:
    base = {
        "files": 4,
        "small_files": 4,
        "nodes": 4,
        "partitions": 1,
        "base_rows": 1000,
        "change_rows": 0,
        "delete_rows": 0,
        "upsert_rows": 0,
    }
    return TableMeasure(**{**base, **changes})


def points(score) -> dict[str, float]:
    return {c.name: c.points for c in score.components}


def test_a_merged_table_and_an_empty_one_score_100():
    assert health_score(measure(), SETTINGS).score == 100
    empty = health_score(measure(files=0, small_files=0, partitions=0, base_rows=0), SETTINGS)
    assert empty.score == 100 and empty.as_dict()["summary"] == "healthy"


def test_small_files_beyond_one_per_node_cost_up_to_40_at_the_minor_trigger():
    assert points(health_score(measure(files=10, small_files=10), SETTINGS))["small_files"] == 20.0  # 6 of 12
    assert points(health_score(measure(files=16, small_files=16), SETTINGS))["small_files"] == 0.0
    assert points(health_score(measure(files=40, small_files=40), SETTINGS))["small_files"] == 0.0
    two = health_score(measure(files=20, small_files=20, nodes=8, partitions=2), SETTINGS)  # 12 of 24
    assert points(two)["small_files"] == 20.0


def test_unmerged_change_rows_cost_up_to_40_at_the_duplicate_ratio():
    assert points(health_score(measure(change_rows=50, upsert_rows=50), SETTINGS))["unmerged_changes"] == 20.0
    assert (
        points(health_score(measure(change_rows=100, upsert_rows=100), SETTINGS))["unmerged_changes"] == 0.0
    )
    no_base = health_score(measure(base_rows=0, change_rows=3, upsert_rows=3), SETTINGS)
    assert points(no_base)["unmerged_changes"] == 0.0


def test_deletes_cost_up_to_20_at_the_delete_ratio_and_the_summary_names_the_worst():
    score = health_score(measure(change_rows=10, delete_rows=10), SETTINGS)  # 10 / 1000 rows, 0.05 of 0.2
    assert points(score)["delete_ratio"] == 19.0
    bad = health_score(measure(change_rows=300, delete_rows=300), SETTINGS)
    assert points(bad) == {"small_files": 40.0, "unmerged_changes": 0.0, "delete_ratio": 0.0}
    assert bad.score == 40 and bad.as_dict()["summary"] == "most points lost to unmerged_changes (40)"
    assert "major.trigger.delete-ratio" in bad.components[2].explanation
