"""The JDBC/ODBC metadata calls (GetSchemas, GetTables, GetColumns, GetTypeInfo, ...) as result sets.

Arctic tables come from the arctic catalog (Spark's catalog does not know them), everything else from
Spark's catalog, so a BI tool's table browser shows both. Column layouts and values follow the JDBC
``DatabaseMetaData`` result sets as Spark's own Thrift server fills them: an empty ``TABLE_CAT``,
``java.sql.Types`` codes in ``DATA_TYPE``, Spark's type names in ``TYPE_NAME``. Name arguments are
JDBC patterns (``%`` any text, ``_`` one character; an empty or missing pattern matches everything).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import types as st
from sqlglot import exp

from arctic_sql.parser import to_spark_sql
from arctic_sql.thrift.results import ResultColumn

if TYPE_CHECKING:
    from arctic_sql.session import Session

Rows = list[tuple[Any, ...]]

_S, _I, _H, _B = st.StringType(), st.IntegerType(), st.ShortType(), st.BooleanType()


def _columns(spec: str) -> list[ResultColumn]:
    kinds = {"s": _S, "i": _I, "h": _H, "b": _B}
    return [ResultColumn(name, kinds[kind]) for name, kind in (item.split(":") for item in spec.split())]


CATALOG_COLUMNS = _columns("TABLE_CAT:s")
SCHEMA_COLUMNS = _columns("TABLE_SCHEM:s TABLE_CATALOG:s")
TABLE_TYPE_COLUMNS = _columns("TABLE_TYPE:s")
TABLE_COLUMNS = _columns(
    "TABLE_CAT:s TABLE_SCHEM:s TABLE_NAME:s TABLE_TYPE:s REMARKS:s TYPE_CAT:s TYPE_SCHEM:s TYPE_NAME:s "
    "SELF_REFERENCING_COL_NAME:s REF_GENERATION:s"
)
COLUMN_COLUMNS = _columns(
    "TABLE_CAT:s TABLE_SCHEM:s TABLE_NAME:s COLUMN_NAME:s DATA_TYPE:i TYPE_NAME:s COLUMN_SIZE:i "
    "BUFFER_LENGTH:i DECIMAL_DIGITS:i NUM_PREC_RADIX:i NULLABLE:i REMARKS:s COLUMN_DEF:s SQL_DATA_TYPE:i "
    "SQL_DATETIME_SUB:i CHAR_OCTET_LENGTH:i ORDINAL_POSITION:i IS_NULLABLE:s SCOPE_CATALOG:s SCOPE_SCHEMA:s "
    "SCOPE_TABLE:s SOURCE_DATA_TYPE:h IS_AUTO_INCREMENT:s"
)
PRIMARY_KEY_COLUMNS = _columns("TABLE_CAT:s TABLE_SCHEM:s TABLE_NAME:s COLUMN_NAME:s KEY_SEQ:i PK_NAME:s")
FUNCTION_COLUMNS = _columns(
    "FUNCTION_CAT:s FUNCTION_SCHEM:s FUNCTION_NAME:s REMARKS:s FUNCTION_TYPE:i SPECIFIC_NAME:s"
)
TYPE_INFO_COLUMNS = _columns(
    "TYPE_NAME:s DATA_TYPE:i PRECISION:i LITERAL_PREFIX:s LITERAL_SUFFIX:s CREATE_PARAMS:s NULLABLE:h "
    "CASE_SENSITIVE:b SEARCHABLE:h UNSIGNED_ATTRIBUTE:b FIXED_PREC_SCALE:b AUTO_INCREMENT:b "
    "LOCAL_TYPE_NAME:s MINIMUM_SCALE:h MAXIMUM_SCALE:h SQL_DATA_TYPE:i SQL_DATETIME_SUB:i NUM_PREC_RADIX:i"
)
CROSS_REFERENCE_COLUMNS = _columns(
    "PKTABLE_CAT:s PKTABLE_SCHEM:s PKTABLE_NAME:s PKCOLUMN_NAME:s FKTABLE_CAT:s FKTABLE_SCHEM:s "
    "FKTABLE_NAME:s FKCOLUMN_NAME:s KEY_SEQ:i UPDATE_RULE:h DELETE_RULE:h FK_NAME:s PK_NAME:s DEFERRABILITY:i"
)

# java.sql.Types codes
_JDBC_TYPES: list[tuple[type, int]] = [
    (st.NullType, 0),
    (st.BooleanType, 16),
    (st.ByteType, -6),
    (st.ShortType, 5),
    (st.IntegerType, 4),
    (st.LongType, -5),
    (st.FloatType, 6),
    (st.DoubleType, 8),
    (st.DecimalType, 3),
    (st.CharType, 1),
    (st.VarcharType, 12),
    (st.StringType, 12),
    (st.DateType, 91),
    (st.TimestampType, 93),
    (st.TimestampNTZType, 93),
    (st.BinaryType, -2),
    (st.ArrayType, 2003),
    (st.MapType, 2000),
    (st.StructType, 2002),
]
_JDBC_OTHER = 1111


def jdbc_type(data_type: st.DataType) -> int:
    for spark_class, code in _JDBC_TYPES:
        if isinstance(data_type, spark_class):
            return code
    return _JDBC_OTHER


def matcher(pattern: str | None) -> re.Pattern[str]:
    """A JDBC name pattern as a case-insensitive regex; None, '' and '*' match every name."""
    if pattern is None or pattern in ("", "*"):
        return re.compile(".*", re.DOTALL)
    out, escaped = [], False
    for ch in pattern:
        if escaped:
            out.append(re.escape(ch))
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        elif ch == "*":  # Hive-style wildcard, which some clients send
            out.append(".*")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.IGNORECASE | re.DOTALL)


def _match(pattern: re.Pattern[str], name: str) -> bool:
    return pattern.fullmatch(name) is not None


# schemas and tables ------------------------------------------------------------------------------
def databases(session: Session, schema_pattern: str | None) -> list[str]:
    pattern = matcher(schema_pattern)
    names = set(session.catalog.list_databases()) | {d.name for d in session.spark.catalog.listDatabases()}
    return sorted(n for n in names if _match(pattern, n))


def schemas(session: Session, schema_pattern: str | None) -> Rows:
    return [(name, "") for name in databases(session, schema_pattern)]


def _tables(session: Session, database: str) -> Iterator[tuple[str, str, str, Any]]:
    """(name, table type, remarks, handle) of every table in ``database``: arctic's first, then Spark's."""
    arctic_names: set[str] = set()
    if session.catalog.database_exists(database):
        for name in session.catalog.list_tables(database):
            arctic_names.add(name)
            yield name, "TABLE", "", ("arctic", database, name)
        for name in session.catalog.list_views(database):  # views over arctic tables, kept by arctic
            arctic_names.add(name)
            yield name, "VIEW", "", ("arctic view", database, name)
    if session.spark.catalog.databaseExists(database):
        for table in session.spark.catalog.listTables(database):
            if table.isTemporary or table.name in arctic_names:
                continue
            kind = "VIEW" if (table.tableType or "").upper() == "VIEW" else "TABLE"
            yield table.name, kind, table.description or "", ("spark", database, table.name)


def tables(
    session: Session, schema_pattern: str | None, table_pattern: str | None, table_types: list[str] | None
) -> Rows:
    names = matcher(table_pattern)
    wanted = {t.upper() for t in table_types} if table_types else None
    rows = []
    for database in databases(session, schema_pattern):
        for name, kind, remarks, _ in _tables(session, database):
            if _match(names, name) and (wanted is None or kind in wanted):
                rows.append(("", database, name, kind, remarks, None, None, None, None, None))
    return rows


def table_types() -> Rows:
    return [("TABLE",), ("VIEW",)]


# columns -----------------------------------------------------------------------------------------
def _schema_of(session: Session, handle: tuple[str, str, str]) -> st.StructType | None:
    source, database, name = handle
    if source == "arctic":
        return session.table(f"{database}.{name}").spark_schema
    try:
        if source == "arctic view":  # its query, analysed (no job runs)
            return session.sql(f"SELECT * FROM `{database}`.`{name}`").schema
        return session.spark.table(f"`{database}`.`{name}`").schema
    except Exception:  # noqa: BLE001 - a view whose definition no longer resolves: list no columns
        return None


# Spark's DataType.defaultSize, which PySpark's types do not carry
_DEFAULT_SIZES: list[tuple[type, int]] = [
    (st.BooleanType, 1),
    (st.ByteType, 1),
    (st.ShortType, 2),
    (st.IntegerType, 4),
    (st.LongType, 8),
    (st.FloatType, 4),
    (st.DoubleType, 8),
    (st.DateType, 4),
    (st.TimestampType, 8),
    (st.TimestampNTZType, 8),
    (st.NullType, 1),
]


def _column_size(data_type: st.DataType) -> int | None:
    if isinstance(data_type, st.DecimalType):
        return data_type.precision
    if isinstance(data_type, (st.CharType, st.VarcharType)):
        return data_type.length
    for spark_class, size in _DEFAULT_SIZES:
        if isinstance(data_type, spark_class):
            return size
    return None


def _decimal_digits(data_type: st.DataType) -> int | None:
    if isinstance(data_type, st.DecimalType):
        return data_type.scale
    if isinstance(data_type, st.IntegralType):
        return 0
    if isinstance(data_type, st.FloatType):
        return 7
    if isinstance(data_type, st.DoubleType):
        return 15
    if isinstance(data_type, (st.TimestampType, st.TimestampNTZType)):
        return 6
    return None


def type_name(data_type: st.DataType) -> str:
    """Spark's ``DataType.sql``: type names upper-case, struct field names as they are."""
    if isinstance(data_type, st.StructType):
        fields = ", ".join(
            f"{to_spark_sql(exp.to_identifier(f.name))}: {type_name(f.dataType)}" for f in data_type.fields
        )
        return f"STRUCT<{fields}>"
    if isinstance(data_type, st.ArrayType):
        return f"ARRAY<{type_name(data_type.elementType)}>"
    if isinstance(data_type, st.MapType):
        return f"MAP<{type_name(data_type.keyType)}, {type_name(data_type.valueType)}>"
    return data_type.simpleString().upper()


def columns(
    session: Session, schema_pattern: str | None, table_pattern: str | None, column_pattern: str | None
) -> Rows:
    names, wanted_columns = matcher(table_pattern), matcher(column_pattern)
    rows = []
    for database in databases(session, schema_pattern):
        for name, _kind, _remarks, handle in _tables(session, database):
            if not _match(names, name):
                continue
            schema = _schema_of(session, handle)
            for position, field in enumerate(schema.fields if schema else []):
                if not _match(wanted_columns, field.name):
                    continue
                data_type = field.dataType
                numeric = isinstance(data_type, st.NumericType)
                rows.append(
                    (
                        "",
                        database,
                        name,
                        field.name,
                        jdbc_type(data_type),
                        type_name(data_type),
                        _column_size(data_type),
                        None,
                        _decimal_digits(data_type),
                        10 if numeric else None,
                        1 if field.nullable else 0,
                        (field.metadata or {}).get("comment", ""),
                        None,
                        None,
                        None,
                        None,
                        position + 1,
                        "YES" if field.nullable else "NO",
                        None,
                        None,
                        None,
                        None,
                        "NO",
                    )
                )
    return rows


def primary_keys(session: Session, schema_pattern: str | None, table_pattern: str | None) -> Rows:
    """The primary key columns of arctic tables (Spark tables have none)."""
    names = matcher(table_pattern)
    rows = []
    for database in databases(session, schema_pattern):
        if not session.catalog.database_exists(database):
            continue
        for name in session.catalog.list_tables(database):
            if not _match(names, name):
                continue
            table = session.table(f"{database}.{name}")
            for seq, column in enumerate(table.primary_key, start=1):
                rows.append(("", database, name, column, seq, f"{name}_pk"))
    return rows


def functions(session: Session, schema_pattern: str | None, function_pattern: str | None) -> Rows:
    names = matcher(function_pattern)
    rows = []
    for function in session.spark.catalog.listFunctions():
        if _match(names, function.name):
            rows.append(
                (
                    "",
                    function.namespace[0] if function.namespace else None,
                    function.name,
                    function.description or "",
                    1,
                    function.className or function.name,
                )
            )
    return rows


# type info ---------------------------------------------------------------------------------------
_TYPE_INFO: list[tuple[str, st.DataType, int | None]] = [
    ("VOID", st.NullType(), None),
    ("BOOLEAN", st.BooleanType(), None),
    ("STRING", st.StringType(), None),
    ("BINARY", st.BinaryType(), None),
    ("TINYINT", st.ByteType(), 3),
    ("SMALLINT", st.ShortType(), 5),
    ("INT", st.IntegerType(), 10),
    ("BIGINT", st.LongType(), 19),
    ("FLOAT", st.FloatType(), 7),
    ("DOUBLE", st.DoubleType(), 15),
    ("DECIMAL", st.DecimalType(38, 18), 38),
    ("DATE", st.DateType(), None),
    ("TIMESTAMP", st.TimestampType(), None),
    ("TIMESTAMP_NTZ", st.TimestampNTZType(), None),
    ("ARRAY", st.ArrayType(st.StringType()), None),
    ("MAP", st.MapType(st.StringType(), st.StringType()), None),
    ("STRUCT", st.StructType([]), None),
    ("CHAR", st.CharType(1), None),
    ("VARCHAR", st.VarcharType(1), None),
]


def type_info() -> Rows:
    rows = []
    for name, data_type, precision in _TYPE_INFO:
        numeric = isinstance(data_type, st.NumericType)
        textual = isinstance(data_type, (st.StringType, st.CharType, st.VarcharType))
        complex_ = isinstance(data_type, (st.ArrayType, st.MapType, st.StructType))
        rows.append(
            (
                name,
                jdbc_type(data_type),
                precision,
                None,
                None,
                None,
                1,
                textual,
                0 if complex_ else 3,
                not numeric,
                False,
                False,
                None,
                0,
                0,
                None,
                None,
                10 if numeric else None,
            )
        )
    return rows
