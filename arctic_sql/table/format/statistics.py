"""Which Parquet columns of a table's files keep min/max statistics: every writer's choice, one rule.

The Arrow writers (writing/arrow_files.py, writing/arrow_tasks.py) and the node merge of reads and
minor optimizing (reading/node_merge.py) write Parquet with pyarrow; they all leave the bounds of
floating-point columns out, so that a NaN never makes Spark skip a row group it needs.
"""

from __future__ import annotations

import pyarrow as pa


def statistics_columns(schema: pa.Schema) -> bool | list[str]:
    """What ``pq.write_table(write_statistics=...)`` gets: the Parquet leaf columns that keep min/max,
    all but FLOAT and DOUBLE ones (nested too): their bounds leave NaN out, and Spark's Parquet reader
    would skip a row group holding one for ``d > 1.0`` or ``st.d > 1.0`` (model/schemas.py: prunable_columns)."""
    leaves = [leaf for field in schema for leaf in _leaves(field.name, field.type)]
    if not any(floating for _, floating in leaves):
        return True
    return [path for path, floating in leaves if not floating]


def _leaves(path: str, data_type: pa.DataType) -> list[tuple[str, bool]]:
    """(Parquet column path, whether it is a float) of each leaf under ``path``, as pyarrow names them."""
    if pa.types.is_struct(data_type):
        return [leaf for field in data_type for leaf in _leaves(f"{path}.{field.name}", field.type)]
    if pa.types.is_map(data_type):
        return [
            *_leaves(f"{path}.key_value.key", data_type.key_type),
            *_leaves(f"{path}.key_value.value", data_type.item_type),
        ]
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return _leaves(f"{path}.list.element", data_type.value_type)
    return [(path, pa.types.is_floating(data_type))]
