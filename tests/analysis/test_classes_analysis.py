"""Successive K-class thresholds on planted data (attnrmt.analysis.classes): cells whose
top eigenvalues are the finite-vocabulary theory's, with replicate noise, must give back
each spike's threshold inside its CI, and tell it apart from the paper variant's."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from attnrmt.analysis.classes import spike_comparison, spike_theta_hat, spike_thresholds
from attnrmt.contract import AXES
from attnrmt.model.classes import class_sizes
from attnrmt.theory import predict_classes_grid

K = 3
G = [[4.0, 0.0, 0.0], [0.0, 1.4, 0.0], [0.0, 0.0, 0.0]]
SNR = [0.2, 0.5, 0.8, 1.1, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0]
AXES_VALUES = {
    "d": [800],
    "delta": [0.5],
    "gamma": [0.5],
    "T": [8],
    "positional": ["iid"],
    "weights": ["mean"],
    "snr": SNR,
    "centered": [True],
}
SPEC = {"kind": "classes", "K": K, "means": G, "labels": {"kind": "iid", "p": [1 / 3] * 3}}
REPLICATES = 8
#: Relative replicate noise of the planted eigenvalues: 0.5%, the spread measured for
#: the outliers of d = 800 K-class cells (configs/k-classes.yaml: sem x sqrt(8) / value
#: of the top two eigenvalues above threshold, 0.3-0.8%).
NOISE = 0.005


@pytest.fixture(scope="module")
def planted_classes() -> tuple[xr.Dataset, xr.Dataset]:
    theory = predict_classes_grid(
        AXES_VALUES, {("iid", 8): SPEC}, {("mean", 8): {"kind": "mean"}}, spikes=K - 1
    )
    fv = theory.sel(variant="finite_vocab")
    rng = np.random.default_rng(11)
    shape = (*(len(AXES_VALUES[a]) for a in AXES), REPLICATES)

    def planted_top(name: str) -> np.ndarray:
        mean = fv[name].transpose(*AXES, "spike").values  # (..., spike)
        values = np.broadcast_to(mean[..., None, :], (*shape, K - 1))
        noisy = values * (1.0 + NOISE * rng.standard_normal(values.shape))
        bulk = np.full((*shape, 1), float(noisy.min()) * 0.99)  # a third, bulk eigenvalue
        return np.concatenate([noisy, bulk], axis=-1)

    V, N = class_sizes(800, 0.5, 0.5, K)
    dims = (*AXES, "replicate", "k")
    cells = xr.Dataset(
        {
            "top_eigenvalues": (dims, planted_top("spike_sample_eigenvalue")),
            "pop_top_eigenvalues": (dims, planted_top("spike_pop_eigenvalue")),
            "kappa": (AXES, np.full(shape[:-1], 1.0 / 8)),
            "V": (AXES, np.full(shape[:-1], V)),
            "N": (AXES, np.full(shape[:-1], N)),
        },
        coords={**AXES_VALUES, "replicate": np.arange(REPLICATES), "k": np.arange(K)},
        attrs={"classes": json.dumps({"K": K, "means": G, "spikes": K - 1})},
    )
    return cells, theory


def test_theta_hat_has_one_entry_per_spike(planted_classes: tuple[xr.Dataset, xr.Dataset]) -> None:
    cells, _ = planted_classes
    theta = spike_theta_hat(cells)
    assert theta.sizes["spike"] == K - 1 and list(theta["transition"].values) == [
        "population",
        "sample",
    ]
    with pytest.raises(ValueError, match="not a K-class sweep"):
        spike_theta_hat(cells.assign_attrs(classes=""))


def test_successive_thresholds_are_recovered_inside_their_cis(
    planted_classes: tuple[xr.Dataset, xr.Dataset],
) -> None:
    cells, theory = planted_classes
    table = spike_thresholds("planted", cells, theory, margin=0.1, n_boot=200, level=0.95, seed=0)
    assert len(table) == 4  # two spikes x two transitions
    assert set(table["bound"]) == {"none"}
    # every planted (finite_vocab) threshold inside its CI; the paper one outside
    assert table["contains_finite_vocab"].all()
    assert not table["contains_paper"].any()
    sample = table[table["transition"] == "sample"].set_index("spike")
    # two successive transitions: spike 1 crosses at a larger snr than spike 0
    assert sample.loc[1, "estimate"] > 3 * sample.loc[0, "estimate"]
    # the estimates are the planted thresholds to within 5% (noise 0.5% of the
    # eigenvalues; the line fit above threshold is exact for the affine theta)
    np.testing.assert_allclose(table["estimate"], table["finite_vocab"], rtol=0.05)


def test_a_curve_without_detected_points_is_a_bound(
    planted_classes: tuple[xr.Dataset, xr.Dataset],
) -> None:
    cells, theory = planted_classes
    low = cells.sel(snr=SNR[:8])  # snr <= 4: spike 1 (sample threshold ~6.1) never crosses
    table = spike_thresholds("low", low, theory.sel(snr=SNR[:8]), margin=0.1, n_boot=50,
                             level=0.95, seed=0)  # fmt: skip
    row = table[(table["spike"] == 1) & (table["transition"] == "sample")].iloc[0]
    assert row["bound"] == "above" and row["ci_low"] == SNR[7] and row["contains_finite_vocab"]


def test_the_comparison_matches_planted_eigenvalues(
    planted_classes: tuple[xr.Dataset, xr.Dataset],
) -> None:
    cells, theory = planted_classes
    cells = cells.assign(
        **{
            name: cells["top_eigenvalues"].isel(k=slice(0, K - 1)).rename(k="spike") * 0 + 0.5
            for name in (
                "spike_overlap_table",
                "spike_overlap_signal",
                "spike_pop_overlap_table",
                "spike_pop_overlap_signal",
            )
        }
    )
    table = spike_comparison("planted", cells, theory)
    eig = table[(table["quantity"] == "sample_eigenvalue") & (table["variant"] == "finite_vocab")]
    assert len(eig) == len(SNR) * (K - 1)
    # planted from finite_vocab with 0.5% noise: the replicate mean is within 4 sem-s of
    # 0.5%/sqrt(8) = 0.18% of it
    assert float(eig["rel_error"].max()) < 4 * NOISE / np.sqrt(REPLICATES)
    assert set(table["quantity"]) >= {"sample_overlap_table", "sample_overlap_signal"}


def test_each_overlap_is_compared_with_its_own_variant(
    planted_classes: tuple[xr.Dataset, xr.Dataset],
) -> None:
    """The table overlaps are finite_vocab's prediction and the signal overlaps the paper's
    (docs/model.md, "Two variants of the theory"): cells planted with exactly those give
    zero error on every overlap row, and each row names the variant it is held to."""
    cells, theory = planted_classes
    predicted = {
        variant: theory["spike_sample_overlap"].sel(variant=variant, drop=True)
        for variant in ("finite_vocab", "paper")
    }
    pop = {
        variant: theory["spike_pop_overlap"].sel(variant=variant, drop=True)
        for variant in ("finite_vocab", "paper")
    }
    reps = xr.ones_like(cells["top_eigenvalues"].isel(k=slice(0, K - 1)).rename(k="spike"))
    cells = cells.assign(
        spike_overlap_table=reps * predicted["finite_vocab"],
        spike_overlap_signal=reps * predicted["paper"],
        spike_pop_overlap_table=reps * pop["finite_vocab"],
        spike_pop_overlap_signal=reps * pop["paper"],
    )
    table = spike_comparison("planted", cells, theory)
    overlaps = table[table["quantity"].str.contains("overlap") & (table["theory"] > 0.05)]
    expected = {"table": "finite_vocab", "signal": "paper"}
    for quantity, rows in overlaps.groupby("quantity"):
        assert set(rows["variant"]) == {expected[str(quantity).rsplit("_", 1)[1]]}
        assert float(rows["rel_error"].max()) < 1e-9, quantity
    assert set(overlaps["quantity"]) == {
        "sample_overlap_table",
        "sample_overlap_signal",
        "pop_overlap_table",
        "pop_overlap_signal",
    }


def test_a_file_tables_theta_hat_inverts_the_theorys_eigenvalue_map() -> None:
    """The theory's own eigenvalues at the swept snr map back to ``rho^2 + snr``; at or
    inside the edge to ``theta_c = rho^2 + snr*``; beyond the last point linearly."""
    from attnrmt.analysis.classes import _file_theta_hat

    snr = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    forward = np.array([0.5, 0.5, 0.52, 0.6, 0.7])  # edge 0.5 below snr* = 0.8
    measured = np.column_stack([forward, [0.4, 0.5, 0.56, 0.8, np.nan]])
    theta, theta_c = _file_theta_hat(measured, forward, np.full(5, 0.8), snr, 1.5)
    assert theta_c == 2.3
    np.testing.assert_allclose(theta[2:, 0], 1.5 + snr[2:])
    np.testing.assert_allclose(theta[:2, 0], 2.3)  # the edge: theta_c
    np.testing.assert_allclose(theta[:4, 1], [2.3, 2.3, 1.5 + 1.5, 1.5 + 4.0])
    assert np.isnan(theta[4, 1])
