"""The ``arctic`` sqlglot dialect: Spark SQL plus arctic-sql's statements and clauses.

>>> import sqlglot
>>> from arctic_sql.parser.dialect import Arctic
>>> sqlglot.parse_one("SELECT * FROM db.t VERSION BETWEEN 1 AND 5", read=Arctic).sql(Arctic)
'SELECT * FROM db.t VERSION BETWEEN 1 AND 5'

Defining the class registers it with sqlglot under the name ``"arctic"``.
"""

from __future__ import annotations

import typing as t

from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

from .generator import ArcticGenerator
from .grammar import ArcticParser


class Arctic(Spark):
    """Spark's dialect with arctic's parser and generator."""

    class Tokenizer(Spark.Tokenizer):
        # sqlglot's base tokenizer turns CALL and EXPLAIN into an opaque COMMAND token that swallows
        # the rest of the statement. Left as plain words, the parser matches them itself.
        KEYWORDS: t.ClassVar = {
            word: token_type
            for word, token_type in Spark.Tokenizer.KEYWORDS.items()
            if word not in {"CALL", "EXPLAIN"}
        }

        # Likewise SHOW: without this the text after it is one string token and SHOW TABLES
        # could never be told apart from SHOW FUNCTIONS.
        COMMANDS: t.ClassVar = Spark.Tokenizer.COMMANDS - {TokenType.SHOW}

        # Spark 4 reads a doubled quote inside a string as the quote ('it''s' is it's), and only
        # quotes apart by blanks as strings to join ('a' 'b' is ab); sqlglot's Spark joins both.
        STRING_ESCAPES: t.ClassVar = [*Spark.Tokenizer.STRING_ESCAPES, "'", '"']

    Parser = ArcticParser

    Generator = ArcticGenerator
