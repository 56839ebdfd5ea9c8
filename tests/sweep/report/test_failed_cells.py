"""failed_cells.csv (attnrmt.sweep.report.failed_cells) of a real block whose cell cannot
be allocated: the cause column and the block's granted memory in its record."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from attnrmt.contract import AXES, TABLE_AXIS
from attnrmt.sweep.compute import blocks
from attnrmt.sweep.report import failed_cells
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
    params = plan.sweeps["grid"].cells.block_params(plan.seed)
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
    assert list(table.columns) == list(failed_cells.failed_cells_columns())
    assert table["cause"].tolist() == ["out_of_memory"]
    assert "MemoryError" in table["error"][0]


def test_a_run_with_a_table_sweep_names_the_law_of_each_failed_cell(tmp_path: Path) -> None:
    """A run whose sweeps differ in the ``table`` axis: the CSV has a ``table`` column
    (after ``weights``, as in the contract), the law of each failed cell of the table
    sweep, and an empty one for the sweep without it."""
    config = build_tiny_config(sweep={"table": ["gaussian", "rademacher"], "replicates": 1})
    config["sweeps"]["plain"] = {
        key: value for key, value in config["sweeps"]["grid"].items() if key != "table"
    }
    plan = plan_run(load_config(config))
    run_dir = tmp_path / "results" / "unit"
    failing = {}
    for name, sweep in plan.sweeps.items():
        cell = sweep.cells[len(sweep.cells) - 1]
        failing[name] = cell
        failure_records.record_block_failures(
            run_dir / name / "fragments" / "b.npz",
            [{"key": cell.key, "seed": "s", "error": "E()", "cause": "numerical"}],
        )
    table = failed_cells.failed_cells_table(plan, run_dir)
    columns = list(table.columns)
    assert columns == list(failed_cells.failed_cells_columns([*AXES, TABLE_AXIS]))
    assert columns.index("table") == columns.index("weights") + 1
    by_sweep = table.set_index("sweep")
    assert by_sweep.loc["grid", "table"] == failing["grid"].table == "rademacher"
    assert by_sweep.loc["grid", "cell_key"] == failing["grid"].key
    assert pd.isna(by_sweep.loc["plain", "table"])
    assert by_sweep.loc["plain", "cell_key"] == failing["plain"].key
