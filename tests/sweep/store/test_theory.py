"""theory.zarr (attnrmt.sweep.store.theory): the spike predictions of every setting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnrmt.sweep import store
from attnrmt.theory import bulk_edges, mean_spike, spike
from tests.sweep.conftest import (
    store_plan,
)


def test_theory_matches_spike_predictions(tmp_path: Path) -> None:
    plan = store_plan(d=[40])
    sweep = plan.sweeps["grid"]
    out = store.write_theory(sweep, tmp_path / "theory.zarr", plan.seed)
    theory = xr.open_zarr(out).load()
    assert theory.variant.values.tolist() == ["paper", "finite_vocab"]
    assert "replicate" not in theory.dims
    point = theory.sel(d=40, delta=0.5, gamma=0.5, T=3, positional="prefix2", centered=True)
    # mean weights on T=3 with prefix L=2: alpha = (1/9) * (4 + 1) = 5/9, kappa = 1/3
    alpha, kappa = point.alpha.sel(weights="mean").item(), point.kappa.sel(weights="mean").item()
    assert alpha == pytest.approx(5 / 9) and kappa == pytest.approx(1 / 3)
    delta_eff = theory.delta_effective.item()
    gamma_eff = theory.gamma_effective.item()
    for variant in ("paper", "finite_vocab"):
        expected = spike(delta_eff, gamma_eff, 2.0, alpha, kappa, variant=variant)
        got = point.sel(weights="mean", snr=2.0, variant=variant)
        assert got.threshold_snr_sample.item() == pytest.approx(expected.threshold_snr_sample)
        np.testing.assert_allclose(got.sample_outlier.item(), expected.sample_outlier)
    _, upper = bulk_edges(delta_eff, gamma_eff)
    assert point.bulk_upper_edge.sel(weights="mean", snr=0.0, variant="paper").item() == (
        pytest.approx(kappa * upper)
    )
    # the mean spike exists only for uncentred S
    assert np.isnan(theory.mean_spike_outlier.sel(centered=True)).all()
    sigma = point.sigma.sel(weights="mean").item()
    expected_mean = mean_spike(delta_eff, gamma_eff, sigma, kappa)
    np.testing.assert_allclose(
        theory.mean_spike_pop_outlier.sel(
            d=40, delta=0.5, gamma=0.5, T=3, positional="prefix2", weights="mean", snr=0.0
        ).sel(centered=False),
        expected_mean.population_outlier,
    )
    assert (theory.alpha.sel(weights="causal1") > 0).all()  # causal_attention -> its limit


def test_a_k_class_sweep_on_the_shipped_k3_file_table_has_its_theory(tmp_path: Path) -> None:
    """plan -> cells -> update_cell_table -> theory.zarr -> classes_spikes rows on the shipped
    180 x 60 K = 3 table (docs/model.md, "Tables from a file"): population rows exact (1e-9),
    the two sample outliers' mean within 4 SE + 1% (at N = 120 sorting the two close
    outliers biases each apart by ~ +3% / -5%, their mean ~ -1%: tests/theory/
    test_file_table.py); sample overlaps on the spike span within 4 SE + 0.01 (on each spike's
    own direction the two close spikes' eigenvectors turn in their plane: docs/model.md);
    sample thresholds
    those of file_class_spikes, population NaN; the analysis fits sample thresholds only
    (no two-class file bulk). At snr 0 (no outlier) the top eigenvalue is the
    bulk edge within 4 SE + 2% (finite-N edge fluctuations, ~ N^(-2/3))."""
    from attnrmt.analysis.classes import spike_comparison
    from attnrmt.analysis.pipeline import analysis_dataset
    from attnrmt.model.table_laws import validate_table
    from attnrmt.sweep.compute.blocks import compute_cell
    from attnrmt.sweep.spec import identity
    from attnrmt.sweep.spec.config import validate_config
    from attnrmt.sweep.spec.plan import plan_run
    from attnrmt.sweep.spec.schema import with_defaults
    from attnrmt.sweep.store import fragments
    from attnrmt.sweep.store.cell_table.reader import open_results
    from attnrmt.sweep.store.cell_table.writer import update_cell_table
    from attnrmt.theory.classes import file_class_spikes
    from tests.conftest import build_tiny_config

    data = Path(__file__).parents[2] / "data"
    law = {"kind": "file", "path": str(data / "small_table3.npy")}
    law["labels"] = str(data / "small_table3_labels.npy")
    config = build_tiny_config(run="k3file", table_models={"t3": law})
    config["sweeps"] = {"k3": {
        "classes": {"K": 3}, "d": [60], "delta": [1 / 3], "gamma": [0.5], "T": [8],
        "positional": ["iid"], "weights": ["mean"], "snr": [0.0, 4.0], "replicates": 24,
        "top_k": 3, "table": ["t3"],
    }}  # fmt: skip
    valid = validate_config(config)
    plan = plan_run(valid.config, valid.sweeps)
    sweep_dir = tmp_path / "k3file" / "k3"
    for block in plan.sweeps["k3"].blocks:
        params = block.cells.block_params(plan.seed)
        keys, seeds = [p["key"] for p in params], [identity.seed_token(p["seed"]) for p in params]
        records = [compute_cell(p["kwargs"], p["seed"]) for p in params]
        path = sweep_dir / fragments.FRAGMENTS_DIRNAME / f"{block.key}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = fragments.encode_fragment(keys, seeds, [True] * len(params), records)
        fragments.write_fragment(path, arrays)
    update_cell_table(plan.sweeps["k3"], [], sweep_dir, plan.seed)
    store.write_theory(plan.sweeps["k3"], sweep_dir / "theory.zarr", plan.seed)
    tree = open_results(tmp_path / "k3file")
    cells, theory = tree["k3/cells"].to_dataset().load(), tree["k3/theory"].to_dataset().load()
    assert theory["spike_threshold_population"].isnull().all()  # a given table has none
    found = file_class_spikes(validate_table(law), "iid", "mean", 8, 4.0, 0.5)
    stored = theory["spike_threshold_sample"].sel(variant="paper").squeeze()
    np.testing.assert_array_equal(stored.sel(snr=0.0)[:2], found["sample_threshold"])
    np.testing.assert_array_equal(stored.sel(snr=4.0)[:2], found["sample_threshold"])
    analysis = analysis_dataset(cells, theory, with_defaults({"bootstrap": 20}, "analysis"))
    fitted = analysis["spike_threshold_n_detected"]  # sample rows only, by the file's maps
    assert fitted.sel(transition="population").isnull().all()
    assert fitted.sel(transition="sample").notnull().all()
    rows = spike_comparison("k3", cells, theory).set_index(["quantity", "variant", "spike"])
    rows = rows.sort_index()
    edge = rows[rows["snr"] == 0].loc[("sample_eigenvalue", "paper", 0)]  # no outlier: the edge
    assert abs(edge["measured"] - edge["theory"]) < 4 * edge["sem"] + 0.02 * edge["theory"]
    rows = rows[rows["snr"] == 4.0]
    assert rows["theory"].notna().all() and len(rows) == 2 * 6 + 2 * 2
    for variant in ("paper", "finite_vocab"):
        pop = rows.loc[("pop_eigenvalue", variant)]
        np.testing.assert_allclose(pop["measured"], pop["theory"], rtol=1e-9)
        sample = rows.loc[("sample_eigenvalue", variant)]
        error = abs(sample["measured"].mean() - sample["theory"].mean())
        assert error < 4 * sample["sem"].max() + 0.01 * sample["theory"].mean(), sample
    for quantity in ("pop_overlap_table", "pop_overlap_signal"):
        pop = rows.xs(quantity, level="quantity")
        np.testing.assert_allclose(pop["measured"], pop["theory"], atol=1e-9)
    for quantity in ("sample_overlap_table", "sample_overlap_signal"):  # on the span
        sample = rows.xs(quantity, level="quantity")
        error = (sample["measured"] - sample["theory"]).abs()
        assert (sample["theory"] > 0.8).all() and (error < 4 * sample["sem"] + 0.01).all(), sample
    from attnrmt.analysis.classes import spike_thresholds
    from attnrmt.analysis.figures import Data, figure_classes_spikes

    bands = spike_thresholds("k3", cells, theory, margin=0.1, n_boot=20, level=0.95, seed=0)
    figure = figure_classes_spikes(Data("k3", cells, theory, analysis), bands)
    plotted = figure.axes[1].lines[0].get_ydata()  # spike 0's overlap points against snr
    span = cells["overlap_class_mean"].isel(k=0).squeeze().mean("replicate")
    np.testing.assert_allclose(plotted, span.transpose("snr").values, rtol=1e-12)
