"""A plain ``pip install arctic-sql`` lacks the optional extras: the features that need them say
which extra to install in one line, without a traceback.

Each case runs a real interpreter in which the extra's modules cannot be imported: a meta path
finder put first on ``sys.meta_path`` refuses them, as a missing package would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

HIDING = textwrap.dedent(
    """
    import sys

    HIDDEN = set(sys.argv[1].split(","))


    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, Refuse())
    del sys.argv[1]
    """
)


def run_without(modules: list[str], code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDING + textwrap.dedent(code), ",".join(modules), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )


RUN_CLI = "from arctic_sql.frontends.cli import main\nsys.exit(main(sys.argv[1:]))\n"
SERVER_HINT = "arctic-sql thriftserver needs the 'server' extra: pip install 'arctic-sql[server]'\n"


def test_thriftserver_without_thrift_names_the_server_extra(tmp_path):
    result = run_without(["thrift"], RUN_CLI, "thriftserver", "--port", "0", "--warehouse", str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert result.stderr == SERVER_HINT
    assert result.stdout == ""
    assert not os.listdir(tmp_path)  # it stopped before Spark or a catalog touched the warehouse


def test_thriftserver_without_pyhive_names_the_server_extra(tmp_path):
    result = run_without(["TCLIService", "pyhive"], RUN_CLI, "thriftserver", "--warehouse", str(tmp_path))
    assert (result.returncode, result.stderr) == (2, SERVER_HINT)


def test_the_hiding_is_real():
    """The same interpreter imports thrift when nothing hides it: the tests above are not vacuous."""
    code = "import importlib.util\nprint(importlib.util.find_spec('thrift') is not None)\nimport thrift\n"
    assert run_without(["nothing"], code).stdout == "True\n"
    assert "No module named 'thrift'" in run_without(["thrift"], code).stderr


def test_thriftserver_help_needs_no_extra():
    result = run_without(["thrift", "TCLIService"], RUN_CLI, "thriftserver", "--help")
    assert result.returncode == 0 and result.stdout.startswith("usage: arctic-sql thriftserver")


def test_the_sql_magic_without_ipython_names_the_jupyter_extra():
    result = run_without(["IPython"], "import arctic_sql.frontends.magic\n")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: The %%sql magic (arctic_sql.frontends.magic) needs the 'jupyter' extra: "
        "pip install 'arctic-sql[jupyter]'"
    )


def test_service_without_fastapi_names_the_service_extra(tmp_path):
    result = run_without(["fastapi"], RUN_CLI, "service", "--port", "0", "--warehouse", str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr == "arctic-sql service needs the 'service' extra: pip install 'arctic-sql[service]'\n"
    )
    assert not os.listdir(tmp_path)  # it stopped before a catalog touched the warehouse
