"""A zipped sweep end to end (docs/getting-started.md, "Zipped axes"): ``zip: [[delta,
gamma]]`` computes the cells of the paired values only, each the same cell (key, seed,
numbers) as in the Cartesian sweep, and the whole pipeline (stores, analysis, tables,
figures) runs on it; ``open_results`` has the product's coordinates with the
unpaired points absent (NaN, ``cell_key`` '')."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnrmt.sweep.store import open_results
from tests.e2e.helpers import Workdir, tiny_config, with_sweep

pytestmark = pytest.mark.e2e

DELTA, GAMMA = [0.25, 0.5], [0.5, 1.0]


def test_zipped_sweep_runs_the_paired_points_only(tmp_path) -> None:
    config = with_sweep(tiny_config(run="zipped"), delta=DELTA, gamma=GAMMA, weights=["mean"])
    config["sweeps"]["product"] = dict(config["sweeps"]["grid"])
    config["sweeps"]["grid"]["zip"] = [["delta", "gamma"]]
    workdir = Workdir.create(tmp_path, config)
    try:
        result = workdir.run(targets=())
    finally:
        workdir.close()
    per_line = 3 * 2  # snr x replicates
    # the zipped sweep's 2 lines and the product's 4 (the two sweeps may both compute a
    # cell they share: they run concurrently)
    assert result.computed + result.reused == (2 + 4) * per_line
    assert result.computed >= 4 * per_line
    tree = open_results(workdir.run_dir)
    zipped = tree["grid/cells"].to_dataset()
    product = tree["product/cells"].to_dataset()
    assert zipped.sizes["delta"] == zipped.sizes["gamma"] == 2
    for i, delta in enumerate(DELTA):
        for j, gamma in enumerate(GAMMA):
            point = {"delta": delta, "gamma": gamma}
            stored = zipped["top_eigenvalues"].sel(point)
            if i == j:
                expected = product["top_eigenvalues"].sel(point)
                np.testing.assert_array_equal(stored.values, expected.values)
                assert (zipped["cell_key"].sel(point).values != "").all()
            else:
                assert np.isnan(stored.values).all()
                assert (zipped["cell_key"].sel(point).values == "").all()
    # the analysis of a paired setting is the product's (same cells); an unpaired one is
    # an empty row (no cell: nothing detected, no estimate)
    columns = ["transition", "estimate", "ci_low", "ci_high", "bound", "n_detected"]
    thresholds = pd.read_csv(workdir.run_dir / "thresholds.csv")
    paired = np.isin(thresholds["delta"], DELTA[:1]) == np.isin(thresholds["gamma"], GAMMA[:1])
    of = {name: thresholds[thresholds["sweep"] == name] for name in ("grid", "product")}
    pd.testing.assert_frame_equal(
        of["grid"][paired[of["grid"].index]][columns].reset_index(drop=True),
        of["product"][paired[of["product"].index]][columns].reset_index(drop=True),
    )
    assert of["grid"][~paired[of["grid"].index]]["n_detected"].isna().all()
