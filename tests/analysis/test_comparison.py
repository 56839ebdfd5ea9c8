"""Comparison tables against both variants
(docs/model.md, "What the pipeline tests") on synthetic stores."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from attnrmt.analysis.comparison import (
    COMPARISON_COLUMNS,
    THRESHOLD_COLUMNS,
    comparison_table,
    complete_theory,
    theory_from_cells,
    thresholds_table,
    variant_summary,
)
from attnrmt.analysis.pipeline import analysis_dataset, decode_bounds
from attnrmt.sweep.spec.schema import with_defaults
from attnrmt.theory import spike
from tests.analysis.synthetic import make_synthetic

SNR = tuple(np.linspace(0.0, 3.0, 9))


Planted = tuple[str, xr.Dataset, xr.Dataset, xr.Dataset]


def planted_run(variant: str, seed: int) -> Planted:
    """Synthetic cells planted from ``variant`` (noise 0.005, seed of the noise), analysed."""
    cells, theory = make_synthetic(
        d=(120, 240),
        snr=SNR,
        positional={"p4": {"kind": "prefix", "L": 4}, "iid": {"kind": "iid"}},
        weights={"mean": "mean"},
        replicates=3,
        variant=variant,
        noise=0.005,
        seed=seed,
    )
    analysis = decode_bounds(
        analysis_dataset(cells, theory, with_defaults({"bootstrap": 30}, "analysis"))
    )
    return variant, cells, theory, analysis


@pytest.fixture(scope="module", params=["paper", "finite_vocab"])
def planted_variant(request: pytest.FixtureRequest) -> Planted:
    return planted_run(request.param, 0)


def test_theory_from_cells_matches_spike(small_synthetic) -> None:
    cells, _ = small_synthetic
    theory = theory_from_cells(cells)
    point = dict(d=100, snr=2.0, variant="paper")
    got = theory.sel(point).squeeze()
    alpha, kappa = float(cells["alpha"].max()), float(cells["kappa"].max())
    want = spike(0.5, 0.5, 2.0, alpha, kappa, variant="paper")
    assert float(got["sample_outlier"]) == pytest.approx(float(want.sample_outlier))
    assert float(got["threshold_snr_sample"]) == pytest.approx(float(want.threshold_snr_sample))


def test_complete_theory_only_fills_missing_variables(small_synthetic) -> None:
    cells, theory = small_synthetic
    partial = theory.drop_vars(["mean_spike_outlier", "pop_bulk_edge"])
    partial["sample_outlier"] = partial["sample_outlier"] * 2.0
    completed = complete_theory(partial, cells)
    xr.testing.assert_allclose(completed["mean_spike_outlier"], theory["mean_spike_outlier"])
    xr.testing.assert_identical(completed["sample_outlier"], partial["sample_outlier"])


def test_comparison_table_is_tidy_and_names_the_planted_variant(planted_variant) -> None:
    """Pass rate over disjoint noise seeds (benchmarks/seed_groups.py, both variants per
    seed): 10/10 (seeds 0-9)."""
    check_comparison_table(planted_variant)


def check_comparison_names_the_planted_variant(seeds: tuple[int, ...]) -> None:
    for seed in seeds:
        for variant in ("paper", "finite_vocab"):
            check_comparison_table(planted_run(variant, seed))


def check_comparison_table(planted: Planted) -> None:
    variant, cells, theory, analysis = planted
    table = comparison_table("s", cells, theory, analysis)
    assert tuple(table.columns) == COMPARISON_COLUMNS
    assert set(table["variant"]) == {"paper", "finite_vocab"}
    for quantity in (
        "population_outlier",
        "sample_outlier",
        "population_overlap",
        "sample_overlap",
        "bulk_upper_edge",
        "threshold_population",
        "theta_offset_sample",
    ):
        assert quantity in set(table["quantity"])
    np.testing.assert_allclose(table["abs_error"], (table["empirical"] - table["theory"]).abs())
    summary = variant_summary(table)
    outl = summary[summary["quantity"] == "sample_outlier"].set_index("variant")
    other = "paper" if variant == "finite_vocab" else "finite_vocab"
    assert outl.loc[variant, "median_rel_error"] < 0.02
    assert outl.loc[variant, "median_rel_error"] < outl.loc[other, "median_rel_error"]


def test_thresholds_table_contains_both_variants_and_finite_size(planted_variant) -> None:
    variant, cells, theory, analysis = planted_variant
    table = thresholds_table("s", cells, theory, analysis)
    assert tuple(table.columns) == THRESHOLD_COLUMNS
    assert set(table["transition"]) == {"population", "sample"}
    fss = table[table["finite_size"] != "none"]
    assert len(fss) == 4 and np.all(np.isinf(fss["d"]))
    iid = table[(table["positional"] == "iid") & (table["finite_size"] == "none")]
    # iid pooling: alpha/kappa = 1, all thresholds inside [0, 3], estimates not bounds
    assert (iid["bound"] == "none").all()
    assert iid[f"consistent_{variant}"].mean() >= 0.5
    np.testing.assert_allclose(iid["estimate"], iid[f"theory_{variant}"], atol=0.08)


def test_a_theory_that_moves_with_d_has_no_d_to_inf_row(planted_variant) -> None:
    """A sample threshold theory doubling from d = 120 to 240 (a table law's spectrum that
    depends on d) has no d -> inf value to compare with; the population one still has."""
    _, cells, theory, analysis = planted_variant
    moved = theory.assign(threshold_snr_sample=theory["threshold_snr_sample"] * theory["d"] / 120)
    table = thresholds_table("s", cells, moved, analysis)
    limit = table[np.isinf(table["d"])]
    sample = limit[limit["transition"] == "sample"]
    assert sample["finite_size"].str.contains("the theory depends on d").all()
    assert sample[["theory_paper", "theory_finite_vocab"]].isna().all().all()
    population = limit[limit["transition"] == "population"]
    assert population[["theory_paper", "theory_finite_vocab"]].notna().all().all()
    assert not population["finite_size"].str.contains("depends").any()


def test_settings_below_the_large_t_bound_are_flagged() -> None:
    # N T/V = T delta / gamma is 8 (the bound: large_T) at gamma 0.5 and 4 at gamma 1
    cells, theory = make_synthetic(d=(120,), gamma=(0.5, 1.0), snr=SNR, replicates=2)
    analysis = decode_bounds(
        analysis_dataset(cells, theory, with_defaults({"bootstrap": 10}, "analysis"))
    )
    for table in (
        thresholds_table("s", cells, theory, analysis),
        comparison_table("s", cells, theory, analysis),
    ):
        flagged = table.groupby("gamma")["bulk_regime"].unique()
        assert list(flagged.loc[0.5]) == ["large_T"] and list(flagged.loc[1.0]) == ["finite_T"]


# disjoint seed groups: python -m benchmarks.seed_groups tests.analysis.test_comparison
SEED_GROUP_CHECKS = {
    "comparison_names_the_planted_variant": (check_comparison_names_the_planted_variant, (0,)),
}
