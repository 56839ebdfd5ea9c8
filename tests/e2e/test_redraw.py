"""Only what changed is redrawn (docs/architecture.md, "Only what changed is redrawn"):
adding one snr point to one sweep of a two-sweep run redraws that sweep's tables and
figures and leaves the other sweep's untouched (same bytes, same mtime)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from attnrmt.contract import SWEEP_FIGURES
from tests.e2e.helpers import Workdir, tiny_config, with_sweep

pytestmark = pytest.mark.e2e


def products(sweep_dir: Path) -> dict[Path, tuple[bytes, int]]:
    """A sweep's tables and figures: path -> (bytes, mtime_ns)."""
    return {
        path: (path.read_bytes(), path.stat().st_mtime_ns)
        for folder in ("tables", "figures")
        for path in sorted((sweep_dir / folder).iterdir())
    }


def test_adding_a_point_to_one_sweep_redraws_that_sweep_only(tmp_path: Path) -> None:
    config = with_sweep(tiny_config(run="redraw"), weights=["mean"])
    config["sweeps"]["other"] = {**config["sweeps"]["grid"], "delta": [0.25]}
    workdir = Workdir.create(tmp_path, config)
    try:
        workdir.run(targets=())
        before = {sweep: products(workdir.sweep_dir(sweep)) for sweep in ("grid", "other")}
        assert {path.stem for path in before["other"] if path.suffix == ".png"} == set(
            SWEEP_FIGURES
        )
        workdir.write_config(with_sweep(config, snr=[0.0, 1.0, 2.0, 3.0]))
        added = workdir.run(targets=())
    finally:
        workdir.close()
    assert added.computed == 2  # the new snr point's replicates
    assert products(workdir.sweep_dir("other")) == before["other"]
    after = products(workdir.sweep_dir("grid"))
    assert after.keys() == before["grid"].keys()
    redrawn = [path for path in after if after[path][1] != before["grid"][path][1]]
    assert redrawn == list(after)  # every table and figure of the changed sweep
    comparison = pd.read_csv(workdir.run_dir / "comparison.csv")  # the run's, concatenated
    assert set(comparison.loc[comparison["sweep"] == "grid", "snr"].dropna()) == {0, 1, 2, 3}
    assert set(comparison.loc[comparison["sweep"] == "other", "snr"].dropna()) == {0, 1, 2}
