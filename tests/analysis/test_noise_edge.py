"""The finite-d edge of a grid's cells (docs/model.md, "What replaces the edge")."""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnrmt.analysis.comparison import comparison_table
from attnrmt.analysis.noise_edge import finite_d_edges
from attnrmt.analysis.pipeline import analysis_dataset, bulk_table, decode_bounds
from attnrmt.sweep.spec.schema import with_defaults
from attnrmt.theory import bulk_edges
from tests.analysis.synthetic import make_synthetic


def test_finite_d_edges_only_below_the_bound() -> None:
    # T = 2 (N T / V = 2) gets an edge, T = 8 (N T / V = 8) keeps the large-T one (NaN);
    # the padded positions of the shorter T are ignored
    grid = xr.Dataset(
        {
            "V": ("T", [200, 200]),
            "N": ("T", [200, 200]),
            "effective_weights": (("T", "position"), [[0.5, 0.5] + [np.nan] * 6, [1 / 8] * 8]),
        },
        coords={"d": 100, "T": [2, 8]},
    )
    mean, sd = finite_d_edges(grid)
    assert np.isnan(mean.sel(T=8)) and np.isnan(sd.sel(T=8))
    edge = float(bulk_edges(0.5, 0.5)[1])  # mean below f(u*) at d = 100, mean + sd above
    assert float(mean.sel(T=2)) < edge < float((mean + sd).sel(T=2))


def _tables(T: list[int]) -> tuple[xr.Dataset, ...]:
    """Synthetic cells (bulk quantiles of the large-T law, so the fits are exact) at ``d = 100``,
    ``delta = gamma = 0.5``, ``T`` = 2 and 8, their theory, and at the ``T`` given the analysis
    and bulk/comparison tables."""
    cells, theory = make_synthetic(d=(100,), T=(2, 8), snr=(0.0, 3.0), replicates=2, seed=3)
    cells, theory = cells.sel(T=T), theory.sel(T=T)
    analysis = analysis_dataset(cells, theory, with_defaults(None, "analysis"))
    comparison = comparison_table("s", cells, theory, decode_bounds(analysis))
    return cells, theory, analysis, bulk_table("s", analysis), comparison


def test_the_bulk_edge_is_the_finite_d_one_below_the_bound_and_f_u_star_above() -> None:
    cells, theory, analysis, bulk, comparison = _tables([2, 8])
    kappa = cells["kappa"]
    mean, _ = finite_d_edges(cells)
    upper = analysis["bulk_upper_edge_th"].isel(replicate=0)
    # below the bound (T = 2): kappa E[lambda_max], shared with the thresholds' edge_d
    small = upper.sel(T=2)
    np.testing.assert_array_equal(small, (kappa * mean).sel(T=2))
    np.testing.assert_array_equal(small, analysis["bulk_noise_top_mean"].sel(T=2))
    assert (
        abs(float(small.max() / kappa.sel(T=2).max()) / float(bulk_edges(0.5, 0.5)[1]) - 1) > 0.01
    )
    # at the bound (T = 8): f(u*) bit for bit, no finite-d edge
    large = upper.sel(T=8)
    np.testing.assert_array_equal(large, kappa.sel(T=8) * bulk_edges(1 / 2, 1 / 2)[1])
    assert analysis["bulk_noise_top_mean"].sel(T=8).isnull().all()
    rows = comparison[comparison["quantity"] == "bulk_upper_edge"].set_index(["T", "variant"])
    rows = rows.sort_index(kind="stable")  # lexsorted: no PerformanceWarning on old pandas
    top = analysis["bulk_noise_top_mean"].mean().item()
    assert (rows.loc[2, "regime"] == "finite_d").all()
    np.testing.assert_allclose(rows.loc[2, "theory"], top, rtol=1e-12)
    assert (rows.loc[8, "regime"] == "").all()
    np.testing.assert_array_equal(
        rows.loc[8, "theory"], theory["bulk_upper_edge"].sel(T=8).values.ravel()
    )
    below = comparison[
        (comparison["quantity"] == "sample_outlier") & (comparison["regime"] == "bulk")
    ]
    np.testing.assert_allclose(below[below["T"] == 2]["theory"], top, rtol=1e-12)
    # the large-T rows are those of a grid without finite-T settings, bit for bit
    *_, alone_analysis, alone_bulk, alone_comparison = _tables([8])
    assert not {"bulk_noise_top_mean", "bulk_noise_top_sd"} & set(alone_analysis.data_vars)
    big = bulk[bulk["T"] == 8].drop(columns=["bulk_noise_top_mean", "bulk_noise_top_sd"])
    pd_equal = big.reset_index(drop=True).equals(alone_bulk.reset_index(drop=True))
    assert pd_equal
    mixed = comparison[comparison["T"] == 8].reset_index(drop=True)
    alone = alone_comparison.reset_index(drop=True)
    assert mixed.drop(columns="regime").equals(alone.drop(columns="regime"))
    assert (mixed["regime"].fillna("") == alone["regime"].fillna("")).all()


def test_one_noise_top_per_setting_for_the_fit_and_the_thresholds(monkeypatch) -> None:
    from attnrmt.analysis import noise_edge

    calls = []
    monkeypatch.setattr(noise_edge, "noise_top", lambda *a, **k: calls.append(a) or (4.0, 0.1))
    noise_edge._noise_top.cache_clear()
    _, _, analysis, *_ = _tables([2])  # one setting: d = 100, V = N = 200, w = (1/2, 1/2)
    noise_edge._noise_top.cache_clear()
    assert len(calls) == 1 and float(analysis["bulk_noise_top_mean"].max()) == 4.0 * 0.5
