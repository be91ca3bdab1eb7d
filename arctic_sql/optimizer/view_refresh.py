"""When the optimizer service refreshes a materialized view (``refresh.interval``).

The refresh itself is a statement (``REFRESH MATERIALIZED VIEW``), which sits above the optimizer:
the service is handed it as a callable (``session.view_refresher``) and decides here, from metadata
only, whether a view is due: ``refresh.interval`` minutes since its last refresh commit, and a
source with a version that refresh did not cover.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from arctic_sql.table.format import versions
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.model.materialized import SOURCE_VERSIONS, SOURCES, is_definition
from arctic_sql.table.reading.scan import latest_version

if TYPE_CHECKING:
    from arctic_sql.table.catalog import ArcticCatalog
    from arctic_sql.table.model.table import ArcticTable

MINUTE_MS = 60_000


def due(catalog: ArcticCatalog, view: ArcticTable, now_ms: int) -> bool:
    """Whether the service refreshes ``view`` now (False for a table that is no view, or whose
    ``refresh.interval`` is off)."""
    interval = view.settings.refresh_interval
    if not is_definition(view.base.properties) or interval <= 0:
        return False
    refreshes = [c for c in versions.data_commits(view.base, view.change) if SOURCE_VERSIONS in c.summary]
    if not refreshes:
        return True  # no refresh retained: the versions it covers are unknown
    last = refreshes[-1]
    if now_ms - last.committed_at_ms < interval * MINUTE_MS:
        return False
    covered: dict[str, int] = json.loads(last.summary[SOURCE_VERSIONS])
    for name in view.base.properties[SOURCES].split(","):
        source = catalog.load_table(TableIdentifier.parse(name, view.identifier.database))
        if latest_version(source) != covered.get(name):
            return True
    return False
