"""failed_cells.csv (attnrmt.sweep.report.failed_cells) of a real block whose cell cannot
be allocated: the cause column and the block's granted memory in its record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnrmt.sweep.report import failed_cells
from attnrmt.sweep.run import blocks
from attnrmt.sweep.spec.config import load_config
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.sweep.store import failures as failure_records
from tests.conftest import build_tiny_config
from tests.sweep.conftest import UNALLOCATABLE_D


def test_block_records_cause_and_granted_memory(tmp_path: Path, scheduler_address: str) -> None:
    """A real block whose cell cannot be allocated: the record says out_of_memory and the
    mem_mb the block was granted; failed_cells.csv has the cause column."""
    plan = plan_run(
        load_config(
            build_tiny_config(sweep={"d": [UNALLOCATABLE_D], "snr": [1.0], "replicates": 1})
        )
    )
    params = blocks.block_params(plan.sweeps["grid"].cells, plan.seed)
    run_dir = tmp_path / "results" / "unit"
    fragment = run_dir / "grid" / "fragments" / "poison.npz"
    with pytest.raises(RuntimeError, match="1 of 1 cells"):
        blocks.run_block(
            params,
            fragment,
            run_dir,
            {"mode": "address", "address": scheduler_address},
            mem_mb=3000,
        )
    record = failure_records.failure_record_path(fragment)
    payload = json.loads(record.read_text())
    assert payload["mem_mb"] == 3000 and payload["attempt"] == 1
    assert [cell["cause"] for cell in payload["cells"]] == ["out_of_memory"]
    table = failed_cells.failed_cells_table(plan, run_dir)
    assert list(table.columns) == list(failed_cells.FAILED_CELLS_COLUMNS)
    assert table["cause"].tolist() == ["out_of_memory"]
    assert "MemoryError" in table["error"][0]
