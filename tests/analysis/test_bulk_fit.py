"""Bulk fit (docs/model.md, "Bulk law") on synthetic spectra with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from attnrmt.analysis.bulk_fit import bulk_fit, ks_distance, ks_distances
from attnrmt.theory import bulk_atom, bulk_edges
from tests.analysis.synthetic import bulk_quantiles, make_synthetic

#: The schema's default ``analysis.bulk_margin`` is 0.05; these tests fix their own.
MARGIN = 0.05
#: The zero tolerance of the batched-vs-definition test (the schema default, written out).
ZERO_TOL = 1e-9


@pytest.mark.parametrize(("delta", "gamma"), [(0.5, 0.5), (0.25, 2.0), (2.0, 0.5), (2.0, 2.0)])
def test_ks_of_exact_quantiles_is_half_a_step(delta: float, gamma: float) -> None:
    n = 400
    kappa = 0.3
    spectrum = kappa * bulk_quantiles(n, delta, gamma)
    fit = ks_distance(spectrum, delta, gamma, kappa, margin=MARGIN)
    n_bulk = n * (1 - float(bulk_atom(delta, gamma)))
    # mid-quantiles: the empirical CDF is within half a step of the law (plus bisection slack)
    assert fit["ks"] <= 0.5 / n_bulk + 2e-3
    assert fit["zero_fraction"] == pytest.approx(float(bulk_atom(delta, gamma)), abs=1.5 / n)
    assert fit["n_outliers"] == 0
    lower, upper = bulk_edges(delta, gamma)
    # the top mid-quantile sits O(n^(-2/3)) below the square-root edge
    assert fit["upper_edge"] == pytest.approx(kappa * float(upper), rel=0.06)
    if float(lower) > 0:
        assert fit["lower_edge"] == pytest.approx(kappa * float(lower), rel=0.5)


def test_outliers_above_the_edge_margin_are_excluded() -> None:
    spectrum = bulk_quantiles(300, 0.5, 0.5)
    _, upper = bulk_edges(0.5, 0.5)
    spiked = spectrum.copy()
    spiked[-2:] = [1.2 * float(upper), 2.0 * float(upper)]
    fit = ks_distance(spiked, 0.5, 0.5, 1.0, margin=MARGIN)
    assert fit["n_outliers"] == 2
    assert fit["upper_edge"] < float(upper) * 1.05


def test_the_outlier_cutoff_follows_a_given_edge() -> None:
    # below the large-T bound the edge is the finite-d one (docs/model.md, "What replaces the
    # edge"): an eigenvalue 10% above f(u*) is bulk against an edge 10% above it, NaN keeps f(u*)
    spectrum = bulk_quantiles(300, 0.5, 0.5)
    upper = float(bulk_edges(0.5, 0.5)[1])
    spectrum[-1] = 1.1 * upper
    ratios = (np.array([0.5]), np.array([0.5]), np.array([1.0]))

    def outliers(edge: float | None) -> float:
        given = None if edge is None else np.array([edge])
        return ks_distances(spectrum[None], *ratios, margin=MARGIN, edge=given)["n_outliers"][0]

    assert outliers(None) == outliers(np.nan) == 1 and outliers(1.1 * upper) == 0


def test_wrong_scale_gives_a_large_distance() -> None:
    spectrum = bulk_quantiles(300, 0.5, 0.5)
    assert ks_distance(1.3 * spectrum, 0.5, 0.5, 1.0, margin=MARGIN)["ks"] > 0.04
    assert ks_distance(spectrum, 0.5, 0.5, 1.0, margin=MARGIN)["ks"] < 0.01


def test_nan_padding_is_ignored() -> None:
    spectrum = bulk_quantiles(200, 0.5, 0.5)
    padded = np.concatenate([spectrum, np.full(50, np.nan)])
    assert ks_distance(padded, 0.5, 0.5, 1.0, margin=MARGIN) == ks_distance(
        spectrum, 0.5, 0.5, 1.0, margin=MARGIN
    )


def _reference_fit(
    spectrum: np.ndarray, delta: float, gamma: float, kappa: float
) -> dict[str, float]:
    """The statistic of docs/model.md, "Bulk law", written out for one spectrum: the oracle
    of the vectorised :func:`ks_distances`."""
    from attnrmt.theory import bulk_cdf

    lam = np.sort(spectrum[np.isfinite(spectrum)])
    out = dict.fromkeys(("ks", "n_outliers", "zero_fraction", "lower_edge", "upper_edge"), np.nan)
    out["n_bulk"] = 0.0
    if lam.size == 0:
        return out
    is_zero = lam <= ZERO_TOL * np.max(np.abs(lam))
    is_outlier = lam > kappa * bulk_edges(delta, gamma)[1] * (1 + MARGIN)
    bulk = lam[~is_zero & ~is_outlier]
    out.update(n_outliers=is_outlier.sum(), zero_fraction=is_zero.mean(), n_bulk=bulk.size)
    atom = bulk_atom(delta, gamma)
    if bulk.size == 0 or atom >= 1.0:
        return out
    cdf = (bulk_cdf(bulk / kappa, delta, gamma) - atom) / (1 - atom)
    n = bulk.size
    steps = np.arange(n)
    out["ks"] = max(np.max((steps + 1) / n - cdf), np.max(cdf - steps / n))
    out.update(lower_edge=bulk[0], upper_edge=bulk[-1])
    return {name: float(value) for name, value in out.items()}


def test_batched_distances_equal_the_definition_one_spectrum_at_a_time() -> None:
    """Rows of different lengths (NaN padding), unsorted, ratios with and without an atom,
    exact zeros, outliers, scales and empty rows in one batch: the numbers of the
    definition applied to each row alone (same floating-point operations per value, so
    equal to the last bit)."""
    rng = np.random.default_rng(3)
    rows = []
    for index in range(60):
        delta, gamma = [(0.5, 0.5), (2.0, 1.5), (0.25, 2.0)][index % 3]
        kappa = rng.uniform(0.2, 2.0)
        spectrum = np.full(60, np.nan)
        length = int(rng.integers(0, 60))
        spectrum[:length] = kappa * bulk_quantiles(max(length, 1), delta, gamma)[:length]
        spectrum[:length] *= rng.uniform(0.9, 1.1, size=length)  # not exact quantiles
        if index % 5 == 0 and length:
            spectrum[length - 1] *= 3.0  # an outlier
        if index % 7 == 0 and length > 2:
            spectrum[:2] = 0.0  # exact zeros
        rows.append((rng.permutation(spectrum), delta, gamma, kappa))
    batched = ks_distances(
        np.array([row[0] for row in rows]),
        *(np.array([row[i] for row in rows]) for i in (1, 2, 3)),
        margin=MARGIN,
        zero_tol=ZERO_TOL,
    )
    for index, (spectrum, delta, gamma, kappa) in enumerate(rows):
        expected = _reference_fit(spectrum, delta, gamma, kappa)
        one = ks_distance(spectrum, delta, gamma, kappa, margin=MARGIN, zero_tol=ZERO_TOL)
        for name, value in expected.items():
            np.testing.assert_equal(batched[name][index], value, err_msg=f"{name}, {index}")
            np.testing.assert_equal(one[name], value, err_msg=f"{name}, {index}")


def test_bulk_fit_on_contract_shaped_cells() -> None:
    cells, _ = make_synthetic(
        d=(200, 240), delta=(0.5, 2.0), gamma=(0.5,), snr=(0.0, 3.0), replicates=2
    )
    fit = bulk_fit(cells, margin=MARGIN)
    assert set(fit["bulk_ks"].dims) == {
        "d",
        "delta",
        "gamma",
        "T",
        "positional",
        "weights",
        "snr",
        "centered",
        "replicate",
    }
    # the synthetic top-k replace the largest bulk quantiles: at most 3 of >= 100 bulk values
    assert float(fit["bulk_ks"].max()) < 0.05
    # the planted signal outlier (delta = 0.5, snr = 3: theta = 3.5, lambda = 5.44 > 1.05 *
    # edge 4.41) is excluded
    assert float(fit["bulk_n_outliers"].sel(snr=3.0, delta=0.5).min()) >= 1
    assert float(fit["bulk_n_outliers"].sel(snr=0.0).max()) == 0
    atom = fit["bulk_zero_fraction"].sel(delta=2.0)
    np.testing.assert_allclose(atom.values, 0.5, atol=0.02)


def test_bulk_fit_reads_lazy_spectra_one_setting_at_a_time() -> None:
    """On Dask-backed spectra (as ``open_store`` gives them) the fit equals the in-memory
    one, and no computed array is larger than one setting's spectra (all snr, centered,
    replicates): memory O(setting x d), not O(cells x d)."""
    from dask.callbacks import Callback

    cells, _ = make_synthetic(d=(40, 60), delta=(0.5, 1.0), snr=(0.0, 1.0, 2.0), replicates=3)
    eig = cells["eigenvalues"]
    per_setting = {dim: 1 for dim in eig.dims[:-4]}
    lazy = cells.assign(eigenvalues=eig.chunk(per_setting))
    setting_bytes = eig.isel({dim: 0 for dim in per_setting}).nbytes
    largest = [0]

    class Largest(Callback):
        def _posttask(self, key, result, dsk, state, worker_id):
            largest[0] = max(largest[0], getattr(result, "nbytes", 0))

    with Largest():
        fit = bulk_fit(lazy, margin=MARGIN)
    assert 0 < largest[0] <= setting_bytes < eig.nbytes / 3
    assert fit.identical(bulk_fit(cells, margin=MARGIN))
