"""The parser of the arctic dialect: Spark's parser plus the statements and clauses arctic-sql adds.

Extensions go through sqlglot's own tables where it has one (``STATEMENT_PARSERS``,
``SHOW_PARSERS``) and through small tables of our own where it has none: statements that start with
a plain word (``CALL``, ``EXPLAIN``) and ``ALTER TABLE t <word>`` forms that are statements of their
own rather than actions of ``exp.Alter``.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import TokenType
from sqlglot.trie import new_trie

from .statements import (
    Call,
    CloneTable,
    CompactTable,
    DescribeHistory,
    DescribeMaterializedView,
    Explain,
    SchemaEvolvingInsert,
    SchemaEvolvingMerge,
    ShowColumns,
    ShowCreateTable,
    ShowDatabases,
    ShowMaterializedViews,
    ShowPartitions,
    ShowTableProperties,
    ShowTables,
    TableOrder,
    TagStatement,
    UnsetTableProperties,
)


class ArcticParser(SparkParser):
    """Spark's parser with the arctic statements, time-travel ranges and pass-through commands."""

    # Spark's ``TABLE t`` is a query (``SELECT * FROM t``), not an identifier with an alias.
    SUPPORTS_TABLE_QUERY = True

    # Spark 4 runs in ANSI mode by default, where CAST fails on bad input: parse it as exp.Cast,
    # not as sqlglot's non-ANSI reading exp.TryCast, which also keeps typed literals such as
    # TIMESTAMP '2024-01-01' (an exp.Cast) equal to their printed form CAST('...' AS TIMESTAMP).
    STRICT_CAST = True

    STATEMENT_PARSERS: t.ClassVar = {
        **SparkParser.STATEMENT_PARSERS,
        TokenType.SHOW: lambda self: self._parse_show(),
        TokenType.MERGE: lambda self: self._parse_schema_evolving(SchemaEvolvingMerge, self._parse_merge),
        TokenType.INSERT: lambda self: self._parse_schema_evolving(SchemaEvolvingInsert, self._parse_insert),
        TokenType.CREATE: lambda self: self._parse_clone_table() or self._parse_create(),
    }

    # Statements whose first word the tokenizer leaves as a plain VAR token.
    WORD_STATEMENT_PARSERS: t.ClassVar[dict[str, t.Callable[[ArcticParser], exp.Expression]]] = {
        "CALL": lambda self: self._parse_call(),
        "EXPLAIN": lambda self: self._parse_explain(),
    }

    # A statement starting with one of these and not claimed above is something sqlglot has no
    # grammar for (``CLEAR CACHE``, ``RESET``, ``LIST JAR``, ``REPAIR TABLE``, ``REPLACE TABLE``):
    # it becomes an opaque ``exp.Command`` instead of a nonsense expression such as ``CLEAR AS CACHE``.
    COMMAND_START_TOKENS: t.ClassVar[frozenset[TokenType]] = frozenset(
        {TokenType.VAR, TokenType.LIST, TokenType.REPLACE}
    )

    SHOW_PARSERS: t.ClassVar = {
        **SparkParser.SHOW_PARSERS,
        "TABLES": lambda self: self._parse_show_tables(),
        "TABLE EXTENDED": lambda self: self._parse_show_tables(extended=True),
        "DATABASES": lambda self: self._parse_show_databases(),
        "SCHEMAS": lambda self: self._parse_show_databases(),
        "NAMESPACES": lambda self: self._parse_show_databases(),
        "TBLPROPERTIES": lambda self: self._parse_show_table_properties(),
        "CREATE TABLE": lambda self: self._parse_show_create_table(),
        "COLUMNS": lambda self: self._parse_show_columns(),
        "PARTITIONS": lambda self: self._parse_show_partitions(),
        "MATERIALIZED VIEWS": lambda self: self._parse_show_materialized_views(),
    }
    SHOW_TRIE: t.ClassVar = new_trie(key.split(" ") for key in SHOW_PARSERS)

    # ``ALTER TABLE t <word> ...`` forms that are statements of their own.
    ALTER_TABLE_STATEMENT_PARSERS: t.ClassVar[
        dict[str, t.Callable[[ArcticParser, exp.Table], exp.Expression | None]]
    ] = {
        "UNSET": lambda self, table: self._parse_unset_table_properties(table),
        "COMPACT": lambda self, table: self._parse_compact_table(table),
        "WRITE": lambda self, table: self._parse_write_order(table),
        "CLUSTER": lambda self, table: self._parse_cluster_by(table),
        "CLUSTER BY": lambda self, table: self._parse_cluster_by(table, by=True),  # one token in sqlglot
        # Only before TAG or BRANCH: ``ALTER TABLE t DROP COLUMN ...`` and the like stay sqlglot's.
        "CREATE": lambda self, table: self._parse_tag_statement(table, "create"),
        "REPLACE": lambda self, table: self._parse_tag_statement(table, "replace"),
        "DROP": lambda self, table: self._parse_tag_statement(table, "drop"),
    }
    RETAIN_UNITS: t.ClassVar[frozenset[str]] = frozenset({"DAYS", "HOURS", "MINUTES"})

    # HISTORY is ours (DescribeHistory); as a style it would swallow a table named history.
    DESCRIBE_STYLES: t.ClassVar = SparkParser.DESCRIBE_STYLES - {"HISTORY"}

    EXPLAIN_KINDS: t.ClassVar[frozenset[str]] = frozenset(
        {"LOGICAL", "EXTENDED", "FORMATTED", "CODEGEN", "COST"}
    )
    COMPACT_KINDS: t.ClassVar[frozenset[str]] = frozenset({"MINOR", "MAJOR", "FULL"})

    # The word after an optional FOR in a time-travel clause, and what exp.Version calls it.
    TIME_TRAVEL_WORDS: t.ClassVar[dict[str, str]] = {
        "VERSION": "VERSION",
        "SYSTEM_VERSION": "VERSION",
        "TIMESTAMP": "TIMESTAMP",
        "SYSTEM_TIME": "TIMESTAMP",
    }

    def _warn_unsupported(self) -> None:
        # sqlglot logs a warning whenever it falls back to exp.Command. For us that fallback is
        # the normal path of every Spark statement we pass through unchanged, so stay quiet.
        return None

    def _parse_statement(self) -> exp.Expr | None:
        # sqlglot also calls _parse_statement for parts of statements (the value in SET k=v, the
        # body of a CTE); the word rules only hold where a statement starts.
        if self._index == 0:
            statement = self._parse_word_statement()
            if statement is not None:
                return statement
        return super()._parse_statement()

    def _parse_word_statement(self) -> exp.Expr | None:
        """A statement that starts with a plain word: one of ours, or an opaque command."""
        if self._curr.token_type not in self.COMMAND_START_TOKENS:
            return None
        parser = self.WORD_STATEMENT_PARSERS.get(self._curr.text.upper())
        if parser is None:
            return self._parse_as_command(self._curr)
        comments = self._curr.comments
        self._advance()
        statement = parser(self)
        statement.add_comments(comments, prepend=True)
        return statement

    def _parse_schema_evolving(self, node: type[exp.Expression], parse: t.Callable[[], exp.Expr]) -> exp.Expr:
        """``MERGE|INSERT [WITH SCHEMA EVOLUTION] ...``: sqlglot's statement, as ``node`` when it evolves."""
        if not self._match_text_seq("WITH", "SCHEMA", "EVOLUTION"):
            return parse()
        statement = parse()
        return self.expression(node(**statement.args))

    # SHOW --------------------------------------------------------------------------------------

    def _parse_show_tables(self, extended: bool = False) -> ShowTables | exp.Command:
        start = self._tokens[self._index - (3 if extended else 2)]  # the SHOW token
        parts = self._parse_show_namespace()
        like = self._parse_show_pattern()
        if len(parts) > 2 or (extended and self._index < len(self._tokens)):
            # A nested namespace, or SHOW TABLE EXTENDED ... PARTITION (...): not one of ours, so
            # Spark gets the text unchanged.
            return self._parse_as_command(start)
        database = parts[-1] if parts else None
        catalog = parts[0] if len(parts) == 2 else None
        return self.expression(
            ShowTables(this=database, catalog=catalog, like=like, extended=extended or None)
        )

    def _parse_show_databases(self) -> ShowDatabases | exp.Command:
        start = self._tokens[self._index - 2]
        parts = self._parse_show_namespace()
        like = self._parse_show_pattern()
        if len(parts) > 1:
            return self._parse_as_command(start)
        return self.expression(ShowDatabases(this=parts[0] if parts else None, like=like))

    def _parse_show_namespace(self) -> list[exp.Identifier]:
        """The dotted name after ``IN`` or ``FROM``, or no parts when there is none."""
        if not self._match_set((TokenType.IN, TokenType.FROM)):
            return []
        return self._parse_dotted_identifiers("Expecting a database name", any_token=False)

    def _parse_show_pattern(self) -> exp.Expr | None:
        """``[LIKE] 'pattern'``; Spark makes the LIKE optional."""
        if self._match(TokenType.LIKE):
            pattern = self._parse_string()
            if pattern is None:
                self.raise_error("Expecting a quoted pattern after LIKE")
            return pattern
        return self._parse_string()

    def _parse_show_materialized_views(self) -> ShowMaterializedViews | exp.Command:
        start = self._tokens[self._index - 3]
        parts = self._parse_show_namespace()
        if len(parts) > 1 or self._curr:
            return self._parse_as_command(start)
        return self.expression(ShowMaterializedViews(this=parts[0] if parts else None))

    def _parse_show_table_properties(self) -> ShowTableProperties:
        table = self._parse_plain_table()
        key = None
        if self._match(TokenType.L_PAREN):
            key = self._parse_property_key()
            if key is None:
                self.raise_error("Expecting a property key")
            self._match_r_paren()
        return self.expression(ShowTableProperties(this=table, key=key))

    def _parse_show_create_table(self) -> ShowCreateTable | exp.Command:
        start = self._tokens[self._index - 3]
        table = self._parse_table_parts()
        if self._curr:  # SHOW CREATE TABLE t AS SERDE: Spark's Hive form, passed through
            return self._parse_as_command(start)
        return self.expression(ShowCreateTable(this=table))

    def _parse_show_columns(self) -> ShowColumns:
        if not self._match_set((TokenType.IN, TokenType.FROM)):
            self.raise_error("Expecting IN or FROM after SHOW COLUMNS")
        table = self._parse_table_parts()
        database = None
        if self._match_set((TokenType.IN, TokenType.FROM)):
            database = self._parse_id_var(any_token=False)
            if database is None:
                self.raise_error("Expecting a database name")
        return self.expression(ShowColumns(this=table, database=database))

    def _parse_show_partitions(self) -> ShowPartitions:
        table = self._parse_table_parts()
        return self.expression(ShowPartitions(this=table, partition=self._parse_partition()))

    # ALTER TABLE ... UNSET / COMPACT -----------------------------------------------------------

    # Returns our statements as well as sqlglot's Alter or Command, hence the wider type.
    def _parse_alter(self) -> exp.Expr:  # type: ignore[override]
        index = self._index
        if self._match(TokenType.TABLE):
            table = self._try_parse(self._parse_table_parts)
            parser = self.ALTER_TABLE_STATEMENT_PARSERS.get(self._curr.text.upper()) if self._curr else None
            if isinstance(table, exp.Table) and parser is not None:
                self._advance()
                statement = parser(self, table)
                if statement is not None:  # None: not ours after all (ALTER TABLE t DROP COLUMN c)
                    return statement
        self._retreat(index)
        return super()._parse_alter()

    def _parse_alter_table_alter(self) -> exp.Expr | None:
        """``ALTER [COLUMN] st.x ...``: the base parser takes one name there, so a field of a struct
        made the whole statement an opaque Command that reached Spark; it becomes an AlterColumn
        whose ``this`` is the dotted path (a Dot), which the statement refuses or applies."""
        start = self._index
        self._match(TokenType.COLUMN)
        parts: list[exp.Expr] = []
        while self._curr and self._next and self._next.token_type == TokenType.DOT:
            part = self._parse_id_var(any_token=True)
            assert part is not None  # any token makes a name, and there is one (self._curr)
            parts.append(part)
            self._match(TokenType.DOT)
        if not parts:
            self._retreat(start)
            return super()._parse_alter_table_alter()
        action = super()._parse_alter_table_alter()
        if isinstance(action, exp.AlterColumn):
            action.set("this", exp.Dot.build([*parts, action.this]))
        return action

    def _parse_unset_table_properties(self, table: exp.Table) -> UnsetTableProperties:
        if not self._match_text_seq("TBLPROPERTIES"):
            self.raise_error("Expecting TBLPROPERTIES after UNSET")
        exists = bool(self._parse_exists())
        keys = self._parse_wrapped_csv(self._parse_property_key)
        if not keys:
            self.raise_error("Expecting at least one property key")
        return self.expression(UnsetTableProperties(this=table, expressions=keys, exists=exists))

    def _parse_property_key(self) -> exp.Expr | None:
        """A property key: a quoted string, or an unquoted dotted name turned into one."""
        if self._match(TokenType.STRING):
            return exp.Literal.string(self._prev.text)
        if self._curr.token_type == TokenType.R_PAREN:
            return None
        parts = self._parse_dotted_identifiers("Expecting a property key")
        return exp.Literal.string(".".join(part.name for part in parts))

    def _parse_compact_table(self, table: exp.Table) -> CompactTable:
        if not self._match_texts(self.COMPACT_KINDS):
            self.raise_error("Expecting MINOR, MAJOR or FULL after COMPACT")
        return self.expression(CompactTable(this=table, kind=self._prev.text.lower()))

    def _parse_write_order(self, table: exp.Table) -> TableOrder:
        if self._match_text_seq("UNORDERED"):
            return self.expression(TableOrder(this=table, mode="none"))
        locally = self._match_text_seq("LOCALLY")
        if not self._match_text_seq("ORDERED", "BY"):
            self.raise_error("Expecting [LOCALLY] ORDERED BY or UNORDERED after WRITE")
        columns = self._parse_order_columns()
        return self.expression(TableOrder(this=table, mode="sort", expressions=columns, locally=locally))

    def _parse_cluster_by(self, table: exp.Table, by: bool = False) -> TableOrder:
        if not by and not self._match_text_seq("BY"):
            self.raise_error("Expecting BY after CLUSTER")
        return self.expression(
            TableOrder(this=table, mode="z-order", expressions=self._parse_order_columns())
        )

    def _parse_order_columns(self) -> list[exp.Expr]:
        """``(c1, c2)`` or ``c1, c2``: plain column names (no direction: every order is ascending)."""
        wrapped = self._match(TokenType.L_PAREN)
        columns = self._parse_csv(lambda: self._parse_id_var(any_token=False))
        if wrapped and not self._match(TokenType.R_PAREN):
            self.raise_error("Expecting ) after the columns")
        if not columns:
            self.raise_error("Expecting at least one column")
        return columns

    def _parse_tag_statement(self, table: exp.Table, action: str) -> TagStatement | None:
        branch = False
        if action == "create" and self._match_text_seq("OR", "REPLACE", "TAG"):
            action = "create_or_replace"
        elif action != "replace" and self._match_text_seq("BRANCH"):
            branch = True
        elif not self._match_text_seq("TAG"):
            return None
        exists = (
            self._match_text_seq("IF", "NOT", "EXISTS")
            if action == "create"
            else (self._match_text_seq("IF", "EXISTS") if action == "drop" else False)
        )
        name = self._parse_id_var(any_token=False)
        if name is None:
            self.raise_error(f"Expecting a {'branch' if branch else 'tag'} name")
        tag = TagStatement(this=table, action=action, name=name, exists=bool(exists), branch=branch)
        if branch:
            if action == "create" and self._match_text_seq("AS", "OF", "VERSION"):
                tag.set("version", self._parse_bitwise())
        elif action != "drop":
            if self._match_text_seq("AS", "OF", "VERSION"):
                tag.set("version", self._parse_bitwise())
            if self._match_text_seq("RETAIN"):
                tag.set("retain", self._parse_number())
                if tag.args.get("retain") is None or not self._match_texts(self.RETAIN_UNITS):
                    self.raise_error("Expecting RETAIN <number> DAYS|HOURS|MINUTES")
                tag.set("unit", self._prev.text.lower())
        return self.expression(tag)

    # CREATE TABLE ... CLONE ---------------------------------------------------------------------

    def _parse_clone_table(self) -> CloneTable | None:
        """``TABLE [IF NOT EXISTS] t2 [SHALLOW|DEEP] CLONE t [VERSION|TIMESTAMP AS OF v]`` after CREATE,
        or None (nothing consumed) for every other CREATE."""
        index = self._index
        if not self._match(TokenType.TABLE):
            return None
        exists = bool(self._match_text_seq("IF", "NOT", "EXISTS"))
        target = self._parse_plain_table()
        shallow = self._match_text_seq("SHALLOW")
        if not shallow:
            self._match_text_seq("DEEP")
        if not self._match_text_seq("CLONE"):
            self._retreat(index)
            return None
        source = self._parse_plain_table()
        version = self._parse_version()
        if version is not None and version.text("kind") != "AS OF":
            self.raise_error("Expecting VERSION AS OF or TIMESTAMP AS OF after the clone's source")
        return self.expression(
            CloneTable(this=target, source=source, shallow=bool(shallow), exists=exists, version=version)
        )

    # DESCRIBE HISTORY --------------------------------------------------------------------------

    # Returns DescribeHistory and DescribeMaterializedView as well as sqlglot's Describe.
    def _parse_describe(self) -> exp.Expr:  # type: ignore[override]
        start = self._prev
        # ``DESCRIBE history`` and ``DESCRIBE history.t`` name a table called history.
        if self._curr.text.upper() == "HISTORY" and self._next and self._next.token_type != TokenType.DOT:
            self._advance()
            return self.expression(DescribeHistory(this=self._parse_table_parts()))
        if self._match_text_seq("MATERIALIZED", "VIEW"):
            return self.expression(DescribeMaterializedView(this=self._parse_plain_table()))
        describe = super()._parse_describe()
        if self._curr:
            # A form sqlglot stops short of, e.g. ``DESCRIBE t col`` or ``DESCRIBE QUERY ...``.
            return self._parse_as_command(start)
        return describe

    # EXPLAIN -----------------------------------------------------------------------------------

    def _parse_explain(self) -> Explain | DescribeMaterializedView:
        if self._match_text_seq("MATERIALIZED", "VIEW"):
            return self.expression(DescribeMaterializedView(this=self._parse_plain_table()))
        kind = self._prev.text.lower() if self._match_texts(self.EXPLAIN_KINDS) else None
        statement = self._parse_word_statement() or self._parse_statement()
        if statement is None:
            self.raise_error("Expecting a statement after EXPLAIN")
        return self.expression(Explain(this=statement, kind=kind))

    # CALL --------------------------------------------------------------------------------------

    def _parse_call(self) -> Call:
        parts = self._parse_dotted_identifiers("Expecting a procedure name after CALL")
        name = ".".join(part.name for part in parts)
        return self.expression(Call(this=name, expressions=self._parse_call_arguments()))

    def _parse_call_arguments(self) -> list[exp.Expr]:
        self._match_l_paren()
        arguments: list[exp.Expr] = []
        if self._match(TokenType.R_PAREN):
            return arguments
        while True:
            first_token = self._curr
            argument = self._parse_call_argument()
            if argument is None:
                self.raise_error("Expecting a procedure argument")
            elif arguments and isinstance(arguments[-1], exp.Kwarg) and not isinstance(argument, exp.Kwarg):
                self.raise_error("Positional argument after a named argument in CALL", first_token)
            else:
                arguments.append(argument)
            if not self._match(TokenType.COMMA):
                break
        self._match_r_paren()
        return arguments

    def _parse_call_argument(self) -> exp.Expr | None:
        """``name => value`` as an ``exp.Kwarg``, or a positional value."""
        if self._next.token_type == TokenType.FARROW:
            # Any word may name an argument, keywords like ``table`` included.
            name = self._parse_id_var(any_token=True)
            self._match(TokenType.FARROW)
            value = self._parse_disjunction()
            if value is None:
                self.raise_error("Expecting a value after =>")
            return self.expression(exp.Kwarg(this=name, expression=value))
        return self._parse_disjunction()

    # Time travel and incremental reads ----------------------------------------------------------

    def _parse_version(self) -> exp.Version | None:
        """``[FOR] VERSION|SYSTEM_VERSION|TIMESTAMP|SYSTEM_TIME (AS OF v | BETWEEN v1 AND v2)``.

        Both forms become ``exp.Version`` (``this`` 'VERSION' or 'TIMESTAMP', ``kind`` 'AS OF' or
        'BETWEEN'); BETWEEN keeps its bounds in an ``exp.Tuple``, as sqlglot does for T-SQL's
        ``FOR SYSTEM_TIME BETWEEN``. A word not followed by AS OF or BETWEEN is left alone, so a
        table aliased ``version`` still parses.
        """
        index = self._index
        self._match(TokenType.FOR)
        this = self.TIME_TRAVEL_WORDS.get(self._curr.text.upper())
        if this is None or self._curr.token_type in self.TEXT_MATCH_EXCLUDED_TOKENS:
            self._retreat(index)
            return None
        self._advance()

        if self._match_text_seq("AS", "OF"):
            value = self._parse_time_travel_value("AS OF")
            return self.expression(exp.Version(this=this, kind="AS OF", expression=value))

        if self._match(TokenType.BETWEEN):
            start = self._parse_time_travel_value("BETWEEN")
            if not self._match(TokenType.AND):
                self.raise_error("Expecting AND in BETWEEN ... AND ...")
            end = self._parse_time_travel_value("AND")
            bounds = exp.Tuple(expressions=[start, end])
            return self.expression(exp.Version(this=this, kind="BETWEEN", expression=bounds))

        self._retreat(index)
        return None

    def _parse_time_travel_value(self, after: str) -> exp.Expr | None:
        # Bitwise level: arithmetic and function calls, but not AND, which ends a BETWEEN bound.
        value = self._parse_bitwise()
        if value is None:
            self.raise_error(f"Expecting a version or timestamp after {after}")
        return value

    def _parse_plain_table(self) -> exp.Table:
        """``[catalog.][db.]t`` with nothing after it read as part of the name (not ``t(...)``)."""
        parts = self._parse_dotted_identifiers("Expecting a table name", any_token=False)
        if len(parts) > 3:
            self.raise_error("Expecting a table name of at most three parts")
        names = dict(zip(("this", "db", "catalog"), reversed(parts)))
        return self.expression(exp.Table(**names))

    # Helpers -----------------------------------------------------------------------------------

    def _parse_dotted_identifiers(self, message: str, any_token: bool = True) -> list[exp.Identifier]:
        """``a.b.c`` as identifiers. With ``any_token`` a keyword may be a part, as in
        ``system.optimize`` or ``write.delete.mode``; without, only words sqlglot allows as names."""
        parts: list[exp.Identifier] = []
        while True:
            part = self._parse_id_var(any_token=any_token)
            if not isinstance(part, exp.Identifier):
                self.raise_error(message)
                return parts
            parts.append(part)
            if not self._match(TokenType.DOT):
                return parts
