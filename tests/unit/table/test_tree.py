"""The hash-bucket tree: node ids, children, parents and relations (DESIGN "Keys and the tree")."""

from __future__ import annotations

import pytest

from arctic_sql.table.format.layout import parse_file_path
from arctic_sql.table.format.tree import DataTreeNode


def test_ids_follow_amoro():
    assert DataTreeNode.root().id == 1
    assert [DataTreeNode(3, i).id for i in range(4)] == [4, 5, 6, 7]
    assert all(DataTreeNode.of_id(n).id == n for n in range(1, 64))
    assert DataTreeNode.of_id(6) == DataTreeNode(3, 2)


def test_children_and_parent_are_inverse():
    for node_id in range(1, 32):
        node = DataTreeNode.of_id(node_id)
        left, right = node.children()
        assert left == DataTreeNode(2 * node.mask + 1, node.index)
        assert right == DataTreeNode(2 * node.mask + 1, node.index + node.mask + 1)
        assert left.parent() == node and right.parent() == node


def test_a_key_lives_on_one_root_to_leaf_path():
    # A hash h lands in node (m, h & m) at every level: those nodes are all related, others are not.
    for h in range(64):
        path = [DataTreeNode(m, h & m) for m in (0, 1, 3, 7, 15)]
        for a in path:
            for b in path:
                assert a.is_related(b)
        for m in (1, 3, 7, 15):
            for index in range(m + 1):
                other = DataTreeNode(m, index)
                if index != h & m:
                    assert not any(other == p for p in path)
                    assert not other.is_related(path[-1])


def test_base_and_change_with_different_bucket_counts_relate():
    base, change = DataTreeNode(3, 1), DataTreeNode(7, 5)  # 4 and 8 buckets: index 5 & 3 == 1
    assert change.is_descendant_of(base) and base.is_related(change)
    assert not DataTreeNode(7, 6).is_related(base)


def test_invalid_nodes_are_refused():
    with pytest.raises(ValueError):
        DataTreeNode(2, 0)
    with pytest.raises(ValueError):
        DataTreeNode(3, 4)


def test_file_paths_record_node_and_kind():
    assert parse_file_path(
        "file:///w/db.db/t/change/data/ab/arctic_node=6/arctic_op=delete/part-0.parquet"
    ) == (6, True)
    assert parse_file_path("s3://b/t/base/data/ab/arctic_p_0=eu/arctic_node=5/part-1.parquet") == (5, False)
    assert parse_file_path("/elsewhere/x.parquet") == (1, False)
