"""What makes a table a materialized view, and which of its columns are its own hidden state.

The statements that create and refresh a view live in ``arctic_sql/statements``; the readers
(the ``arctic`` format, DESCRIBE) and the optimizer service only need to recognise one and leave
its hidden columns out, so the names they share live here, below every layer that reads them.
"""

from __future__ import annotations

from collections.abc import Mapping

# The table property that holds a materialized view's query: what makes a table a materialized view.
QUERY_PROPERTY = "arctic.mv.query"
SOURCES = "arctic.mv.sources"
# The key users see: a grouped view's GROUP BY columns (its real key is the hidden group key).
SHOWN_KEY = "arctic.mv.key"
# The snapshot-summary entry of a refresh commit: {source: version} of the versions it covers.
SOURCE_VERSIONS = "arctic.mv.source-versions"
# Columns a view keeps for its refresh (sums, counts, the key of its groups), never shown to users.
STATE_PREFIX = "__mv_"


def is_definition(properties: Mapping[str, str]) -> bool:
    """Whether a table's properties are a materialized view's."""
    return QUERY_PROPERTY in properties


def is_hidden(properties: Mapping[str, str], column: str) -> bool:
    """Whether ``column`` of a table with ``properties`` is a view's hidden state column."""
    return column.startswith(STATE_PREFIX) and is_definition(properties)


def shown_key(properties: Mapping[str, str], primary_key: list[str]) -> list[str]:
    """The primary key DESCRIBE shows: a grouped view's GROUP BY columns, else the key."""
    recorded = properties.get(SHOWN_KEY)
    return recorded.split(",") if recorded else list(primary_key)
