"""Write leases: a task's lease (no renewal) outlives a renewed lease's hold, until released."""

from __future__ import annotations

from arctic_sql.table.records import leases


def test_a_task_lease_holds_past_a_renewed_leases_hold_until_released(tmp_path, monkeypatch):
    root = str(tmp_path / "t")
    lease = leases.take(root, "write")
    assert [live.lease_id for live in leases.live_leases(root)] == [lease.lease_id]
    # A task ends long before its job commits: ten renewal periods later its files are still in flight.
    later = lease.started_ms + 10 * leases.LEASE_MS
    monkeypatch.setattr(leases, "now_ms", lambda: later)
    assert [live.lease_id for live in leases.live_leases(root)] == [lease.lease_id]
    leases.release(root, lease.lease_id)
    assert leases.live_leases(root) == []
