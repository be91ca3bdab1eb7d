"""The lookup join's operator on ``transformWithStateInPandas``, with flat columns.

Spark's Row-based ``transformWithState`` turns every cell into a Python object through a pyarrow
scalar (about 2 s for 20,000 rows here); the pandas flavour converts whole Arrow batches. So the
facts and the dimension rows travel as flat columns (``_lookup_f<i>``, ``_lookup_d<i>``), each
bucket's rows become one Arrow table again, and from there the bucket works exactly as the Row
processor does (lookup_processor.py), on the same Python values.

pandas is not exact for every type: a nullable 64-bit integer becomes a float, and a float NaN
becomes a null. Such columns travel as strings (Spark's cast to string round-trips them exactly)
and are cast back in Arrow. Types outside :data:`CARRIED` (timestamps, nested types) keep the
Row-based operator.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

from arctic_sql.streaming.lookup_processor import (
    BUCKET,
    DELETE,
    FACT,
    KEY_PREFIX,
    KIND,
    MARKER,
    UPSERT,
    VERSION,
    LookupPlan,
    LookupProcessor,
)

FACT_PREFIX, DIM_PREFIX = "_lookup_f", "_lookup_d"
AS_STRING = (LongType, DoubleType, FloatType)  # inexact in pandas: carried as their string form
CARRIED = (*AS_STRING, IntegerType, ShortType, ByteType, BooleanType, StringType, BinaryType, DateType, DecimalType)


def carried(data_type: DataType) -> bool:
    return isinstance(data_type, CARRIED)


def transport(data_type: DataType) -> DataType:
    """The type a column of ``data_type`` has on its way through pandas."""
    return StringType() if isinstance(data_type, AS_STRING) else data_type


def _to_arrow(series: pd.Series, data_type: DataType) -> pa.Array:
    target = to_arrow_type(data_type)
    if isinstance(data_type, AS_STRING):
        return pa.array(series, type=pa.string(), from_pandas=True).cast(target)
    if isinstance(data_type, IntegerType | ShortType | ByteType):
        return pa.array(series, from_pandas=True).cast(target)  # a float when it has nulls: exact
    return pa.array(series, type=target, from_pandas=True)


def input_names(plan: LookupPlan) -> list[str]:
    """The operator's input columns, in order."""
    return [BUCKET, KIND, VERSION, *[f"{KEY_PREFIX}{i}" for i in range(len(plan.on))],
            *[f"{FACT_PREFIX}{i}" for i in range(len(plan.fact_names))],
            *[f"{DIM_PREFIX}{i}" for i in range(len(plan.dim_columns))]]


class PandasLookupProcessor(LookupProcessor):
    """:class:`LookupProcessor` fed by ``transformWithStateInPandas``."""

    def __init__(self, plan: LookupPlan) -> None:
        super().__init__(plan)
        self.names = input_names(plan)

    def handleInputRows(self, key: tuple, rows: Iterator[pd.DataFrame], timerValues) -> Iterator[pd.DataFrame]:  # noqa: ANN001, N802, N803
        plan = self.plan
        frames = list(rows)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        frame.columns = self.names[-len(frame.columns):]  # Spark's frames name columns by position
        kinds = pa.array(frame[KIND], from_pandas=True).cast(pa.int32())

        def columns(where: int | tuple[int, ...], names: list[str], types: list[DataType]) -> list[list]:
            mask = pc.is_in(kinds, pa.array(where if isinstance(where, tuple) else (where,), pa.int32()))
            index = pc.indices_nonzero(mask).to_numpy()
            part = frame.iloc[index]
            return [_to_arrow(part[n], t).to_pylist() for n, t in zip(names, types, strict=True)]

        key_types = [plan.dim_type[c].dataType for c in plan.on]
        fact_count = len(plan.fact_names)
        fact_columns = columns(FACT, [f"{KEY_PREFIX}{i}" for i in range(len(plan.on))]
                               + [f"{FACT_PREFIX}{i}" for i in range(fact_count)],
                               key_types + [f.dataType for f in plan.fact_type])
        facts = list(zip(zip(*fact_columns[:len(key_types)], strict=True),
                         zip(*fact_columns[len(key_types):], strict=True), strict=True)) if fact_columns[0] else []
        dim_names = list(plan.dim_columns)
        upserts = [plan.entry(dict(zip(dim_names, values, strict=True)))
                   for values in zip(*columns(UPSERT, [f"{DIM_PREFIX}{i}" for i in range(len(dim_names))],
                                              [f.dataType for f in plan.dim_type]), strict=True)]
        at = [dim_names.index(c) for c in plan.primary_key]
        deletes = list(zip(*columns(DELETE, [f"{DIM_PREFIX}{i}" for i in at],
                                    [plan.dim_type[c].dataType for c in plan.primary_key]), strict=True))
        markers = pc.indices_nonzero(pc.equal(kinds, MARKER)).to_numpy()
        marker = int(frame[VERSION].iloc[markers[0]]) if len(markers) else None
        out = list(self._process(int(key[0]), facts, upserts, deletes, marker))
        if out:
            names = plan.output_names
            yield pd.DataFrame({n: pd.Series(v, dtype=object) for n, v in zip(names, zip(*out, strict=True),
                                                                                 strict=True)})
