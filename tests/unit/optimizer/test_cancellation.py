"""Cancelling an optimizing process: the state machine's moves, and the race between a cancel and
the start of a commit (one of them wins, never both). No Spark: the Spark side is
tests/e2e/test_service_cancel.py."""

from __future__ import annotations

import pytest

from arctic_sql.errors import ArcticError, ExecutionError, failure_summary, full_message
from arctic_sql.optimizer import cancellation
from arctic_sql.optimizer.cancellation import OptimizingCancelledError
from arctic_sql.table.records import optimizing_processes as state


def test_only_a_process_that_has_not_begun_committing_can_be_cancelled():
    assert state.CANCELLED in state.TRANSITIONS[state.PLANNED]
    assert state.CANCELLED in state.TRANSITIONS[state.EXECUTING]
    assert state.CANCELLED not in state.TRANSITIONS[state.COMMITTING]
    assert state.CANCELLED not in state.ACTIVE


def test_a_cancel_before_the_commit_wins():
    token = cancellation.register("p-1", None, "optimize-p-1")
    try:
        assert cancellation.request("p-1") == cancellation.CANCELLING
        assert cancellation.request("p-1") == cancellation.CANCELLING  # asking twice is harmless
        with pytest.raises(OptimizingCancelledError), cancellation.committing(token):
            pytest.fail("a cancelled process must not commit")
    finally:
        cancellation.unregister(token)
    assert cancellation.request("p-1") == cancellation.ELSEWHERE  # it has ended


def test_a_commit_that_has_begun_refuses_the_cancel():
    token = cancellation.register("p-2", None, "optimize-p-2")
    try:
        with cancellation.committing(token):
            assert cancellation.request("p-2") == cancellation.COMMITTING
        assert not token.cancelled.is_set()
    finally:
        cancellation.unregister(token)


def test_a_process_of_another_python_process_is_elsewhere():
    assert cancellation.request("not-here") == cancellation.ELSEWHERE


def test_a_failure_keeps_a_useful_line_and_its_whole_message():
    jvm = (
        "An error occurred while calling o93.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times\n"
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "node_merge.py", line 80, in read_node\n'
        "FileNotFoundError: [Errno 2] Failed to open local file '/w/db/t/change/data/x.parquet'\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(x.scala:1)\n"
    )
    try:
        try:
            raise RuntimeError(jvm)
        except RuntimeError as inner:
            raise ExecutionError(
                "Optimizing db.t failed after 1 attempt(s): An error occurred while calling "
                "o93.collectToPython."
            ) from inner
    except ArcticError as e:
        summary, detail = failure_summary(e), full_message(e)
    assert "\n" not in summary
    assert summary == (
        "Optimizing db.t failed after 1 attempt(s): An error occurred while calling "
        "o93.collectToPython.: FileNotFoundError: [Errno 2] Failed to open local file "
        "'/w/db/t/change/data/x.parquet'"
    )
    assert "Job aborted due to stage failure" in detail and "handlePythonException" in detail
