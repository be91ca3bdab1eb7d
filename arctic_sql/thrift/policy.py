"""What a Thrift client may do: every statement is checked on its parsed form before it runs.

A client of ``arctic-sql thriftserver`` gets SQL on the warehouse, not the machine. By default:

- **paths** stay in the warehouse: ``LOCATION``, ``OPTIONS (path ...)`` and path-like table
  properties (``...path``, ``...location``) must resolve (``..`` and symlinks followed) to a folder
  below it, and one that holds no files yet unless a view only reads it;
  ``LOAD DATA``, ``INSERT OVERWRITE [LOCAL] DIRECTORY``, queries on files (``parquet.`/p```) and
  data sources other than file formats and arctic (``USING jdbc``) are refused.
  ``--allow-external-locations`` relaxes this.
- **code** stays out of the server: ``reflect``/``java_method``/``try_reflect``, ``ADD JAR/FILE/ARCHIVE``
  and functions made from a class or a jar are refused (``--allow-unsafe-functions``).
- **settings**: ``SET key=value`` (and session settings sent with OpenSession or a statement) only for
  the keys of :data:`SETTABLE`; reading a setting, ``SET -v`` and ``RESET key`` are fine, a bare
  ``RESET`` (or one of the settings below) is not (``--allow-set-any``).

Every client session also runs with ``spark.sql.runSQLOnFiles`` off (unless paths may leave the
warehouse) and ``spark.sql.variable.substitute`` off (``${env:X}`` would read the server's
environment; unless unsafe functions are allowed).

Dynamic SQL the server cannot check (``EXECUTE IMMEDIATE``, ``IDENTIFIER(<expression>)``) is refused
unless ``--trusted``, which relaxes all three rules; so is a statement arctic-sql's parser cannot
read (Spark would run it unchecked). ``SELECT TRANSFORM ... USING`` runs a program: refused as unsafe.
Each refusal is one line naming the rule and the option.

>>> policy = StatementPolicy(warehouse="/data/warehouse")
>>> try:
...     policy.check_sql("SELECT reflect('java.lang.Runtime', 'getRuntime')")
... except PolicyViolation as e:
...     print(e.message)
reflect() calls Java code on the server; the server refuses it (--allow-unsafe-functions relaxes this)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from arctic_sql.errors import SqlParseError
from arctic_sql.parser import Arctic, ParsedStatement, parse
from arctic_sql.spark import SPARK_WAREHOUSE
from arctic_sql.thrift.operations import OperationError

UNSAFE_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})
FILE_FORMATS = frozenset({"parquet", "orc", "json", "csv", "text", "avro", "binaryfile", "xml"})
PROVIDERS = FILE_FORMATS | {"arctic", "delta", "iceberg"}
SETTABLE = frozenset(
    {
        "spark.sql.session.timeZone",
        "spark.sql.shuffle.partitions",
        "spark.sql.ansi.enabled",
        "spark.sql.sources.partitionOverwriteMode",  # dbt-spark's insert_overwrite strategy sets it
        "spark.sql.adaptive.enabled",
        "spark.sql.adaptive.coalescePartitions.enabled",
        "spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.caseSensitive",
        "spark.sql.crossJoin.enabled",
        "spark.sql.legacy.timeParserPolicy",
        "spark.sql.storeAssignmentPolicy",
        "spark.sql.files.maxRecordsPerFile",
        "spark.sql.parquet.compression.codec",
        "spark.sql.datetime.java8API.enabled",
        "spark.sql.mapKeyDedupPolicy",
        "spark.sql.timestampType",
        "arctic.branch",  # write-audit-publish: the branch this client's statements read and write
    }
)
# Spark's defaults that reach the file system or the server's environment: off in every client session.
NO_FILE_QUERIES = {"spark.sql.runSQLOnFiles": "false"}  # SELECT * FROM text.`/etc/passwd`
NO_SUBSTITUTION = {"spark.sql.variable.substitute": "false"}  # SELECT '${env:AWS_SECRET_ACCESS_KEY}'
_PATH_WORDS = frozenset({"LOCATION", "PATH", "INPATH", "DIRECTORY"})
_DIALECT = Arctic()

EXTERNAL = "--allow-external-locations"
UNSAFE = "--allow-unsafe-functions"
SET_ANY = "--allow-set-any"


class PolicyViolation(OperationError):
    """A statement the server's policy refuses (SQLSTATE 42501, insufficient privilege)."""

    def __init__(self, what: str, option: str) -> None:
        super().__init__(f"{what}; the server refuses it ({option} relaxes this)", "42501")


@dataclass(frozen=True)
class StatementPolicy:
    """The rules for one server; ``warehouse`` is the folder paths are confined to."""

    warehouse: str
    allow_external_locations: bool = False
    allow_unsafe_functions: bool = False
    allow_set_any: bool = False

    @classmethod
    def trusted(cls, warehouse: str) -> StatementPolicy:
        return cls(warehouse, allow_external_locations=True, allow_unsafe_functions=True, allow_set_any=True)

    @property
    def root(self) -> str:
        return os.path.realpath(self.warehouse)

    def session_conf(self) -> dict[str, str]:
        """Settings for every client session: file queries off unless paths may leave the warehouse,
        ``${env:...}``/``${system:...}`` substitution off unless unsafe functions are allowed."""
        return {
            **({} if self.allow_external_locations else NO_FILE_QUERIES),
            **({} if self.allow_unsafe_functions else NO_SUBSTITUTION),
        }

    # checks --------------------------------------------------------------------------------
    def check_sql(self, text: str) -> None:
        """Parse ``text`` and check every statement in it; raises :class:`PolicyViolation`.

        A statement arctic-sql's parser cannot read would go to Spark unchecked (whose grammar is
        wider: pipe syntax, IDENTIFIER('reflect')(...)): it is refused unless the server is trusted.
        """
        try:
            statements = parse(text)
        except SqlParseError as e:
            self._dynamic(f"The server cannot check a statement it cannot parse ({e})")
            return
        self.check(statements)

    def check(self, statements: Sequence[ParsedStatement]) -> None:
        for statement in statements:
            if isinstance(statement.expression, exp.Command):
                self._check_command(statement.expression, statement.sql)
            else:
                self._check_tree(statement.expression)

    def check_setting(self, key: str) -> None:
        """A session setting a client asks for: only the keys of :data:`SETTABLE` by default."""
        key = key.strip().strip("`").strip()
        if self.allow_set_any or key in SETTABLE:
            return
        raise PolicyViolation(
            f"SET {key} is not among the session settings a client may change "
            f"(such as spark.sql.session.timeZone, spark.sql.shuffle.partitions)",
            SET_ANY,
        )

    def check_location(self, location: str, clause: str = "LOCATION", read_only: bool = False) -> None:
        """``location`` (a path or a ``file:`` URL) must resolve to a folder below the warehouse.

        Unless it is only read (a view over files), it must not hold files yet: a client's table may
        be overwritten or dropped with its folder, which must not take the catalog or another table's
        files with it.
        """
        if self.allow_external_locations:
            return
        resolved = _resolve(location)
        if resolved is not None and self.root in resolved:
            raise PolicyViolation(f"{clause} '{location}' is the warehouse itself", EXTERNAL)
        if resolved is None or not all(_below(self.root, path) for path in resolved):
            raise PolicyViolation(f"{clause} '{location}' is outside the warehouse {self.root}", EXTERNAL)
        spark_tables = os.path.join(self.root, SPARK_WAREHOUSE)
        if not read_only and not all(_below(spark_tables, path) for path in resolved):
            # Elsewhere in the warehouse a new folder may become an arctic database's or table's
            # ({warehouse}/{db}/{table}), whose files this table's INSERT OVERWRITE would delete.
            raise PolicyViolation(
                f"{clause} '{location}' is outside the warehouse's folder for such tables "
                f"{spark_tables}: the rest of the warehouse is the arctic catalog's",
                EXTERNAL,
            )
        if not read_only and any(_holds_files(path) for path in resolved):
            raise PolicyViolation(
                f"{clause} '{location}' already holds files; clients may only put tables "
                f"in new folders of the warehouse",
                EXTERNAL,
            )
        if not read_only and any(_in_a_table(path) for path in resolved):
            raise PolicyViolation(
                f"{clause} '{location}' is inside another table's folder, whose maintenance "
                "would take its files for that table's own",
                EXTERNAL,
            )

    # the parsed statement ------------------------------------------------------------------
    def _check_tree(self, tree: exp.Expression) -> None:
        read_only = isinstance(tree, exp.Create) and tree.kind == "VIEW"  # CREATE VIEW ... USING csv
        if isinstance(tree, exp.LoadData):
            self._external("LOAD DATA reads files from a path")
        if (
            isinstance(tree, exp.Create)
            and tree.kind in ("DATABASE", "SCHEMA")
            and tree.this.name.lower() == SPARK_WAREHOUSE
        ):
            self._external(
                f"A database named {SPARK_WAREHOUSE} would put arctic tables in the folder of Spark's own"
            )
        for node in tree.walk():
            if isinstance(node, exp.Anonymous):
                self._check_function_call(node)
            elif isinstance(node, exp.Table):
                self._check_table(node)
            elif isinstance(node, exp.Directory):
                self._external("INSERT OVERWRITE DIRECTORY writes to a path")
            elif isinstance(node, exp.LocationProperty):
                self.check_location(node.name)
            elif isinstance(node, exp.AlterSet) and node.args.get("location") is not None:
                self.check_location(node.args["location"].name)
            elif isinstance(node, exp.FileFormatProperty) and isinstance(node.parent, exp.Properties):
                self._check_provider(node.name)
            elif type(node) is exp.Property:
                self._check_property(node, read_only)
            elif isinstance(node, exp.SetItem):
                self._check_set_item(node)
            elif isinstance(node, exp.Create) and node.kind == "FUNCTION":
                self._check_function(node)
            elif isinstance(node, exp.QueryTransform):
                self._unsafe("SELECT TRANSFORM ... USING runs a program on the server")

    def _check_function_call(self, call: exp.Anonymous) -> None:
        name = call.name.lower()
        if name in UNSAFE_FUNCTIONS:
            self._unsafe(f"{name}() calls Java code on the server")
        if name == "identifier":  # IDENTIFIER('db.t'): a name given as a string
            argument = call.expressions[0] if call.expressions else None
            if not (isinstance(argument, exp.Literal) and argument.is_string):
                self._dynamic("IDENTIFIER() of an expression names what the server cannot check")
                return  # trusted: Spark resolves it
            self._check_tree(exp.to_table(argument.name, dialect=_DIALECT))
            if argument.name.strip("` ").lower() in UNSAFE_FUNCTIONS:
                self._unsafe(f"{argument.name.strip('` ').lower()}() calls Java code on the server")

    def _check_table(self, table: exp.Table) -> None:
        if table.args.get("db") is None:
            return
        if table.text("db").lower() in FILE_FORMATS or "/" in table.name:
            self._external(f"The statement reads or writes files by path ({table.text('db')}.`{table.name}`)")

    def _check_provider(self, provider: str) -> None:
        if provider and provider.lower() not in PROVIDERS:
            self._external(f"USING {provider} reaches beyond the warehouse's file formats")

    def _check_property(self, prop: exp.Property, read_only: bool) -> None:
        key = prop.name.lower()
        if key in ("path", "paths", "location") or key.endswith((".path", ".location")):
            value = prop.args.get("value")
            text = value.name if isinstance(value, exp.Expression) else str(value)
            self.check_location(text, prop.name, read_only)

    def _check_set_item(self, item: exp.SetItem) -> None:
        if (item.args.get("kind") or "").upper() == "VARIABLE":  # SET VAR: a SQL session variable
            return
        assignment = item.this
        if isinstance(assignment, exp.EQ):
            target = assignment.this
            parts = target.parts if isinstance(target, exp.Column) else [target]
            self.check_setting(".".join(p.name for p in parts))

    def _check_function(self, create: exp.Create) -> None:
        if isinstance(create.this, exp.UserDefinedFunction) and isinstance(create.expression, exp.Return):
            return  # CREATE FUNCTION f(x) RETURNS ... RETURN <SQL>: its body is walked like any query
        self._unsafe("CREATE FUNCTION from a class or jar loads code on the server")

    # opaque statements sqlglot keeps as text ------------------------------------------------
    def _check_command(self, command: exp.Command, sql: str) -> None:
        head = command.name.upper()
        rest = command.expression
        rest = rest.name if isinstance(rest, exp.Expression) else str(rest or "")
        if head == "EXECUTE":
            self._dynamic("EXECUTE IMMEDIATE runs SQL text the server cannot check")
        if head.startswith("ADD"):
            self._unsafe(f"{head} loads files or code into the server")
        if head == "SET" and "=" in rest:
            self.check_setting(rest.partition("=")[0])
        if head == "SET" and rest.upper().startswith("TIME ZONE"):
            self.check_setting("spark.sql.session.timeZone")
        if head == "RESET" and not self.allow_set_any:
            key = rest.strip().strip("`").strip()
            if not key or key in self.session_conf():  # back to Spark's defaults: files and ${env:} readable
                raise PolicyViolation(
                    f"RESET {key or '(every setting)'} would turn back on what the server turns "
                    f"off for clients ({', '.join(sorted(self.session_conf()))}); RESET one "
                    "setting by name instead",
                    SET_ANY,
                )
        tokens = list(_DIALECT.tokenize(sql))
        for index, (previous, token) in enumerate(zip(tokens, tokens[1:])):
            word = previous.text.lower()
            if token.token_type == TokenType.STRING and word.upper() in _PATH_WORDS:
                self.check_location(token.text, previous.text.upper())
            elif token.token_type == TokenType.L_PAREN and word in UNSAFE_FUNCTIONS:
                self._unsafe(f"{word}() calls Java code on the server")
            elif token.token_type == TokenType.DOT and word in FILE_FORMATS:
                self._external(f"The statement reads or writes files by path ({previous.text}.`...`)")
            elif previous.token_type == TokenType.USING and head in ("CREATE", "REPLACE"):
                self._check_provider(_dotted_name(tokens, index + 1))
            elif word == "transform" and token.token_type == TokenType.L_PAREN:
                self._unsafe("SELECT TRANSFORM ... USING runs a program on the server")

    def _external(self, what: str) -> None:
        if not self.allow_external_locations:
            raise PolicyViolation(what, EXTERNAL)

    def _dynamic(self, what: str) -> None:
        if not (self.allow_external_locations and self.allow_unsafe_functions and self.allow_set_any):
            raise PolicyViolation(what, "--trusted")

    def _unsafe(self, what: str) -> None:
        if not self.allow_unsafe_functions:
            raise PolicyViolation(what, UNSAFE)


def _dotted_name(tokens: list[Token], start: int) -> str:
    """The name starting at ``tokens[start]``, dots included (``org.apache.spark.sql.parquet``)."""
    words = [tokens[start].text]
    index = start + 1
    while index + 1 < len(tokens) and tokens[index].token_type == TokenType.DOT:
        words.append(tokens[index + 1].text)
        index += 2
    return ".".join(words)


def _resolve(location: str) -> list[str] | None:
    """The real paths ``location`` may mean on this machine (as written and %-decoded); None if it
    names another machine or file system. A relative path is relative to the server's folder, as in
    Spark."""
    parsed = urlparse(location)
    if parsed.scheme and len(parsed.scheme) > 1:  # C:\ is not a scheme
        if parsed.scheme.lower() != "file" or parsed.netloc not in ("", "localhost"):
            return None
        location = parsed.path
    return [os.path.realpath(os.path.join(os.getcwd(), path)) for path in {location, unquote(location)}]


def _below(root: str, path: str) -> bool:
    return path.startswith(root.rstrip(os.sep) + os.sep)


def _in_a_table(path: str) -> bool:
    """Whether a folder above ``path`` is an Iceberg table's (it has ``metadata/*.metadata.json``):
    that table's orphan removal would take what is put there for its own files."""
    folder = os.path.dirname(path)
    while folder and folder != os.path.dirname(folder):
        metadata = os.path.join(folder, "metadata")
        if os.path.isdir(metadata) and any(n.endswith(".metadata.json") for n in os.listdir(metadata)):
            return True
        folder = os.path.dirname(folder)
    return False


def _holds_files(path: str) -> bool:
    if os.path.isdir(path):
        with os.scandir(path) as entries:
            return any(True for _ in entries)
    return os.path.exists(path)
