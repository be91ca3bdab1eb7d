"""The embedded Spark session and the settings every arctic session needs."""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import TYPE_CHECKING

from arctic_sql.errors import (
    ArcticError,
    ExecutionError,
    InvalidArgumentError,
    NoSuchTableError,
    SqlParseError,
    one_line,  # lives in errors so the table layer (the Hive metastore) shares it
)
from arctic_sql.options import is_local_master, spark_master

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Runtime settings arctic-sql relies on; applied to any session, including one the user passes in.
RUNTIME_CONF = {
    # Files carry Iceberg field ids; reading by id keeps renamed and dropped columns right.
    "spark.sql.parquet.fieldId.read.enabled": "true",
    "spark.sql.parquet.fieldId.write.enabled": "true",
    # Iceberg wants TIMESTAMP_MICROS, not Spark's INT96 default.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # Reads pass explicit file lists; listing them must not start a Spark job per query.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
    # format("arctic") prunes files by the filters Spark pushes to it; without this flag Spark
    # refuses a Python reader that takes filters.
    "spark.sql.python.filterPushdown.enabled": "true",
}

# Spark's own tables (not arctic's) live in this folder of the warehouse; the arctic catalog puts
# databases in the warehouse's other folders ({warehouse}/{db}/{table}).
SPARK_WAREHOUSE = "spark-warehouse"


def local_session(
    warehouse: str, conf: dict[str, str] | None = None, master: str | None = None
) -> SparkSession:
    """A SparkSession started here (the driver in this process), with the warehouse's spark-warehouse
    for plain tables. ``master`` defaults to ``$ARCTIC_SPARK_MASTER``, else ``local[*]``; a
    ``spark.master`` in ``conf`` wins over both. A local session binds to loopback only."""
    conf = {**RUNTIME_CONF, **(conf or {})}
    master = conf.pop("spark.master", None) or spark_master(master)
    if is_local_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers (for the bucket partition transform) must run this interpreter, not whatever
    # `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName("arctic-sql")
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", os.environ.get("ARCTIC_DRIVER_MEMORY", "4g"))
    )
    for key, value in {**driver_address(master), **spark_warehouse(warehouse), **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("ARCTIC_SPARK_LOG_LEVEL", "ERROR"))
    return spark


def spark_warehouse(warehouse: str) -> dict[str, str]:
    """Where Spark keeps its own (non-arctic) tables: the warehouse's spark-warehouse folder.

    A warehouse on an object store or HDFS gets Spark's defaults instead (``spark-warehouse`` in the
    working folder, made only when a plain Spark table is created): Spark would reach ``s3://...``
    through its Hadoop file system, which needs the hadoop-aws connector arctic tables do without.
    Set ``spark.sql.warehouse.dir`` (e.g. to an ``s3a://`` URI with that connector) to choose."""
    if "://" in warehouse and not warehouse.startswith("file:"):
        return {}
    root = os.path.abspath(warehouse[len("file://") :] if warehouse.startswith("file://") else warehouse)
    return {
        "spark.sql.warehouse.dir": os.path.join(root, SPARK_WAREHOUSE),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
    }


def driver_address(master: str) -> dict[str, str]:
    """Where the driver listens. On this machine only: loopback, so nothing is reachable from
    outside. On a cluster the executors must reach the driver, so Spark picks the address unless
    SPARK_LOCAL_IP names one (127.0.0.1 for a cluster on this machine)."""
    address = "127.0.0.1" if is_local_master(master) else os.environ.get("SPARK_LOCAL_IP")
    if address is None:
        return {}
    return {"spark.driver.host": address, "spark.driver.bindAddress": address}


def configure(spark: SparkSession) -> None:
    for key, value in RUNTIME_CONF.items():
        spark.conf.set(key, value)
    # PySpark logs every failed query with its full JVM stack before raising; arctic-sql reports the
    # one-line message itself.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)


# The last line of a worker's traceback when arctic-sql code raised there (the merge of a node).
_WORKER_ERROR = re.compile(r"^arctic_sql\.errors\.(\w+): (.+)$", re.MULTILINE)
# Spark's own Parquet reader on a file that is gone.
_MISSING_FILE = re.compile(r"FAILED_READ_FILE\.FILE_NOT_EXIST\][^\n]*?reading file (\S+?)\.?\s")


def _from_worker(text: str) -> ArcticError | None:
    """The arctic-sql error a Spark task failed with, found in the text Spark passes on."""
    from arctic_sql import errors

    found = _WORKER_ERROR.findall(text)
    if found and (raised := errors.by_name(*found[-1])) is not None:
        return raised
    missing = _MISSING_FILE.search(text)
    if missing:
        return errors.VersionNotFoundError(
            f"The version read is no longer readable: file {missing.group(1)} was removed by snapshot expiration"
        )
    return None


def translate(error: BaseException) -> ArcticError:
    """An arctic-sql error for an exception Spark raised."""
    from pyspark.errors import AnalysisException, ParseException, PySparkException

    if isinstance(error, ArcticError):
        return error
    raised = _from_worker(str(error))
    if raised is not None:
        return raised
    message = one_line(error)
    if isinstance(error, ParseException):
        return SqlParseError(message)
    if isinstance(error, AnalysisException):
        condition = error.getCondition() if hasattr(error, "getCondition") else None
        if condition in ("TABLE_OR_VIEW_NOT_FOUND",):
            return NoSuchTableError(message)
        return InvalidArgumentError(message)
    if isinstance(error, PySparkException):
        return ExecutionError(message)
    return ExecutionError(f"{type(error).__name__}: {message}")


def error_message(error: BaseException) -> str:
    """The one line a front end shows after ``Error: `` for any error (Spark's translated first)."""
    if not isinstance(error, ArcticError) and "pyspark" in sys.modules:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        if isinstance(error, (PySparkException, Py4JError)):
            error = translate(error)
    if isinstance(error, ArcticError):
        return str(error) or type(error).__name__
    first = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
