"""The TCLIService handler: HiveServer2 calls answered by arctic-sql sessions.

Every client session gets its own SparkSession (``spark.newSession()``: own SQL conf, own temp views)
and its own arctic ``Session`` (own current database) on the server's one Spark JVM. Calls that fail
return their response with an error status (``TStatus`` with the one-line message and a SQLSTATE),
the way HiveServer2 reports errors; nothing a client sends can stop the server.

The handler is used with the generated ``TCLIService.Processor`` (from PyHive's bundled
``TCLIService``). It deliberately does not subclass ``Iface``: Iface's stubs return None, which a
client reads as "unknown result" instead of an error status.
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from TCLIService import ttypes as tt

from arctic_sql.thrift import metadata
from arctic_sql.thrift.operations import Operation, OperationError, StatementOperation, describe_error
from arctic_sql.thrift.policy import PolicyViolation
from arctic_sql.thrift.results import empty_log, row_set, table_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arctic_sql.session import Session
    from arctic_sql.thrift.policy import StatementPolicy

log = logging.getLogger(__name__)

MAX_PROTOCOL = tt.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10
SYNC_WAIT_S = None  # a synchronous ExecuteStatement waits for its statement however long it runs
SUCCESS = tt.TStatus(statusCode=tt.TStatusCode.SUCCESS_STATUS)
SESSION_CONF_PREFIXES = ("set:hiveconf:", "set:system:", "set:")
SESSION_CONF_NAMES = ("spark.", "arctic.")


def error_status(error: BaseException) -> tt.TStatus:
    described = describe_error(error)
    return tt.TStatus(
        statusCode=tt.TStatusCode.ERROR_STATUS,
        errorMessage=described.message,
        sqlState=described.sqlstate,
        errorCode=0,
    )


def _rpc(response: type, **defaults: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turn any exception of a call into its response with an error status (and required defaults)."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(self: ArcticThriftService, req: Any, *args: Any) -> Any:
            try:
                return method(self, req, *args)
            except Exception as e:
                if not isinstance(e, OperationError) and not _is_user_error(e):
                    log.warning("%s failed", method.__name__, exc_info=True)
                return response(status=error_status(e), **defaults)

        return call

    return wrap


def _metadata_call(name: str, kind: int, columns: list, rows_of: Callable[[Session, Any], list]) -> Callable:
    """A metadata call: its rows (``rows_of(arctic session, request)``) as a finished operation."""
    response = getattr(tt, f"T{name}Resp")

    def call(self: ArcticThriftService, req: Any) -> Any:
        session = self._session(req.sessionHandle)
        op = self._register(Operation(session, kind, columns, rows_of(session.arctic, req)))
        return response(status=SUCCESS, operationHandle=op.handle)

    call.__name__ = call.__qualname__ = name
    return _rpc(response)(call)


def use_statement(database: str) -> str:
    """``USE `database``` as one statement, whatever the name holds (a backtick is doubled)."""
    return "USE `{}`".format(database.replace("`", "``"))


def _is_user_error(error: BaseException) -> bool:
    from arctic_sql.errors import ArcticError

    return isinstance(error, ArcticError)


class ClientSession:
    """One client connection's session: its arctic session, protocol version and operations."""

    def __init__(self, arctic: Session, user: str, protocol: int) -> None:
        self.arctic = arctic
        self.user = user
        self.protocol = protocol
        self.guid = uuid.uuid4().bytes
        self.handle = tt.TSessionHandle(
            sessionId=tt.THandleIdentifier(guid=self.guid, secret=uuid.uuid4().bytes)
        )
        self.operations: dict[bytes, Operation] = {}


class ArcticThriftService:
    """TCLIService calls over arctic sessions; ``new_session(database)`` builds each client's session.

    ``policy`` checks every statement and session setting a client sends before it runs (None: no
    checks, for in-process use by trusted code).
    """

    def __init__(
        self,
        spark: SparkSession,
        new_session: Callable[[SparkSession], Session],
        server_name: str = "arctic-sql",
        policy: StatementPolicy | None = None,
    ) -> None:
        self.spark = spark
        self._new_session = new_session
        self._server_name = server_name
        self._policy = policy
        self._sessions: dict[bytes, ClientSession] = {}
        self._operations: dict[bytes, Operation] = {}
        self._lock = threading.Lock()

    # lookups ---------------------------------------------------------------------------------
    def _session(self, handle: tt.TSessionHandle | None) -> ClientSession:
        session = self._sessions.get(handle.sessionId.guid) if handle and handle.sessionId else None
        if session is None:
            raise OperationError("Invalid SessionHandle: the session is closed or unknown", "08003")
        return session

    def _operation(self, handle: tt.TOperationHandle | None) -> Operation:
        op = self._operations.get(handle.operationId.guid) if handle and handle.operationId else None
        if op is None:
            raise OperationError("Invalid OperationHandle: the operation is closed or unknown", "HY010")
        return op

    def _register(self, op: Operation) -> Operation:
        with self._lock:
            self._operations[op.guid] = op
            op.session.operations[op.guid] = op
        return op

    def session_count(self) -> int:
        return len(self._sessions)

    # sessions --------------------------------------------------------------------------------
    @_rpc(tt.TOpenSessionResp, serverProtocolVersion=MAX_PROTOCOL)
    def OpenSession(self, req: tt.TOpenSessionReq, user: str | None = None) -> tt.TOpenSessionResp:
        protocol = min(req.client_protocol, MAX_PROTOCOL)
        conf = dict(req.configuration or {})
        database = conf.pop("use:database", None)
        settings = {}
        for key, value in conf.items():
            # `set:hiveconf:k` (JDBC) or a bare `k` (PyHive's and dbt-spark's `server_side_parameters`),
            # as Spark's own server applies both; names other than Spark's and arctic's are Hive's.
            prefix = next((p for p in SESSION_CONF_PREFIXES if key.startswith(p)), "")
            name = key[len(prefix) :]
            if name.startswith(SESSION_CONF_NAMES):
                settings[name] = value
        self._check_settings(settings)
        arctic = self._new_session(self.spark.newSession())
        for name, value in {**(self._policy.session_conf() if self._policy else {}), **settings}.items():
            arctic.spark.conf.set(name, value)
        if database and database.lower() != "default":
            arctic.sql(use_statement(database))
        # The authenticated (SASL) name, not the one the client writes into its request.
        session = ClientSession(arctic, user or req.username or "anonymous", protocol)
        with self._lock:
            self._sessions[session.guid] = session
        log.info("session opened for %s (protocol V%d)", session.user, protocol + 1)
        return tt.TOpenSessionResp(
            status=SUCCESS, serverProtocolVersion=protocol, sessionHandle=session.handle, configuration={}
        )

    def _check_settings(self, settings: dict[str, str]) -> None:
        if self._policy is not None:
            for name in settings:
                self._policy.check_setting(name)

    @_rpc(tt.TCloseSessionResp)
    def CloseSession(self, req: tt.TCloseSessionReq) -> tt.TCloseSessionResp:
        session = self._session(req.sessionHandle)
        self.close_session(session)
        return tt.TCloseSessionResp(status=SUCCESS)

    def close_session(self, session: ClientSession) -> None:
        """Close a session and its operations (also when its connection drops)."""
        with self._lock:
            self._sessions.pop(session.guid, None)
            operations = list(session.operations.values())
            for op in operations:
                self._operations.pop(op.guid, None)
            session.operations.clear()
        for op in operations:
            op.close()
        for view in session.arctic.spark.catalog.listTables():
            if view.isTemporary:
                session.arctic.spark.catalog.dropTempView(view.name)

    @_rpc(tt.TGetInfoResp, infoValue=tt.TGetInfoValue(stringValue=""))
    def GetInfo(self, req: tt.TGetInfoReq) -> tt.TGetInfoResp:
        self._session(req.sessionHandle)
        kind = req.infoType
        values = {
            tt.TGetInfoType.CLI_SERVER_NAME: tt.TGetInfoValue(stringValue=self._server_name),
            tt.TGetInfoType.CLI_DBMS_NAME: tt.TGetInfoValue(stringValue="Spark SQL"),
            tt.TGetInfoType.CLI_DBMS_VER: tt.TGetInfoValue(stringValue=self.spark.version),
            tt.TGetInfoType.CLI_MAX_COLUMN_NAME_LEN: tt.TGetInfoValue(lenValue=128),
            tt.TGetInfoType.CLI_MAX_SCHEMA_NAME_LEN: tt.TGetInfoValue(lenValue=128),
            tt.TGetInfoType.CLI_MAX_TABLE_NAME_LEN: tt.TGetInfoValue(lenValue=128),
            tt.TGetInfoType.CLI_TXN_CAPABLE: tt.TGetInfoValue(smallIntValue=0),
        }
        if kind not in values:
            raise OperationError(
                f"Unrecognized GetInfoType value: {tt.TGetInfoType._VALUES_TO_NAMES.get(kind, kind)}"
            )
        return tt.TGetInfoResp(status=SUCCESS, infoValue=values[kind])

    # statements ------------------------------------------------------------------------------
    @_rpc(tt.TExecuteStatementResp)
    def ExecuteStatement(self, req: tt.TExecuteStatementReq) -> tt.TExecuteStatementResp:
        session = self._session(req.sessionHandle)
        overlay = {k: v for k, v in (req.confOverlay or {}).items() if k.startswith("spark.")}
        self._check_settings(overlay)
        if self._policy is not None:
            try:
                self._policy.check_sql(req.statement)
            except PolicyViolation as e:
                log.warning("statement refused for %s: %s", session.user, e.message)
                raise
        for key, value in overlay.items():
            session.arctic.spark.conf.set(key, value)
        op = StatementOperation(session, req.statement, timeout_s=int(req.queryTimeout or 0))
        self._register(op)
        op.start()
        if not req.runAsync:
            op.wait(SYNC_WAIT_S)
            if op.error is not None:
                self._forget(op)
                raise op.error
        return tt.TExecuteStatementResp(status=SUCCESS, operationHandle=op.handle)

    def _forget(self, op: Operation) -> None:
        with self._lock:
            self._operations.pop(op.guid, None)
            op.session.operations.pop(op.guid, None)
        op.close()

    @_rpc(tt.TGetOperationStatusResp)
    def GetOperationStatus(self, req: tt.TGetOperationStatusReq) -> tt.TGetOperationStatusResp:
        op = self._operation(req.operationHandle)
        op.wait(0.5)  # answer promptly, but spare pollers a busy loop while short statements finish
        resp = tt.TGetOperationStatusResp(
            status=SUCCESS,
            operationState=op.state,
            operationStarted=op.started_ms,
            operationCompleted=op.completed_ms if op.state != tt.TOperationState.RUNNING_STATE else None,
            hasResultSet=True,
        )
        if op.error is not None:
            resp.errorMessage, resp.sqlState, resp.errorCode = op.error.message, op.error.sqlstate, 0
        return resp

    @_rpc(tt.TCancelOperationResp)
    def CancelOperation(self, req: tt.TCancelOperationReq) -> tt.TCancelOperationResp:
        self._operation(req.operationHandle).cancel()
        return tt.TCancelOperationResp(status=SUCCESS)

    @_rpc(tt.TCloseOperationResp)
    def CloseOperation(self, req: tt.TCloseOperationReq) -> tt.TCloseOperationResp:
        self._forget(self._operation(req.operationHandle))
        return tt.TCloseOperationResp(status=SUCCESS)

    @_rpc(tt.TGetResultSetMetadataResp)
    def GetResultSetMetadata(self, req: tt.TGetResultSetMetadataReq) -> tt.TGetResultSetMetadataResp:
        op = self._operation(req.operationHandle)
        if op.error is not None:
            raise op.error
        if op.state != tt.TOperationState.FINISHED_STATE:
            raise OperationError("The operation has no result set yet; poll GetOperationStatus first")
        return tt.TGetResultSetMetadataResp(status=SUCCESS, schema=table_schema(op.columns))

    @_rpc(tt.TFetchResultsResp)
    def FetchResults(self, req: tt.TFetchResultsReq) -> tt.TFetchResultsResp:
        op = self._operation(req.operationHandle)
        protocol = op.session.protocol
        if req.fetchType == 1:  # the operation log: arctic-sql keeps none
            return tt.TFetchResultsResp(status=SUCCESS, hasMoreRows=False, results=empty_log(protocol))
        from_start = req.orientation == tt.TFetchOrientation.FETCH_FIRST
        if req.orientation not in (tt.TFetchOrientation.FETCH_NEXT, tt.TFetchOrientation.FETCH_FIRST):
            name = tt.TFetchOrientation._VALUES_TO_NAMES.get(req.orientation, req.orientation)
            raise OperationError(f"Fetch orientation {name} is not supported; use FETCH_NEXT or FETCH_FIRST")
        offset, rows = op.fetch(req.maxRows or 1000, from_start=from_start)
        return tt.TFetchResultsResp(
            status=SUCCESS, hasMoreRows=bool(rows), results=row_set(rows, op.columns, offset, protocol)
        )

    # metadata --------------------------------------------------------------------------------
    # One result set each, computed when the call arrives (see metadata.py).
    GetCatalogs = _metadata_call(  # like Spark's Thrift server: one unnamed catalog, so no rows
        "GetCatalogs", tt.TOperationType.GET_CATALOGS, metadata.CATALOG_COLUMNS, lambda s, r: []
    )
    GetSchemas = _metadata_call(
        "GetSchemas",
        tt.TOperationType.GET_SCHEMAS,
        metadata.SCHEMA_COLUMNS,
        lambda s, r: metadata.schemas(s, r.schemaName),
    )
    GetTables = _metadata_call(
        "GetTables",
        tt.TOperationType.GET_TABLES,
        metadata.TABLE_COLUMNS,
        lambda s, r: metadata.tables(s, r.schemaName, r.tableName, r.tableTypes),
    )
    GetTableTypes = _metadata_call(
        "GetTableTypes",
        tt.TOperationType.GET_TABLE_TYPES,
        metadata.TABLE_TYPE_COLUMNS,
        lambda s, r: metadata.table_types(),
    )
    GetColumns = _metadata_call(
        "GetColumns",
        tt.TOperationType.GET_COLUMNS,
        metadata.COLUMN_COLUMNS,
        lambda s, r: metadata.columns(s, r.schemaName, r.tableName, r.columnName),
    )
    GetTypeInfo = _metadata_call(
        "GetTypeInfo",
        tt.TOperationType.GET_TYPE_INFO,
        metadata.TYPE_INFO_COLUMNS,
        lambda s, r: metadata.type_info(),
    )
    GetFunctions = _metadata_call(
        "GetFunctions",
        tt.TOperationType.GET_FUNCTIONS,
        metadata.FUNCTION_COLUMNS,
        lambda s, r: metadata.functions(s, r.schemaName, r.functionName),
    )
    # HiveServer2 files these two under GET_FUNCTIONS too; the protocol has no type of their own.
    GetPrimaryKeys = _metadata_call(
        "GetPrimaryKeys",
        tt.TOperationType.GET_FUNCTIONS,
        metadata.PRIMARY_KEY_COLUMNS,
        lambda s, r: metadata.primary_keys(s, r.schemaName, r.tableName),
    )
    GetCrossReference = _metadata_call(  # arctic tables declare no foreign keys
        "GetCrossReference",
        tt.TOperationType.GET_FUNCTIONS,
        metadata.CROSS_REFERENCE_COLUMNS,
        lambda s, r: [],
    )

    # not offered -----------------------------------------------------------------------------
    def _unsupported(self, name: str) -> OperationError:
        return OperationError(f"{name} is not supported by the arctic-sql Thrift server", "0A000")

    @_rpc(tt.TGetDelegationTokenResp)
    def GetDelegationToken(self, req: Any) -> Any:
        raise self._unsupported("GetDelegationToken")

    @_rpc(tt.TCancelDelegationTokenResp)
    def CancelDelegationToken(self, req: Any) -> Any:
        raise self._unsupported("CancelDelegationToken")

    @_rpc(tt.TRenewDelegationTokenResp)
    def RenewDelegationToken(self, req: Any) -> Any:
        raise self._unsupported("RenewDelegationToken")

    @_rpc(tt.TGetLogResp)
    def GetLog(self, req: Any) -> Any:
        raise self._unsupported("GetLog")
