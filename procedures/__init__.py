"""CALL procedures (installed as ``arctic_sql.procedures``).

Each procedure declares its typed parameters and snake_case output columns and then calls into
the core (``arctic_sql``). The parser already turns ``CALL system.x(...)`` into a
``arctic_sql.parser.statements.Call`` node; the procedures themselves (optimize, expire_snapshots,
remove_orphan_files, rollback_to_version, ...) arrive with self-optimizing and maintenance.
"""
