"""The provenance summary of a run (attnrmt.sweep.report.provenance) and ``attnrmt
provenance``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnrmt import cli
from attnrmt.sweep.report import provenance as report_provenance
from tests.sweep.conftest import (
    CLEAN_ENVIRONMENT,
    DIRTY_ENVIRONMENT,
    encode_with_provenance,
    gather_and_open,
    store_plan,
)


def test_summary_counts_cells_by_commit_and_ranges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = store_plan()
    cells = list(plan.sweeps["grid"].cells)
    gather_and_open(
        plan,
        tmp_path / "run" / "grid",
        [encode_with_provenance(plan, cells, [CLEAN_ENVIRONMENT, DIRTY_ENVIRONMENT])],
    )
    summary = report_provenance.run_provenance(tmp_path / "run")
    assert summary["cells"] == 16 and summary["sweeps"] == {"grid": 16}
    assert summary["commits"] == {"aaaaaaaaaaaa": 8, "aaaaaaaaaaaa-dirty": 8}
    assert summary["hosts"] == {"node1": 8, "node2": 8}
    assert summary["versions"]["numpy"] == {"2.0.0": 16}
    assert summary["attempts"] == {"1": 8, "2": 8}
    assert summary["peak_memory_bytes"] == {"min": 100 * 2**20, "max": 115 * 2**20}
    assert summary["wall_seconds"]["total"] == pytest.approx(16 * 0.01)
    lines = report_provenance.provenance_lines(summary)
    assert "8 cells from commit aaaaaaaaaaaa, 8 from aaaaaaaaaaaa-dirty" in lines
    assert cli.main(["provenance", str(tmp_path / "run"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cells"] == 16
    assert cli.main(["provenance", str(tmp_path / "missing")]) == cli.EXIT_USAGE
