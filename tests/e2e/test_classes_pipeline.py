"""A tiny K = 3 sweep end to end, in process (no Snakemake, seconds): block jobs' records
-> fragments -> the cell table -> open_results (a ``spike`` dimension only in the K-class
sweep) -> theory.zarr per spike -> the analysis tables and the figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attnrmt.contract import SPIKE_FIELDS, TABLES
from attnrmt.sweep.compute.blocks import compute_cell
from attnrmt.sweep.spec import identity
from attnrmt.sweep.spec.config import validate_config
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.sweep.spec.schema import with_defaults
from attnrmt.sweep.store import fragments
from tests.e2e.helpers import tiny_config

K_SWEEP: dict[str, Any] = {
    "d": [40],
    "T": [4],
    "classes": {"K": 3, "means": [[4.0, 0.0, 0.0], [0.0, 1.4, 0.0], [0.0, 0.0, 0.0]]},
    "positional": ["iid", "pre2"],
    "weights": ["mean"],
    "snr": [0.0, 2.0, 6.0],
    "replicates": 2,
    "top_k": 3,
}


def _write_fragments(plan: Any, sweep: str, sweep_dir: Path) -> None:
    """What the block jobs write: real cells (compute_cell), one fragment per block."""
    for block in plan.sweeps[sweep].blocks:
        params = block.cells.block_params(plan.seed)
        records = [compute_cell(p["kwargs"], p["seed"]) for p in params]
        arrays = fragments.encode_fragment(
            [p["key"] for p in params],
            [identity.seed_token(p["seed"]) for p in params],
            [True] * len(params),
            records,
        )
        path = sweep_dir / fragments.FRAGMENTS_DIRNAME / f"{block.key}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        fragments.write_fragment(path, arrays)


@pytest.fixture(scope="module")
def kclasses_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from attnrmt.sweep.store.cell_table.writer import update_cell_table
    from attnrmt.sweep.store.theory import write_theory

    config = tiny_config(run="kclasses", label_models={"pre2": {"kind": "prefix", "L": 2}})
    config["sweeps"]["k3"] = K_SWEEP
    valid = validate_config(config)
    plan = plan_run(valid.config, valid.sweeps)
    root = tmp_path_factory.mktemp("results") / "kclasses"
    for sweep, sweep_plan in plan.sweeps.items():
        sweep_dir = root / sweep
        _write_fragments(plan, sweep, sweep_dir)
        update_cell_table(sweep_plan, [], sweep_dir, plan.seed)
        write_theory(sweep_plan, sweep_dir / "theory.zarr", plan.seed)
    return root, plan


def test_open_results_has_a_spike_dimension_only_in_the_k_class_sweep(
    kclasses_run: tuple[Path, Any],
) -> None:
    from attnrmt.sweep.store.cell_table.reader import open_results

    tree = open_results(kclasses_run[0])
    k_cells = tree["k3/cells"].to_dataset()
    assert k_cells.sizes["spike"] == 2  # K - 1, centred
    for name in SPIKE_FIELDS:
        assert k_cells[name].dims[-1] == "spike"
    overlaps = k_cells["spike_overlap_table"].values
    assert np.isfinite(overlaps).all() and ((overlaps >= 0) & (overlaps <= 1)).all()
    two_class = tree["grid/cells"].to_dataset()
    assert "spike" not in two_class.dims and not set(SPIKE_FIELDS) & set(two_class.variables)
    assert "classes" not in two_class.attrs
    theory = tree["k3/theory"].to_dataset()
    assert theory["spike_threshold_sample"].dims[-2:] == ("variant", "spike")
    # the strongest spike crosses first, in both variants
    sample = theory["spike_threshold_sample"].isel(snr=0).squeeze()
    assert (sample.sel(spike=1) > sample.sel(spike=0)).all()


def test_the_analysis_estimates_each_spike_and_reads_out_the_prefix_label(
    kclasses_run: tuple[Path, Any],
) -> None:
    from attnrmt.analysis.figures import Data, figure_classes_spikes
    from attnrmt.analysis.pipeline import analysis_dataset, sweep_tables
    from attnrmt.sweep.store.cell_table.reader import open_results

    tree = open_results(kclasses_run[0])
    cells = tree["k3/cells"].to_dataset().load()
    theory = tree["k3/theory"].to_dataset().load()
    analysis = analysis_dataset(cells, theory, with_defaults({"bootstrap": 20}, "analysis"))
    assert analysis["spike_threshold_estimate"].dims[-2:] == ("spike", "transition")
    assert analysis["spike_threshold_bound"].dtype == np.int8
    tables = sweep_tables(
        "k3", cells, theory, analysis, with_defaults({"bootstrap": 20}, "analysis")
    )
    assert set(tables) == set(TABLES)
    thresholds = tables["classes_thresholds"]
    assert len(thresholds) == 2 * 2 * 2  # label models x spikes x transitions
    assert set(thresholds["spike"]) == {0, 1}
    assert thresholds[["paper", "finite_vocab"]].notna().all().all()
    # analysis.zarr holds the same estimates (same bootstrap seed)
    for _, row in thresholds.iterrows():
        stored = analysis.sel(
            positional=row["positional"], spike=row["spike"], transition=row["transition"]
        )["spike_threshold_ci_low"]
        assert float(stored.squeeze()) == pytest.approx(row["ci_low"], nan_ok=True)
    assert tables["comparison"].empty and tables["thresholds"].empty  # two-class theory
    spikes = tables["classes_spikes"]
    assert set(spikes["quantity"]) == {
        "sample_eigenvalue",
        "pop_eigenvalue",
        "sample_overlap_table",
        "sample_overlap_signal",
        "pop_overlap_table",
        "pop_overlap_signal",
    }
    downstream = tables["downstream"]
    assert set(downstream["positional"]) == {"pre2"}  # only the prefix model has a class
    assert downstream["accuracy"].between(0, 1).all()
    figure = figure_classes_spikes(Data("k3", cells, theory, analysis), thresholds)
    assert len(figure.axes) == 2 * 2  # eigenvalues and overlaps, per label model


@pytest.mark.e2e
@pytest.mark.slow
def test_the_workflow_runs_a_k_class_sweep_to_its_report(tmp_path: Path) -> None:
    """Real Snakemake: the rules write the K-class tables and figure (K-class sweep only,
    so the two-class theory tables are placeholders)."""
    import pandas as pd

    from tests.e2e.helpers import Workdir

    config = tiny_config(run="kwork", label_models={"pre2": {"kind": "prefix", "L": 2}})
    config["sweeps"] = {"k3": K_SWEEP}
    workdir = Workdir.create(tmp_path, config)
    try:
        result = workdir.run(targets=())
    finally:
        workdir.close()
    assert result.computed == 2 * 3 * 2  # label models x snr x replicates
    results = tmp_path / "results" / "kwork"
    thresholds = pd.read_csv(results / "classes_thresholds.csv")
    assert set(thresholds["spike"]) == {0, 1} and len(thresholds) == 8
    assert "note" in pd.read_csv(results / "comparison.csv")  # no two-class sweep
    assert (results / "k3" / "figures" / "classes_spikes.png").stat().st_size > 10_000
