"""Execute every notebook in notebooks/ top to bottom in a fresh Jupyter kernel; any cell error fails.

The notebooks assert their own results, so running them is a real end-to-end test of the flows they show.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client import KernelManager
from nbclient import NotebookClient

pytestmark = pytest.mark.spark

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
TIMEOUT = 600  # seconds per cell: a local SparkSession and its first jobs are slow on a small machine


def _runs_this_python(kernel_name: str) -> bool:
    """Whether jupyter_client would start ``kernel_name`` with the interpreter running the tests."""
    try:
        command = KernelManager(kernel_name=kernel_name).format_kernel_cmd()
    except Exception:  # noqa: BLE001 - no such kernelspec, or one we cannot read
        return False
    return bool(command) and os.path.abspath(command[0]) == os.path.abspath(sys.executable)


@pytest.fixture
def kernel(tmp_path, monkeypatch) -> str:
    """A kernel name that runs ipykernel on ``sys.executable``, with Spark bound to loopback.

    The stock "python3" spec normally resolves to the current interpreter (jupyter_client swaps a bare
    ``python`` for ``sys.executable``). If it does not, install a spec pointing at ``sys.executable``
    into a temporary JUPYTER_PATH that only this test sees.
    """
    # The kernel inherits os.environ from this process.
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    if _runs_this_python("python3"):
        return "python3"
    name = "arctic-sql-test-python"
    spec_dir = tmp_path / "jupyter" / "kernels" / name
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({sys.executable})",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    paths = [str(tmp_path / "jupyter"), os.environ.get("JUPYTER_PATH", "")]
    monkeypatch.setenv("JUPYTER_PATH", os.pathsep.join(p for p in paths if p))
    assert _runs_this_python(name), f"kernelspec {name} does not resolve to {sys.executable}"
    return name


def _execute(nb: nbformat.NotebookNode, kernel_name: str, cwd: Path) -> nbformat.NotebookNode:
    client = NotebookClient(
        nb,
        timeout=TIMEOUT,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(cwd)}},
    )
    return client.execute()  # raises CellExecutionError on the first failing cell


def test_notebooks_exist():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


def test_kernel_runs_the_test_interpreter(kernel, tmp_path):
    """The kernel imports this environment's arctic_sql, not whatever ``python`` is first on PATH."""
    probe = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import json, os, sys, arctic_sql\n"
                "print(json.dumps([sys.executable, sys.prefix, arctic_sql.__file__,"
                " os.environ.get('SPARK_LOCAL_IP')]))"
            )
        ]
    )
    executed = _execute(probe, kernel, tmp_path)
    output = "".join(o.get("text", "") for o in executed.cells[0].outputs if o.output_type == "stream")
    import arctic_sql

    assert json.loads(output) == [sys.executable, sys.prefix, arctic_sql.__file__, "127.0.0.1"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_saved_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not dirty, f"{path.name}: clear outputs and execution counts of cells {dirty} before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, kernel, tmp_path):
    # Run from an unrelated folder: a notebook must not depend on the working directory.
    nb = nbformat.read(path, as_version=4)
    executed = _execute(nb, kernel, tmp_path)
    code_cells = [c for c in executed.cells if c.cell_type == "code"]
    assert code_cells, f"{path.name} has no code cells"
    assert all(c.execution_count is not None for c in code_cells), f"{path.name}: not every code cell ran"
