"""How an error Spark raised becomes arctic-sql's one line (no SparkSession: the texts are Spark's)."""

from __future__ import annotations

from arctic_sql.errors import ExecutionError
from arctic_sql.spark import one_line, translate

PY4J = (
    "An error occurred while calling o209.parquet.\n"
    ': org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "s3"\n'
    "\tat org.apache.hadoop.fs.FileSystem.getFileSystemClass(FileSystem.java:3581)\n"
    "\tat org.apache.hadoop.fs.FileSystem.createFileSystem(FileSystem.java:3612)\n"
)


def test_an_error_the_jvm_raised_keeps_its_java_cause_in_the_line():
    assert one_line(RuntimeError(PY4J)) == 'UnsupportedFileSystemException: No FileSystem for scheme "s3"'
    error = translate(RuntimeError(PY4J))
    assert (
        isinstance(error, ExecutionError)
        and "No FileSystem for scheme" in str(error)
        and "\n" not in str(error)
    )


def test_other_errors_keep_their_first_line_without_the_sqlstate():
    assert (
        one_line(RuntimeError("[X] Something broke. SQLSTATE: 42000\n== Plan ==")) == "[X] Something broke."
    )
    assert (
        one_line(RuntimeError("An error occurred while calling o1.x."))
        == "An error occurred while calling o1.x."
    )
    assert one_line(RuntimeError("")) == "RuntimeError"


class _JavaError(RuntimeError):
    """What py4j raises for a Java exception: its text fetches the stack trace, ``java_exception``
    is the exception itself (here its ``toString``)."""

    def __init__(self, java: str) -> None:
        super().__init__("An error occurred while calling o7.alter_partition.\n: (stack trace not fetched)")
        self.java_exception = java


def test_a_py4j_error_gives_its_java_exceptions_own_line():
    java = "org.apache.hadoop.hive.metastore.api.InvalidOperationException: alter is not possible\n\tat x"
    assert one_line(_JavaError(java)) == "InvalidOperationException: alter is not possible"
    assert one_line(_JavaError("MetaException(message:Partition not found)")) == (
        "MetaException(message:Partition not found)"
    )  # a Thrift exception's toString names no package
    assert one_line(_JavaError("")) == "_JavaError"
