"""What the Snakefile's hooks call in the driving process (``attnrmt.workflow.hooks``):
each hook on real artefacts (failure records, fragments, tables), the end-to-end runs in
tests/e2e/ showing them in a run's output."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from attnrmt.sweep.compute.failures import FailureBudget
from attnrmt.sweep.store import failures as failure_records
from attnrmt.workflow import hooks
from tests.sweep.conftest import store_plan, write_block_fragments, write_failed_block


@pytest.mark.parametrize(
    ("content", "has_data"),
    [
        ("alpha,beta\n1,2\n", True),
        ("alpha,beta\n", False),  # a header only
        ("note\nno threshold could be fitted\n", False),  # the analysis's placeholder
        ("", False),
    ],
)
def test_a_table_without_rows_is_not_reported(tmp_path: Path, content: str, has_data: bool) -> None:
    table = tmp_path / "thresholds.csv"
    table.write_text(content)
    assert hooks.table_has_data(str(table)) is has_data


def test_a_table_not_written_yet_counts_as_data(tmp_path: Path) -> None:
    assert hooks.table_has_data(str(tmp_path / "later.csv")) is True


def test_the_max_failures_message_is_printed_once_the_budget_is_spent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    failure_records.mark_run_started(run_dir)
    budget = FailureBudget(limit=2, n_cells=10)
    write_failed_block(run_dir, "grid", "b1", ["numerical"])
    hooks.print_max_failures_message(budget, str(run_dir))
    assert capsys.readouterr().err == ""
    write_failed_block(run_dir, "grid", "b2", ["numerical"])
    hooks.print_max_failures_message(budget, str(run_dir))
    assert capsys.readouterr().err.startswith("attnrmt: max_failures reached: 2 of 10 cells")


def test_the_end_summary_waits_for_the_driver_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = store_plan()
    run_dir = tmp_path / "results" / "unit"
    monkeypatch.setenv(hooks.END_SUMMARY_VARIABLE, "later")
    hooks.print_end_summary(plan, 0.0, "config.yaml", str(run_dir))
    assert capsys.readouterr().err == ""
    monkeypatch.delenv(hooks.END_SUMMARY_VARIABLE)
    hooks.print_end_summary(plan, 0.0, "config.yaml", str(run_dir))
    assert "config.yaml" in capsys.readouterr().err


def test_finished_cells_of_a_failed_run_are_stored_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = store_plan()
    run_dir = tmp_path / "results" / "unit"
    n_cells = len(plan.sweeps["grid"].cells)
    fragments = write_block_fragments(plan, run_dir / "grid")
    fragments[-1].unlink()  # the last block did not finish
    hooks.report_finished_cells(plan, str(run_dir))
    (line,) = capsys.readouterr().err.splitlines()
    stored = n_cells - len(plan.sweeps["grid"].blocks[-1].cells)
    assert (
        line == f"attnrmt: grid: {stored}/{n_cells} finished cells stored (open_results shows them)"
    )


def test_a_remote_block_job_does_nothing_after_its_block(tmp_path: Path) -> None:
    """``remote``: a SLURM job's own Snakemake, which has no progress line or cluster."""
    hooks.after_block("unused.npz", None, str(tmp_path), None, remote=True)
    assert list(tmp_path.iterdir()) == []


def test_the_exit_collection_skips_the_heap() -> None:
    try:
        hooks.skip_exit_collection()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_cell_cache_is_pruned_to_max_gb_after_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from attnrmt.sweep.store import cell_cache
    from tests.sweep.store.test_cell_cache import block_columns

    arrays, ids = block_columns(3)
    cell_cache.write_cells(tmp_path, [arrays], {i: (0, r) for r, i in enumerate(ids)}, ids)
    size = cell_cache.cache_bytes(tmp_path)
    hooks.prune_cell_cache(None, {})  # the cache off: nothing to do
    hooks.prune_cell_cache(tmp_path, {"cell_cache": {"max_gb": (size + 0.5) / 1e9}})
    assert cell_cache.cache_bytes(tmp_path) == size and capsys.readouterr().err == ""
    hooks.prune_cell_cache(tmp_path, {"cell_cache": {"max_gb": (size - 0.5) / 1e9}})
    assert cell_cache.cache_bytes(tmp_path) < size
    assert "least recently used cells evicted" in capsys.readouterr().err
