"""The table-property registry: every arctic key declared once with its type, default and validation.

Keys follow Amoro's names and defaults (Amoro's table-properties documentation). MaxCompute's names are
accepted as aliases and stored under the canonical key, so one table never holds both spellings.
Keys outside the registry that belong to Iceberg (``write.*``, ``commit.*``, ``format-version`` ...)
or to the user (any other key) pass through unvalidated, as in Iceberg and Delta.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from arctic_sql.errors import InvalidArgumentError

MB = 1024 * 1024


class Kind(Enum):
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"


@dataclass(frozen=True)
class TableProperty:
    key: str
    kind: Kind
    default: object
    doc: str
    check: Callable[[object], str | None] | None = None
    aliases: tuple[str, ...] = ()
    # Fixed at CREATE TABLE: changing it later would misplace existing files.
    immutable: bool = False

    def parse(self, raw: object, typed_key: str | None = None) -> object:
        """The typed value of ``raw``, or InvalidArgumentError naming the key and what is wrong.

        ``typed_key``: the key as the user wrote it (an alias such as ``write.bucket.num``), for
        the message; default the canonical key.
        """
        text = str(raw).strip()
        name = typed_key or self.key
        try:
            if self.kind is Kind.BOOLEAN:
                if text.lower() not in ("true", "false"):
                    raise ValueError
                value: object = text.lower() == "true"
            elif self.kind in (Kind.INT, Kind.LONG):
                value = int(text)
            elif self.kind is Kind.DOUBLE:
                value = float(text)
            else:
                value = text
        except ValueError:
            raise InvalidArgumentError(
                f"Invalid value '{raw}' for table property '{name}': expected {self.kind.value}"
            ) from None
        if self.check is not None and (problem := self.check(value)) is not None:
            raise InvalidArgumentError(f"Invalid value '{raw}' for table property '{name}': {problem}")
        return value


def _positive(value: object) -> str | None:
    return None if isinstance(value, (int, float)) and value > 0 else "must be positive"


def _non_negative(value: object) -> str | None:
    return None if isinstance(value, (int, float)) and value >= 0 else "must be zero or positive"


def _power_of_two(value: object) -> str | None:
    if isinstance(value, int) and value > 0 and value & (value - 1) == 0 and value <= 1024:
        return None
    return "must be a power of two between 1 and 1024"


def _ratio(value: object) -> str | None:
    return None if isinstance(value, float) and 0.0 < value <= 1.0 else "must be in (0, 1]"


def _interval_or_off(value: object) -> str | None:
    return (
        None if isinstance(value, int) and (value == -1 or value > 0) else "must be positive, or -1 for off"
    )


def _one_of(*choices: str) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}"

    return check


def _hive_name(value: object) -> str | None:
    parts = str(value).split(".")
    if value == "" or (len(parts) == 2 and all(p.replace("_", "a").isalnum() for p in parts)):
        return None
    return "must be db.table (letters, digits and underscores)"


_P = TableProperty
PROPERTIES: tuple[TableProperty, ...] = (
    _P(
        "base.file-index.hash-bucket",
        Kind.INT,
        4,
        "hash buckets (tree nodes) of base files",
        _power_of_two,
        aliases=("write.bucket.num",),
    ),
    _P(
        "change.file-index.hash-bucket",
        Kind.INT,
        4,
        "hash buckets (tree nodes) of change files",
        _power_of_two,
    ),
    _P("self-optimizing.enabled", Kind.BOOLEAN, True, "whether the background optimizer works on the table"),
    _P("self-optimizing.group", Kind.STRING, "default", "optimizer group (resource isolation)"),
    _P("self-optimizing.quota", Kind.DOUBLE, 0.5, "share of the group's cores the table may use", _positive),
    _P(
        "self-optimizing.target-size",
        Kind.LONG,
        128 * MB,
        "target size of optimized files in bytes",
        _positive,
    ),
    _P(
        "self-optimizing.fragment-ratio",
        Kind.INT,
        8,
        "files under target-size / ratio are fragments",
        _positive,
    ),
    _P("self-optimizing.min-target-size-ratio", Kind.DOUBLE, 0.75, "undersized segment bound", _ratio),
    _P("self-optimizing.max-file-count", Kind.INT, 10000, "input files per optimizing run", _positive),
    _P(
        "self-optimizing.execute.in-memory-max-bytes",
        Kind.LONG,
        256 * MB,
        "input bytes up to which an optimizing task merges in memory; larger ones run as a spilling Spark query",
        _non_negative,
    ),
    _P(
        "self-optimizing.execute.num-retries",
        Kind.INT,
        5,
        "retries of a failed optimizing task",
        _non_negative,
    ),
    _P(
        "self-optimizing.minor.trigger.file-count",
        Kind.INT,
        12,
        "fragments and change files that trigger minor",
        _positive,
    ),
    _P(
        "self-optimizing.minor.trigger.interval",
        Kind.LONG,
        3_600_000,
        "ms since the last minor that triggers one",
        _interval_or_off,
    ),
    _P(
        "self-optimizing.major.trigger.duplicate-ratio",
        Kind.DOUBLE,
        0.1,
        "share of duplicate or deleted rows in segments that triggers major",
        _ratio,
    ),
    _P(
        "self-optimizing.full.trigger.interval",
        Kind.LONG,
        -1,
        "ms between full optimizings, -1 off",
        _interval_or_off,
    ),
    # MaxCompute-style major metrics (arctic-sql names; see docs/self-optimizing.md).
    _P(
        "self-optimizing.major.trigger.delete-rows",
        Kind.LONG,
        1_000_000,
        "unmerged delete rows in a partition that trigger major",
        _positive,
    ),
    _P(
        "self-optimizing.major.trigger.delete-ratio",
        Kind.DOUBLE,
        0.2,
        "unmerged deletes / (base + upserted rows) that trigger major",
        _ratio,
    ),
    _P(
        "self-optimizing.major.trigger.min-rows",
        Kind.LONG,
        100_000,
        "base + upserted rows below which the delete ratio does not trigger major",
        _non_negative,
    ),
    _P(
        "self-optimizing.major.trigger.small-file-count",
        Kind.INT,
        64,
        "small files per tree node that trigger major",
        _positive,
    ),
    _P(
        "self-optimizing.major.trigger.interval",
        Kind.LONG,
        -1,
        "ms since the last major after which any small file or change data triggers one, -1 off",
        _interval_or_off,
    ),
    _P(
        "self-optimizing.max-input-bytes",
        Kind.LONG,
        512 * MB,
        "input bytes per core of one optimizing run (Amoro's max-input-file-size-per-thread)",
        _positive,
    ),
    _P(
        "snapshot.keep.duration",
        Kind.LONG,
        720,
        "minutes of snapshots expiration keeps",
        _positive,
        aliases=(),
    ),
    _P(
        "acid.data.retain.hours",
        Kind.LONG,
        12,
        "MaxCompute: hours of history kept (sets snapshot.keep.duration)",
        _positive,
    ),
    _P("snapshot.keep.min-count", Kind.INT, 1, "snapshots expiration always keeps", _positive),
    _P("table-expire.enabled", Kind.BOOLEAN, True, "whether the optimizer expires snapshots"),
    _P("change.data.ttl.minutes", Kind.LONG, 10080, "minutes merged change data is kept", _positive),
    _P(
        "consumer.expiration-time",
        Kind.LONG,
        1440,
        "minutes a stream consumer (consumerId) keeps the history it has not read from expiring, after its "
        "last progress",
        _positive,
    ),
    _P("clean-orphan-file.enabled", Kind.BOOLEAN, False, "whether the optimizer removes orphan files"),
    _P(
        "clean-orphan-file.min-existing-time-minutes",
        Kind.LONG,
        2880,
        "minimum age of an orphan to remove",
        _positive,
    ),
    _P(
        "merge-on-read.in-memory-max-bytes",
        Kind.LONG,
        256 * MB,
        "file bytes of one node group up to which merge-on-read merges it in memory; 0: always a Spark plan",
        _non_negative,
    ),
    _P(
        "merge-on-read.driver-max-bytes",
        Kind.LONG,
        32 * MB,
        "file bytes of a whole read up to which an aggregate pushed into the merge (GROUP BY with count, "
        "sum, min, max) is merged and aggregated in the driver, with no Spark task; 0: always in Spark tasks",
        _non_negative,
    ),
    _P(
        "merge-on-read.driver-rows-max-bytes",
        Kind.LONG,
        4 * MB,
        "file bytes of a whole read merged in Python (change data, or files on an object store) up to which its "
        "rows merge in the driver and reach Spark as a local relation, with no Python task; a read with no WHERE "
        "the driver can apply first (none, or only on FLOAT or DOUBLE columns or expressions) takes a quarter "
        "of it, as every merged row then crosses to Spark; 0: always in tasks",
        _non_negative,
    ),
    _P(
        "merge-on-read.broadcast-threshold-rows",
        Kind.LONG,
        2_000_000,
        "change rows up to which merge-on-read broadcasts the changed keys instead of shuffling the base",
        _non_negative,
    ),
    _P("write.distribution-mode", Kind.STRING, "hash", "how writes are distributed", _one_of("none", "hash")),
    _P(
        "write.cluster.columns",
        Kind.STRING,
        "",
        "columns (comma-separated) major and full optimizing order each tree node's rows by; empty: key order "
        "(set by ALTER TABLE ... WRITE ORDERED BY or CLUSTER BY)",
    ),
    _P(
        "write.cluster.mode",
        Kind.STRING,
        "sort",
        "how write.cluster.columns order rows: sort (lexicographic) or z-order (interleaved bits)",
        _one_of("sort", "z-order"),
    ),
    _P(
        "write.cluster.row-group-rows",
        Kind.INT,
        16384,
        "rows per Parquet row group of clustered files: small enough that row-group bounds let readers skip",
        _positive,
    ),
    _P(
        "write.parquet.row-group-rows",
        Kind.INT,
        131072,
        "rows per Parquet row group of the files writes and optimizing make (clustered files take "
        "write.cluster.row-group-rows): a keyed lookup reads only the groups whose key bounds hold its keys",
        _positive,
    ),
    _P(
        "write.schema.auto-merge",
        Kind.BOOLEAN,
        False,
        "whether DataFrame and stream writes add the new columns they carry and widen types, as mergeSchema does",
    ),
    _P(
        "merge-engine",
        Kind.STRING,
        "deduplicate",
        "how a key's rows merge: deduplicate (newest wins), partial-update, first-row or aggregation",
        _one_of("deduplicate", "partial-update", "first-row", "aggregation"),
        immutable=True,
    ),
    _P(
        "sequence.field",
        Kind.STRING,
        "",
        "columns (comma-separated) ordering a key's changes before commit order; a lower one is ignored "
        "(a delete too when its write carries them; SQL DELETE always applies)",
        immutable=True,
    ),
    _P(
        "partial-update.ignore-delete",
        Kind.BOOLEAN,
        False,
        "whether a partial-update table drops deletes instead of removing the key",
        immutable=True,
    ),
    _P(
        "hive.compatible",
        Kind.BOOLEAN,
        False,
        "whether the table keeps a Hive view: merged rows as plain Parquet, one folder per partition, "
        "in a Hive metastore table (CALL system.hive_sync; after full and major optimizing). The metastore: "
        "the session's spark.hadoop.hive.metastore.uris, else embedded Derby; hive.bucket* keys are refused",
    ),
    _P(
        "hive.table",
        Kind.STRING,
        "",
        "the Hive view's name, db.t (default: the table's own name)",
        _hive_name,
    ),
    _P(
        "hive.retention",
        Kind.LONG,
        60,
        "minutes a Hive view folder stays after a sync replaced it (for readers still listing it)",
        _non_negative,
    ),
    _P(
        "hive.sync.interval",
        Kind.LONG,
        -1,
        "minutes between Hive view syncs by the optimizer service when rows changed (-1: off)",
        _interval_or_off,
    ),
    _P(
        "refresh.interval",
        Kind.LONG,
        -1,
        "minutes between refreshes of a materialized view by the optimizer service when a source moved "
        "(-1: off)",
        _interval_or_off,
    ),
)

_BY_KEY: dict[str, TableProperty] = {p.key: p for p in PROPERTIES}
_ALIASES: dict[str, str] = {alias: p.key for p in PROPERTIES for alias in p.aliases}
_FLAGGED_IMMUTABLE = frozenset(p.key for p in PROPERTIES if p.immutable)  # nor unset: the merge engine's
IMMUTABLE_AFTER_CREATE = frozenset(
    {"base.file-index.hash-bucket", "change.file-index.hash-bucket", *_FLAGGED_IMMUTABLE}
)
# Per-column merge-engine keys (``fields.<col>.aggregate-function``, ``fields.<col>.distinct``): fixed
# at CREATE TABLE as the engine is, since change rows already written were meant for their fold.
_FIELD_KEY_SUFFIXES = (".aggregate-function", ".distinct")

# Keys arctic-sql keeps for itself on the Iceberg tables; users can neither set nor unset them.
RESERVED_PREFIX = "arctic."
# Hive bucketing of the Hive view is refused (docs/design.md, "The Hive view").
HIVE_BUCKET_PREFIX = "hive.bucket"


def canonical_key(key: str) -> str:
    return _ALIASES.get(key, key)


def lookup(key: str) -> TableProperty | None:
    return _BY_KEY.get(canonical_key(key))


# Iceberg keys whose value arctic-sql fixes on both stores. pyiceberg's own commit retries replay a
# commit on new metadata without the checks arctic-sql's committer makes (commit.py), so they stay
# off; every store is format version 2 (row lineage by sequence number, which versions rely on).
_RETRY_PREFIX = "commit.retry."
_NUM_RETRIES = "commit.retry.num-retries"
FORMAT_VERSION = "format-version"


def _check_store_key(raw_key: str, key: str, raw_value: str | None) -> None:
    # Setting the value the stores already have is allowed: it repairs a table from before this check.
    if key == _NUM_RETRIES and raw_value is not None and str(raw_value).strip() == "0":
        return
    if key.lower().startswith(_RETRY_PREFIX):
        raise InvalidArgumentError(
            f"Table property '{raw_key}' cannot be set: arctic-sql retries and re-validates commits itself, "
            "with pyiceberg's commit retries off"
        )
    if key.lower() == FORMAT_VERSION and (raw_value is None or str(raw_value).strip() != "2"):
        shown = "unset" if raw_value is None else f"'{raw_value}'"
        raise InvalidArgumentError(
            f"Table property '{raw_key}' cannot be {shown}: arctic tables are Iceberg format version 2"
        )


def check_unset(key: str) -> None:
    """Raise InvalidArgumentError if UNSET TBLPROPERTIES may not remove ``key``."""
    if canonical_key(key) in _FLAGGED_IMMUTABLE or (
        key.startswith("fields.") and key.endswith(_FIELD_KEY_SUFFIXES)
    ):
        raise InvalidArgumentError(f"Table property '{key}' can only be set at CREATE TABLE")
    if key.startswith(RESERVED_PREFIX):
        raise InvalidArgumentError(f"Table property '{key}' is reserved for arctic-sql")
    _check_store_key(key, key, None)


def validate(properties: Mapping[str, str], *, creating: bool) -> dict[str, str]:
    """Validate user-given properties and return them under canonical keys, as strings.

    Raises InvalidArgumentError before anything is written if a value is invalid, a reserved
    key is used, a key arctic-sql fixes is changed (``commit.retry.*``, ``format-version``
    other than 2), or (when altering) an immutable key is changed.
    """
    result: dict[str, str] = {}
    for raw_key, raw_value in properties.items():
        key = canonical_key(raw_key)
        if key.startswith(RESERVED_PREFIX):
            raise InvalidArgumentError(f"Table property '{raw_key}' is reserved for arctic-sql")
        _check_store_key(raw_key, key, raw_value)
        if key.lower() == FORMAT_VERSION:
            continue  # 2, which every store is
        if key.lower().startswith(HIVE_BUCKET_PREFIX):
            raise InvalidArgumentError(
                f"Table property '{raw_key}' is refused: the Hive view is not bucketed, since Hive buckets by "
                "hash(key) mod n and the tree by xxhash64(key) & (2^k - 1), so no Hive bucket spec matches the tree"
            )
        if not creating and (
            key in IMMUTABLE_AFTER_CREATE or (key.startswith("fields.") and key.endswith(_FIELD_KEY_SUFFIXES))
        ):
            raise InvalidArgumentError(f"Table property '{raw_key}' can only be set at CREATE TABLE")
        declared = _BY_KEY.get(key)
        if declared is not None:
            value = declared.parse(raw_value, raw_key)
            raw_value = str(value).lower() if isinstance(value, bool) else str(value)
        result[key] = str(raw_value)
    if "acid.data.retain.hours" in result and "snapshot.keep.duration" not in result:
        result["snapshot.keep.duration"] = str(int(result["acid.data.retain.hours"]) * 60)
    return result


def get(properties: Mapping[str, str], key: str) -> object:
    """The typed value of a registered key, from stored properties or the default."""
    declared = _BY_KEY[key]
    raw = properties.get(key)
    return declared.default if raw is None else declared.parse(raw)
