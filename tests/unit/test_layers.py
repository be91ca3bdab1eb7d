"""The one-way structure (``.importlinter``): front ends -> session -> statements -> optimizer ->
table, the table layer without SQL and in wings (catalog -> maintenance -> writing -> reading ->
records -> files -> model, format), no import cycles. Checked with import-linter on a copy of the
package laid out as installed (parser/ and procedures/ live beside arctic_sql/ in the source tree
and inside it once installed; grimp reads the folders, not the editable install's mapping)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.fixture(scope="module")
def installed_layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("layout")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "arctic_sql", site / "arctic_sql", ignore=ignore)
    for subpackage in ("parser", "procedures"):
        shutil.copytree(ROOT / subpackage, site / "arctic_sql" / subpackage, ignore=ignore)
    return site


def _lint(site: Path, config: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    only = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache", *only],
        cwd=site,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_contract_is_kept(installed_layout: Path) -> None:
    result = _lint(installed_layout, ROOT / ".importlinter")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_a_table_module_that_imports_sql_breaks_a_contract(installed_layout: Path, tmp_path: Path) -> None:
    """The check can fail: a table-layer module importing sqlglot or a statement is reported."""
    site = tmp_path / "site"
    shutil.copytree(installed_layout, site)
    scan = site / "arctic_sql" / "table" / "reading" / "scan.py"
    scan.write_text(scan.read_text() + "\nfrom arctic_sql.statements import runner  # noqa: E402\n")
    result = _lint(site, ROOT / ".importlinter")
    assert result.returncode != 0
    assert "arctic_sql.table.reading.scan -> arctic_sql.statements.runner" in result.stdout


TABLE_CONTRACTS = ("table-wings", "table-no-cycles")


def _counting_type_checking(tmp_path: Path) -> Path:
    """.importlinter with the imports under ``if TYPE_CHECKING:`` counted (the rest of the package
    still has such cycles, which later steps of issue 29 remove; the table layer has none)."""
    config = tmp_path / "importlinter.ini"
    text = (ROOT / ".importlinter").read_text()
    assert "exclude_type_checking_imports = True" in text
    config.write_text(
        text.replace("exclude_type_checking_imports = True", "exclude_type_checking_imports = False")
    )
    return config


def test_the_table_wings_hold_counting_type_checking_imports(installed_layout: Path, tmp_path: Path) -> None:
    result = _lint(installed_layout, _counting_type_checking(tmp_path), *TABLE_CONTRACTS)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "2 kept, 0 broken" in result.stdout


def test_a_read_module_that_names_a_writer_even_for_types_breaks_the_wings(
    installed_layout: Path, tmp_path: Path
) -> None:
    """The order can fail: reading must not import writing, not even under TYPE_CHECKING."""
    site = tmp_path / "site"
    shutil.copytree(installed_layout, site)
    scan = site / "arctic_sql" / "table" / "reading" / "scan.py"
    scan.write_text(
        scan.read_text() + "\nimport typing  # noqa: E402\n\nif typing.TYPE_CHECKING:\n"
        "    from arctic_sql.table.writing import commit  # noqa: F401\n"
    )
    result = _lint(site, _counting_type_checking(tmp_path), *TABLE_CONTRACTS)
    assert result.returncode != 0
    assert "arctic_sql.table.reading.scan -> arctic_sql.table.writing.commit" in result.stdout
