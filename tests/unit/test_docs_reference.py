"""The configuration and procedure pages are what ``scripts/docs_reference.py`` generates from the
property registry and the procedure registry, so the docs list every key and every CALL parameter."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from arctic_sql.procedures import registry
from arctic_sql.table.model import properties

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


docs_reference = _script()


@pytest.mark.parametrize("page", sorted(docs_reference.PAGES), ids=lambda p: p.name)
def test_the_committed_page_is_what_the_script_generates(page):
    expected = docs_reference.PAGES[page]()
    committed = page.read_text(encoding="utf-8") if page.exists() else ""
    assert committed == expected, (
        f"{page.relative_to(ROOT)} differs from what the registries in the code generate; "
        f"regenerate it with: {docs_reference.COMMAND}"
    )


def test_the_configuration_page_lists_every_property_with_its_type_and_default():
    page = docs_reference.configuration()
    for p in properties.PROPERTIES:
        row = next(line for line in page.splitlines() if line.startswith(f"| `{p.key}` |"))
        assert f"| {p.kind.value} |" in row
        default = str(p.default).lower() if isinstance(p.default, bool) else str(p.default)
        assert f"`{default}`" in row
    assert "a power of two between 1 and 1024" in page  # a rule, as the registry's check states it
    assert "alias `write.bucket.num`" in page


def test_the_procedures_page_lists_every_parameter_and_output_column():
    page = docs_reference.procedures()
    for name, proc in registry().items():
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for p in proc.parameters:
            assert f"| `{p.name}` | {p.type} |" in section
        for column, kind in docs_reference._columns(proc.output):
            assert f"| `{column}` | {kind} |" in section
    optimize = page.split("\n## optimize\n", 1)[1]
    assert "| `mode` | string | `'auto'` |" in optimize and "| `table` | string | required |" in optimize


def test_output_columns_split_only_at_top_level_commas():
    assert docs_reference._columns("a long, m map<string, long>, d decimal(10, 2)") == [
        ("a", "long"),
        ("m", "map<string, long>"),
        ("d", "decimal(10, 2)"),
    ]
