"""Operations: one statement or metadata call of a client session, with its state and its rows.

A statement runs on its own thread through the client's arctic ``Session`` under a Spark job group,
so CancelOperation can stop its Spark jobs. Its rows are never collected whole: :class:`PartitionRows`
runs one Spark job per result partition (a few at a time), on the thread that asks for rows. The
statement's thread pulls the first row (so a long aggregation runs, and can be cancelled, while the
operation is RUNNING); FetchResults pulls the next ``maxRows`` rows.

``DataFrame.toLocalIterator`` would do the same, but it runs its jobs on a JVM thread of its own that
does not carry the job group (checked with pyspark 4.3): a cancel would not reach them.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from TCLIService import ttypes as tt

from arctic_sql.errors import ArcticError
from arctic_sql.thrift.results import ResultColumn, columns_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.thrift.service import ClientSession

log = logging.getLogger(__name__)

State = tt.TOperationState
TERMINAL = {
    State.FINISHED_STATE,
    State.CANCELED_STATE,
    State.CLOSED_STATE,
    State.ERROR_STATE,
    State.TIMEDOUT_STATE,
}

# SQLSTATEs by error class, as JDBC tools read them
_SQLSTATES = {
    "SqlParseError": "42601",
    "NoSuchTableError": "42P01",
    "NoSuchDatabaseError": "3F000",
    "NoSuchColumnError": "42703",
    "TableAlreadyExistsError": "42P07",
    "PrimaryKeyViolationError": "23505",
    "CommitConflictError": "40001",
}
GENERIC_SQLSTATE = "42000"


class OperationError(Exception):
    """A failed operation, as the client sees it: one line and a SQLSTATE."""

    def __init__(self, message: str, sqlstate: str = GENERIC_SQLSTATE) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate


def describe_error(error: BaseException) -> OperationError:
    """The one-line message and SQLSTATE of anything a statement raised."""
    if isinstance(error, OperationError):
        return error
    if not isinstance(error, ArcticError):
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        from arctic_sql.spark import translate

        if isinstance(error, (PySparkException, Py4JError)):
            error = translate(error)
        else:
            return OperationError(f"{type(error).__name__}: {' '.join(str(error).split())}")
    return OperationError(str(error), _SQLSTATES.get(type(error).__name__, GENERIC_SQLSTATE))


def _now_ms() -> int:
    return int(time.time() * 1000)


class Operation:
    """An operation whose rows are known when it is created (the metadata calls)."""

    def __init__(
        self,
        session: ClientSession,
        kind: int,
        columns: Sequence[ResultColumn] = (),
        rows: Sequence[tuple[Any, ...]] = (),
    ) -> None:
        self.session = session
        self.guid = uuid.uuid4().bytes
        self.handle = tt.TOperationHandle(
            operationId=tt.THandleIdentifier(guid=self.guid, secret=uuid.uuid4().bytes),
            operationType=kind,
            hasResultSet=True,
        )
        self.columns: list[ResultColumn] = list(columns)
        self.state = State.FINISHED_STATE
        self.error: OperationError | None = None
        self.started_ms = self.completed_ms = _now_ms()
        self._rows: Iterator[tuple[Any, ...]] = iter(rows)
        self._all_rows = list(rows)
        self._offset = 0
        self._fetch_lock = threading.Lock()

    def wait(self, timeout: float | None = None) -> None:
        """Return when the operation has left RUNNING (immediately for metadata operations)."""

    def cancel(self) -> None:
        if self.state not in TERMINAL:
            self.state = State.CANCELED_STATE

    def close(self) -> None:
        self.state = State.CLOSED_STATE
        self._rows = iter(())

    def fetch(self, max_rows: int, from_start: bool = False) -> tuple[int, list[tuple[Any, ...]]]:
        """(offset of the first row, up to ``max_rows`` next rows); an error if the operation failed."""
        if self.error is not None:
            raise self.error
        if self.state == State.CANCELED_STATE:
            raise OperationError("The operation was cancelled")
        if self.state == State.CLOSED_STATE:
            raise OperationError("The operation is closed")
        if self.state != State.FINISHED_STATE:
            raise OperationError("The operation has not finished yet; poll GetOperationStatus first")
        with self._fetch_lock:
            if from_start:
                self._restart()
            offset = self._offset
            rows = self._next_rows(max(1, max_rows))
            self._offset += len(rows)
            return offset, rows

    def _restart(self) -> None:
        self._rows = iter(self._all_rows)
        self._offset = 0

    def _next_rows(self, n: int) -> list[tuple[Any, ...]]:
        return list(itertools.islice(self._rows, n))


class StatementOperation(Operation):
    """A SQL statement running through the client's arctic session on a thread of its own."""

    def __init__(self, session: ClientSession, statement: str, timeout_s: int = 0) -> None:
        super().__init__(session, tt.TOperationType.EXECUTE_STATEMENT)
        self.statement = statement
        self.state = State.INITIALIZED_STATE
        self.job_group = f"arctic-thrift-{uuid.UUID(bytes=self.guid)}"
        self._df: DataFrame | None = None
        self._iterator: Iterator[Any] | None = None
        self._first: list[tuple[Any, ...]] = []
        self._done = threading.Event()
        self._lock = threading.Lock()  # state changes between the runner, cancel and close
        self._timeout_s = timeout_s
        self._thread = threading.Thread(
            target=self._run, name=f"arctic-op-{self.job_group[-8:]}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        if self._timeout_s > 0:
            timer = threading.Timer(self._timeout_s, self._time_out)
            timer.daemon = True
            timer.start()

    def wait(self, timeout: float | None = None) -> None:
        self._done.wait(timeout)

    # running ---------------------------------------------------------------------------------
    def _run(self) -> None:
        spark = self.session.arctic.spark
        sc = spark.sparkContext
        try:
            with self._lock:
                if self.state in TERMINAL:
                    return
                self.state = State.RUNNING_STATE
            sc.setJobGroup(self.job_group, self.statement[:200], interruptOnCancel=True)
            df = self.session.arctic.sql(self.statement)
            columns = columns_of(df.schema)
            iterator, first = self._open(df) if columns else (None, [])
            with self._lock:
                if self.state in TERMINAL:  # cancelled, timed out or closed meanwhile
                    _close_iterator(iterator)
                    return
                self._df, self.columns, self._iterator, self._first = df, columns, iterator, first
                self.state = State.FINISHED_STATE
        except BaseException as e:  # noqa: BLE001 - every failure becomes the operation's error
            with self._lock:
                if self.state not in TERMINAL:
                    self.error = describe_error(e)
                    self.state = State.ERROR_STATE
                    log.info("statement failed: %s", self.error.message)
        finally:
            self.completed_ms = _now_ms()
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # None unsets it; this thread ends
            self._done.set()

    def _open(self, df: DataFrame) -> tuple[Iterator[Any], list[tuple[Any, ...]]]:
        """An iterator over ``df``'s rows, and its first row (running the query's first jobs)."""
        iterator = PartitionRows(df)
        first = [tuple(row) for row in itertools.islice(iterator, 1)]
        return iterator, first

    # control ---------------------------------------------------------------------------------
    def cancel(self) -> None:
        self._stop(State.CANCELED_STATE)

    def _time_out(self) -> None:
        if self._stop(State.TIMEDOUT_STATE):
            self.error = OperationError(f"Statement timed out after {self._timeout_s} s")

    def _stop(self, state: int) -> bool:
        with self._lock:
            if self.state in TERMINAL:
                return False
            self.state = state
        self._cancel_jobs()
        return True

    def _cancel_jobs(self) -> None:
        # "AndFutureJobs": a statement cancelled between two Spark jobs must not start the next one
        # (say, the write after a DML's key check), whatever thread would submit it.
        sc = self.session.arctic.spark.sparkContext
        sc._jsc.sc().cancelJobGroupAndFutureJobs(self.job_group, "cancelled by the client")

    def close(self) -> None:
        with self._lock:
            running = self.state not in TERMINAL
            self.state = State.CLOSED_STATE
            iterator, self._iterator, self._df = self._iterator, None, None
        if running:
            self._cancel_jobs()
        with self._fetch_lock:
            _close_iterator(iterator)

    # rows ------------------------------------------------------------------------------------
    def _restart(self) -> None:
        if self._offset == 0:
            return
        assert self._df is not None
        _close_iterator(self._iterator)
        self._iterator, self._first = self._open(self._df)
        self._offset = 0

    def _next_rows(self, n: int) -> list[tuple[Any, ...]]:
        rows, self._first = self._first[:n], self._first[n:]
        if self._iterator is not None and len(rows) < n:
            sc = self.session.arctic.spark.sparkContext
            sc.setJobGroup(self.job_group, self.statement[:200], interruptOnCancel=True)
            try:
                rows += [tuple(row) for row in itertools.islice(self._iterator, n - len(rows))]
            except Exception as e:  # a task failed while computing later partitions
                raise describe_error(e) from e
            finally:
                sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # None unsets it: the thread serves others
        return rows


def _close_iterator(iterator: Iterator[Any] | None) -> None:
    if isinstance(iterator, PartitionRows):
        iterator.close()


class PartitionRows:
    """The rows of a DataFrame, fetched partition by partition with Spark jobs on the calling thread.

    One job loads 1, then 2, then up to ``MAX_PARTITIONS_PER_JOB`` partitions (as ``take`` scales
    up): small results cost few jobs, and memory stays bounded by a few partitions.
    """

    MAX_PARTITIONS_PER_JOB = 4

    def __init__(self, df: DataFrame) -> None:
        self._sc = df.sparkSession.sparkContext
        self._jrdd = df._jdf.javaToPython()  # plans the query; with AQE this runs its shuffle stages
        self._partitions = self._jrdd.getNumPartitions()
        self._next_partition = 0
        self._per_job = 1
        self._buffer: Iterator[Any] = iter(())

    def __iter__(self) -> PartitionRows:
        return self

    def __next__(self) -> Any:
        while True:
            row = next(self._buffer, _END)
            if row is not _END:
                return row
            if self._next_partition >= self._partitions:
                raise StopIteration
            self._buffer = iter(self._load())

    def _load(self) -> list[Any]:
        from pyspark.serializers import BatchedSerializer, CPickleSerializer
        from pyspark.util import _load_from_socket

        end = min(self._partitions, self._next_partition + self._per_job)
        partitions = list(range(self._next_partition, end))
        self._next_partition = end
        self._per_job = min(self._per_job * 2, self.MAX_PARTITIONS_PER_JOB)
        jvm: Any = self._sc._jvm
        sock_info = jvm.PythonRDD.runJob(self._sc._jsc.sc(), self._jrdd, partitions)
        with _load_from_socket(sock_info, BatchedSerializer(CPickleSerializer())) as stream:
            return list(stream)

    def close(self) -> None:
        self._next_partition = self._partitions
        self._buffer = iter(())


_END = object()
