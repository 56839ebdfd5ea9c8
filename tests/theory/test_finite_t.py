"""The bulk and the spike at finite T (docs/model.md, "Where the large-T bulk holds", "The
bulk at finite T", "Outliers and overlaps at finite T")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnrmt.model import simulate_cell
from attnrmt.theory import bulk_density, bulk_edges, predict_grid, predict_point, spike
from attnrmt.theory.finite_t import (
    FINITE_T_BOUND,
    _token_matrix,
    finite_d_spike,
    finite_t_spike,
    finite_t_stieltjes,
    large_t_bulk_holds,
    noise_top,
    realised_rules,
    token_rules,
    tokens_per_vocab,
)


def test_tokens_per_vocab_is_t_delta_over_gamma() -> None:
    # V = d / delta tokens, N = d / gamma sequences of T tokens: N T / V = T delta / gamma
    d, delta, gamma, T = 1200, 0.4, 0.8, 5
    assert tokens_per_vocab(delta, gamma, T) == pytest.approx((d / gamma) * T / (d / delta))
    np.testing.assert_allclose(tokens_per_vocab([0.5, 0.5], [0.5, 1.0], 8), [8.0, 4.0])


def test_the_bound_is_eight_and_inclusive() -> None:
    assert FINITE_T_BOUND == 8.0  # the default run's delta = gamma = 0.5, T = 8 holds
    np.testing.assert_array_equal(
        large_t_bulk_holds(0.5, [0.5, 0.5001, 0.25, 1.0], [8, 8, 4, 16]),
        [True, False, True, True],
    )
    with pytest.raises(ValueError, match="gamma"):
        large_t_bulk_holds(0.5, 0.0, 8)


def test_at_t1_the_pooled_law_is_the_poisson_count_population() -> None:
    # T = 1: V A / kappa = diag(K_v / lam), K_v ~ Poisson(lam): the outer equation has the
    # exact solution m = 1/(-z + sum_k p_k a_k / (1 + delta a_k m)), a_k = k / lam
    delta, gamma, z = 0.5, 0.5, 2.0 + 0.5j
    lam = float(tokens_per_vocab(delta, gamma, 1))
    k = np.arange(60)
    pmf = np.exp(k * np.log(lam) - lam - np.cumsum(np.log(np.maximum(k, 1))))
    a, m = k / lam, -1.0 / z
    for _ in range(500):
        m = 0.5 * m + 0.5 / (-z + np.sum(pmf * a / (1.0 + delta * a * m)))
    solved = finite_t_stieltjes(z, delta, gamma, [1.0], population=2000, sweeps=40)[0]
    assert abs(solved - m) < 0.01 * abs(m)  # MC error ~ 1/sqrt(4e4) = 0.5%


def test_at_large_token_counts_the_density_is_the_large_t_bulk() -> None:
    # N T/V = 16: within 3% of MP_delta ⊠ MP_gamma inside the bulk (smoothing eta = 0.01)
    x = np.array([1.0, 2.0, 3.0])
    density = finite_t_stieltjes(x + 0.01j, 0.5, 0.5, np.full(16, 1 / 16), 1000, 40).imag / np.pi
    np.testing.assert_allclose(density, bulk_density(x, 0.5, 0.5), rtol=0.03)


def test_the_noise_top_is_the_simulated_largest_noise_eigenvalue() -> None:
    # N T / V = 1 (T = 2, delta = 0.5, gamma = 1, harmonic-like weights), d = 120: the mean
    # of the simulator's top eigenvalue of S / kappa at snr 0 over 16 cells (sd ~0.3, so
    # the two means agree to ~0.15 at 2 sigma); a missing centring puts it near 3, a wrong
    # kappa scales it by 1.25
    w = np.array([2.0, 1.0]) / 3.0
    tops = [
        (c.top_eigenvalues[0] / c.kappa, c.V, c.N)
        for c in (
            simulate_cell(
                120,
                0.5,
                1.0,
                2,
                "iid",
                {"kind": "custom", "values": list(w)},
                0.0,
                top_k=1,
                seed=[3, r],
                spectrum="top",
            )
            for r in range(16)
        )
    ]
    mean, sd = noise_top(120, int(tops[0][1]), int(tops[0][2]), w, samples=16)
    assert abs(mean - np.mean([t[0] for t in tops])) < 0.15
    assert 0.5 < sd / np.std([t[0] for t in tops]) < 2.0


def test_the_noise_top_is_a_function_of_its_arguments() -> None:
    # a rerun that heals a damaged analysis store must write it bit for bit (tests/e2e/
    # test_heal.py): the Lanczos start is drawn from the seed, not by ARPACK at random
    first, again = (noise_top(40, 80, 80, [0.5, 0.5], samples=3, seed=5) for _ in range(2))
    assert first == again


def test_the_noise_top_sits_at_the_large_t_edge_at_many_tokens() -> None:
    # N T / V = 16: mean + sd of the largest eigenvalue is the edge f(u*) = 4.409 up to
    # 0.06 Tracy-Widom units (~0.5% at d = 150) and the mean's MC error (~1%)
    mean, sd = noise_top(150, 300, 300, np.full(16, 1 / 16), samples=12)
    assert mean + sd == pytest.approx(float(bulk_edges(0.5, 0.5)[1]), rel=0.03)


def test_a_dense_token_law_gives_the_population_spike() -> None:
    # gamma -> 0: A~ = I + (alpha/kappa - 1) s s^T / V exactly, so S / kappa is the
    # population matrix: finite_vocab's population outlier and overlap, to round-off
    delta, ratio, snr = 0.5, 1.7, np.array([1.0, 2.5, 6.0])
    rules = (np.array([ratio]), np.array([1.0]), np.array([1.0]), np.array([1.0]))
    x, overlap = finite_t_spike(delta, snr, rules)
    closed = spike(delta, 1.0, snr, ratio, 1.0, "finite_vocab")
    np.testing.assert_allclose(x, closed.population_outlier, rtol=1e-9)
    np.testing.assert_allclose(overlap, closed.population_overlap, rtol=1e-9)
    assert np.isnan(finite_t_spike(delta, [0.0, 0.2], rules)[0]).all()  # below the threshold


@pytest.mark.parametrize(
    ("T", "gamma", "positional", "weights"),
    [(16, 0.5, "iid", "mean"), (32, 1.0, "markov", "harmonic")],
)
def test_at_many_tokens_the_finite_t_spike_is_the_closed_form(
    T: int, gamma: float, positional: str, weights: str
) -> None:
    # N T / V = 16: the sampled token law's outlier and overlap are the closed forms' to its
    # Monte-Carlo error (sd ~0.3%); the class vector's rule has the exact first moment
    delta, snr = 0.5, np.array([2.0, 4.0])
    pos = '{"kind": "markov", "r": 0.3}' if positional == "markov" else '"iid"'
    rules = token_rules(T, pos, f'"{weights}"', gamma / delta)
    x, overlap = finite_t_spike(delta, snr, rules)
    point = predict_point(delta, gamma, 1.0, T, json.loads(pos), weights)
    ratio = float(point["alpha"] / point["kappa"])
    assert rules[1] @ rules[0] == pytest.approx(ratio, rel=1e-9)  # s^T A~ s / V = alpha/kappa
    closed = spike(delta, gamma, snr, ratio, 1.0, "finite_vocab")
    np.testing.assert_allclose(x, closed.sample_outlier, rtol=0.008)
    np.testing.assert_allclose(overlap, closed.sample_overlap, atol=0.008)


def test_finite_t_theory_is_the_simulated_outlier_at_one_token_per_vocabulary_entry() -> None:
    # N T / V = 1 (iid, mean weights, T = 2, delta = 0.5, gamma = 1), d = 200, 48 cells of
    # two snr: mean top eigenvalue of S / kappa and overlap with u within 3 standard errors
    # (SE ~0.3% and ~0.006) of predict_point, which takes the finite-T theory here
    snr = [3.74, 7.47]
    cells = [
        simulate_cell(200, 0.5, 1.0, 2, "iid", "mean", snr, top_k=1, seed=[r, 37], spectrum="top")
        for r in range(48)
    ]
    for j, value in enumerate(snr):
        theory = predict_point(0.5, 1.0, value, 2, "iid", "mean").sel(variant="finite_vocab")
        for found, predicted in (
            (
                [c[j].top_eigenvalues[0] / c[j].kappa for c in cells],
                theory["sample_outlier"] / theory["kappa"],
            ),
            ([c[j].overlap_signal[0] for c in cells], theory["sample_overlap_signal"]),
        ):
            se = np.std(found, ddof=1) / np.sqrt(len(found))
            assert abs(np.mean(found) - float(predicted)) < 3 * se


def test_the_grid_takes_the_finite_t_values_from_d_100() -> None:
    # theory.zarr's engine: at d = 200 (N T / V = 1) finite_vocab's outlier and overlap are
    # predict_point's finite-T values; at d = 40 and for paper they stay the closed forms
    # (kappa = 1/2 for mean weights at T = 2)
    axes = {"d": [40, 200], "delta": [0.5], "gamma": [1.0], "T": [2], "positional": ["iid"]}
    axes |= {"weights": ["mean"], "snr": [3.74], "centered": [True]}
    grid = predict_grid(axes, {("iid", 2): "iid"}, {("mean", 2): "mean"}).squeeze()
    point = predict_point(0.5, 1.0, 3.74, 2, "iid", "mean")
    closed = spike(0.5, 1.0, 3.74, 1.0, 1.0, "finite_vocab")
    for name, value in (
        ("sample_outlier", 0.5 * closed.sample_outlier),
        ("sample_overlap_signal", closed.sample_overlap),
    ):
        assert float(grid[name].sel(d=200, variant="finite_vocab")) == float(
            point[name].sel(variant="finite_vocab")
        )
        assert float(grid[name].sel(d=40, variant="finite_vocab")) == pytest.approx(
            value, rel=1e-12
        )
        assert abs(float(point[name].sel(variant="finite_vocab")) - value) > 1e-3 * value
    np.testing.assert_array_equal(
        grid["sample_outlier"].sel(variant="paper"), point["sample_outlier"].sel(variant="paper")
    )


@pytest.mark.parametrize(("V", "N"), [(40, 24), (24, 40)])
def test_the_realised_rules_are_the_spectral_measures_of_the_drawn_token_matrix(
    V: int, N: int
) -> None:
    # nu: every eigenvalue of A~ = V/(N kappa) Q (I - 1 1^T/N) Q^T from the smaller Gram
    # matrix (either side); mu_s's Gauss rule: the transform u_s at s / sqrt(V), exactly
    spec = ('{"kind": "markov", "r": 0.3}', '"harmonic"')
    (a_s, w_s, a_nu, w_nu), *_ = realised_rules(5, *spec, V, N, draws=1)
    Q, s, _, scale, _ = _token_matrix(5, *spec, V, N, 0)
    centred = Q.toarray() - Q.toarray().mean(axis=1, keepdims=True)
    values, vectors = np.linalg.eigh(scale * centred @ centred.T)
    top = values > 1e-9 * values[-1]
    np.testing.assert_allclose(a_nu[a_nu > 1e-9 * a_nu.max()], values[top], rtol=1e-9)
    np.testing.assert_allclose(w_nu, 1 / V)
    for y in (1.01 * values[-1], 3 * values[-1]):
        exact = (s @ vectors) ** 2 / V @ (values / (y - values))
        assert w_s @ (a_s / (y - a_s)) == pytest.approx(exact, rel=1e-9)


def test_the_finite_d_spike_solves_the_equation_of_the_d_minus_1_other_rows() -> None:
    # A~ = I + (r - 1) s s^T / V: atoms 1 (V - 1 times) and r, all of s / sqrt(V) on r, so
    # u_s = r / (y - r) = delta / snr at y = r (snr + delta) / delta, delta = (d - 1) / V
    # (d - 1 rows besides the signal's), and x = y (delta + u_nu(y)) by hand
    d, V, N, r, snr = 300, 750, 150, 1.4, np.array([1.5, 3.0, 6.0])
    rules = (np.array([r]), np.array([1.0]), np.r_[np.ones(V - 1), r], np.full(V, 1 / V))
    x, overlap = finite_d_spike(d, V, N, snr, (rules,), r)
    delta = (d - 1) / V
    y = r * (snr + delta) / delta
    u_nu, slope_nu = (1 - 1 / V) / (y - 1) + r / V / (y - r), -(1 - 1 / V) / (y - 1) ** 2
    slope_x = delta + u_nu + y * (slope_nu - r / V / (y - r) ** 2)
    np.testing.assert_allclose(x, y * (delta + u_nu), rtol=1e-9)
    np.testing.assert_allclose(overlap, slope_x * (y - r) ** 2 / (y * snr * r), rtol=1e-9)


def test_the_control_variate_removes_the_drawn_first_moment() -> None:
    # two draws whose class weights differ only in s^T A~ s / V: the mean is the draws'
    # linear interpolation to its expectation r (1 - 1/N), not their plain mean
    d, V, N, r, snr = 300, 750, 150, 1.4, np.array([3.0])
    draws = [
        (np.r_[a], np.r_[1.0], np.r_[np.ones(V - 1), a], np.full(V, 1 / V)) for a in (1.3, 1.5)
    ]
    x = [finite_d_spike(d, V, N, snr, (draw,), r)[0][0] for draw in draws]
    c = 1.4 * (1 - 1 / N)
    np.testing.assert_allclose(
        finite_d_spike(d, V, N, snr, tuple(draws), r)[0],
        x[0] + (x[1] - x[0]) * (c - 1.3) / 0.2,
        rtol=1e-9,
    )


def test_the_finite_d_spike_needs_three_quarters_of_the_draws_separated() -> None:
    # a draw with a large atom of nu that s does not see has no separated root at snr 3:
    # with 3 of 4 draws separated the value is theirs, with 2 of 4 there is none
    d, V, N, r, snr = 300, 750, 150, 1.4, np.array([3.0])
    ones = np.ones(V - 1)
    good = (np.array([r]), np.array([1.0]), np.r_[ones, r], np.full(V, 1 / V))
    bad = (np.array([r]), np.array([1.0]), np.r_[ones, 50.0], np.full(V, 1 / V))
    alone = finite_d_spike(d, V, N, snr, (good,), r)
    assert np.isnan(finite_d_spike(d, V, N, snr, (bad,), r)[0]).all()
    np.testing.assert_allclose(finite_d_spike(d, V, N, snr, (good,) * 3 + (bad,), r), alone)
    assert np.isnan(finite_d_spike(d, V, N, snr, (good, good, bad, bad), r)).all()


def test_in_the_tail_regime_the_finite_d_theory_is_the_simulated_spike() -> None:
    # T = 1, delta = gamma = 0.5 (N T / V = 1), snr 2.5, d = 300: the limit equation has no
    # separated root (closed forms: overlap 0.533); predict_point at d takes the realised
    # token matrices. 100 cells: overlap SE ~0.010, outlier SE ~0.3%; within 3 SE
    snr, d = 2.5, 300
    cells = [
        simulate_cell(d, 0.5, 0.5, 1, "iid", "mean", snr, top_k=1, seed=[r, 38], spectrum="top")
        for r in range(100)
    ]
    theory = predict_point(0.5, 0.5, snr, 1, "iid", "mean", d=d).sel(variant="finite_vocab")
    for found, predicted in (
        (
            [c.top_eigenvalues[0] / c.kappa for c in cells],
            theory["sample_outlier"] / theory["kappa"],
        ),
        ([c.overlap_signal[0] for c in cells], theory["sample_overlap_signal"]),
    ):
        se = np.std(found, ddof=1) / np.sqrt(len(found))
        assert abs(np.mean(found) - float(predicted)) < 3 * se
