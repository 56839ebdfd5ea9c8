"""Failure records of blocks (attnrmt.sweep.store.failures)."""

from __future__ import annotations

from pathlib import Path

from attnrmt.sweep.store import failures as failure_records


def test_records_without_cause_read_as_other(tmp_path: Path) -> None:
    fragment = tmp_path / "grid" / "fragments" / "old.npz"
    failure_records.record_block_failures(fragment, [{"key": "k", "seed": "s", "error": "E()"}])
    (failure,) = failure_records.read_failures(tmp_path / "grid")
    assert failure["cause"] == "other"
