"""simulate_cell of an snr list (the curve route): every result equals the cell of the
same snr and seed, over routes, positional models, weights, centring and the shapes whose
cells work in a smaller dimension; and the secular-equation numerics behind it, on
constructed families with coincident poles, vanishing components and roots next to poles
(docs/model.md, "Curves: one decomposition per replicate")."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from attnrmt.model import (
    _curve,
    _linalg,
    pooling_scalars,
    pooling_weights,
    positional_correlation,
    realised_sizes,
    simulate_cell,
)
from attnrmt.theory import critical_u
from tests.model.conftest import assert_same_cell

# Tolerances against the cell. Full route: both sides are backward-stable float64
# eigensolvers of the same matrices (the curve's S' + w w^T equals the cell's S to
# rounding), so eigenvalues agree to ~eps ||S|| (measured <= 2e-14 of the largest, d <=
# 1000) and overlaps to rounding over the eigenvalue gap (measured <= 4e-12); the issue's
# 1e-10 relative / 1e-7 hold with orders of margin. Top route and Krylov population
# matrices: both stop at the cell's bounds (1e-10 relative values, 5e-7 on each squared
# overlap, _linalg.BLOCK_*), the measured differences are <= 3e-13 and <= 1.2e-8 (d = 400 -
# 1000); 1e-7 keeps a factor 8 on the worst one.
VALUE_RTOL = 1e-10
VALUE_ATOL = 1e-12
OVERLAP_ATOL = 1e-7

T = 6
# (positional, weights, centered, delta, gamma): each shape takes another route of the
# cell at d = 60 - d x d (0.5, 0.5), S through the tokens and the population matrix in
# V dimensions (2, 0.5: V = 30 < N = 120), S in N dimensions (0.5, 2: N = 30), both
# smaller (1.5, 1.5: V = 40, N = 40), N < d < V (0.8, 1.2: N = 50, V = 76), V = N < d
# (2, 2: the sample Gram route).
CASES = [
    ({"kind": "iid"}, "mean", True, 0.5, 0.5),
    ({"kind": "prefix", "L": 3}, "harmonic", False, 2.0, 0.5),
    ({"kind": "markov", "r": 0.5}, "optimal", True, 0.5, 2.0),
    ({"kind": "label", "rho0": 0.8, "L": 3}, "mean", True, 1.5, 1.5),
    (
        {"kind": "custom", "R": (0.6 * np.eye(T) + 0.4).tolist()},
        {"kind": "custom", "values": [1, 0, 0, 0, 0, 1]},
        False,
        0.8,
        1.2,
    ),
    ({"kind": "label", "rho0": 0.9, "L": 2}, "optimal", False, 0.5, 0.5),
    ({"kind": "iid"}, {"kind": "causal_limit", "tau": 1.0}, True, 2.0, 2.0),
    ({"kind": "prefix", "L": 2}, "last", True, 0.5, 0.5),
]


def threshold_snrs(d: int, delta: float, gamma: float, positional, weights) -> list[float]:
    """snr 0, the finite_vocab population and sample thresholds of the cell (docs/model.md,
    "Thresholds", at the effective ratios d/V, d/N) and a strong signal: the top pairs are
    closest to the bulk edge next to the thresholds."""
    V, N = realised_sizes(d, delta, gamma)
    R = positional_correlation(positional, T)
    alpha, kappa, _ = pooling_scalars(pooling_weights(weights, T, R), R)
    ratio, effective_delta, effective_gamma = alpha / kappa, d / V, d / N
    population = (effective_delta + math.sqrt(effective_delta)) / ratio - effective_delta
    sample = (
        effective_delta + 1 / float(critical_u(effective_delta, effective_gamma))
    ) / ratio - effective_delta
    return [0.0, max(population, 0.0), max(sample, 0.0), 6.0]


def assert_curve_is_cells(d: int, spectrum: str, snrs: list[float], **cell) -> None:
    results = simulate_cell(d, snr=snrs, spectrum=spectrum, **cell)
    assert len(results) == len(snrs)
    for snr, found in zip(snrs, results, strict=True):
        expected = simulate_cell(d, snr=snr, spectrum=spectrum, **cell)
        assert_same_cell(
            found, expected, value_rtol=VALUE_RTOL, value_atol=VALUE_ATOL, overlap_atol=OVERLAP_ATOL
        )


@pytest.mark.parametrize("spectrum", ["full", "top"])
@pytest.mark.parametrize(("positional", "weights", "centered", "delta", "gamma"), CASES)
def test_curve_equals_the_cells(
    spectrum: str, positional, weights, centered: bool, delta: float, gamma: float
) -> None:
    """d = 60: the full route's d x d and smaller-dimension routes, the top route's dense
    route; every field, at snr 0 and next to both thresholds."""
    snrs = threshold_snrs(60, delta, gamma, positional, weights)
    assert_curve_is_cells(
        60,
        spectrum,
        snrs,
        delta=delta,
        gamma=gamma,
        T=T,
        positional=positional,
        weights=weights,
        centered=centered,
        seed=7,
    )


@pytest.mark.parametrize("spectrum", ["full", "top"])
@pytest.mark.parametrize(
    ("positional", "weights", "centered", "delta", "gamma"), [CASES[0], CASES[1], CASES[3]]
)
def test_curve_equals_the_cells_through_krylov_iterations(
    monkeypatch: pytest.MonkeyPatch,
    spectrum: str,
    positional,
    weights,
    centered: bool,
    delta: float,
    gamma: float,
) -> None:
    """The Krylov routes at d = 120 (thresholds lowered, for the cell too): the top
    route's family block Lanczos on the table operators against the cell's warm-started
    block Lanczos, and the full route's population family Krylov run (d x d, or V x V for
    delta > 1) against the cell's exact population eigenpairs."""
    monkeypatch.setattr(_linalg, "DENSE_TOP_MAX_N", 40)
    monkeypatch.setattr(_curve, "DENSE_POPULATION_MAX_N", 20)
    snrs = threshold_snrs(120, delta, gamma, positional, weights)
    assert_curve_is_cells(
        120,
        spectrum,
        snrs,
        delta=delta,
        gamma=gamma,
        T=T,
        positional=positional,
        weights=weights,
        centered=centered,
        seed=3,
    )


def test_curve_equals_the_cells_with_the_lanczos_population() -> None:
    """d = 320 >= the cell's Lanczos size: the population family's Krylov run against the
    cell's single-vector Lanczos (both stopped at their own tolerances)."""
    snrs = threshold_snrs(320, 0.5, 0.5, "iid", "mean")
    assert_curve_is_cells(
        320,
        "full",
        snrs[1:3],
        delta=0.5,
        gamma=0.5,
        T=T,
        positional="iid",
        weights="mean",
        centered=True,
        seed=1,
    )


@pytest.mark.parametrize("spectrum", ["full", "top"])
@pytest.mark.parametrize(("d", "T_tiny", "top_k"), [(2, 1, 2), (3, 2, 1), (5, 1, 2)])
def test_tiny_curves(spectrum: str, d: int, T_tiny: int, top_k: int) -> None:
    """The smallest shapes (one-token sequences, top_k = d = 2) are cells too. The top
    vectors are kept out of degenerate eigenspaces, in which any basis is right and
    overlaps are not comparable (d = 5 with five one-token rows has rank 2 centred)."""
    snrs = [0.0, 1.0, 4.0]
    results = simulate_cell(
        d, 1.0, 1.0, T_tiny, "iid", "mean", snrs, top_k=top_k, seed=1, spectrum=spectrum
    )
    for snr, found in zip(snrs, results, strict=True):
        expected = simulate_cell(
            d, 1.0, 1.0, T_tiny, "iid", "mean", snr, top_k=top_k, seed=1, spectrum=spectrum
        )
        assert_same_cell(
            found, expected, value_rtol=VALUE_RTOL, value_atol=VALUE_ATOL, overlap_atol=OVERLAP_ATOL
        )


def test_order_repeats_and_shared_seconds() -> None:
    """Results follow the given snrs (unsorted, repeated), repeats are identical, and the
    shared time is split evenly."""
    cell = {
        "d": 40,
        "delta": 0.5,
        "gamma": 0.5,
        "T": T,
        "positional": "iid",
        "weights": "mean",
        "seed": 5,
    }
    snrs = [3.0, 0.0, 3.0, 1.0]
    start = time.perf_counter()
    results = simulate_cell(**cell, snr=snrs)
    elapsed = time.perf_counter() - start
    np.testing.assert_array_equal(results[0].eigenvalues, results[2].eigenvalues)
    assert results[0].top_eigenvalues[0] > results[3].top_eigenvalues[0]
    # an accounting identity, not a speed test: the shares sum to the call's own time
    assert len({result.compute_seconds for result in results}) == 1
    assert 0 < sum(result.compute_seconds for result in results) <= elapsed
    alone = simulate_cell(**cell, snr=[1.0])[0]
    assert_same_cell(
        results[3], alone, value_rtol=VALUE_RTOL, value_atol=VALUE_ATOL, overlap_atol=OVERLAP_ATOL
    )


def test_causal_attention_runs_one_cell_per_snr() -> None:
    """Weights computed from the table have no shared decomposition: the curve is the
    cells themselves, bit for bit (each with its own compute_seconds)."""
    weights = {"kind": "causal_attention", "tau": 1.0}
    cell = {
        "d": 40,
        "delta": 0.5,
        "gamma": 0.5,
        "T": T,
        "positional": "iid",
        "weights": weights,
        "seed": 2,
    }
    for found, snr in zip(simulate_cell(**cell, snr=[0.0, 2.0]), [0.0, 2.0], strict=True):
        expected = simulate_cell(**cell, snr=snr)
        for name, value in expected.to_dict().items():
            if name != "compute_seconds":
                np.testing.assert_array_equal(getattr(found, name), value, err_msg=name)


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"snr": []}, "snr=[]"),
        ({"snr": [1.0, -0.5]}, "snr=[1.0, -0.5]"),
        ({"snr": [float("nan")]}, "snr=[nan]"),
        ({"snr": [1e101]}, "snr=[1e+101]"),
        ({"snr": [[1.0, 2.0]]}, "snr=[[1.0, 2.0]]"),
        ({"d": 1}, "d=1"),
        ({"top_k": 0}, "top_k=0"),
        ({"spectrum": "some"}, "spectrum='some'"),
        ({"weights": "nosuch"}, "weights.kind='nosuch'"),
        ({"seed": -1}, "seed=-1"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(changes: dict, fragment: str) -> None:
    arguments = {
        "d": 20,
        "delta": 0.5,
        "gamma": 0.5,
        "T": 3,
        "positional": "iid",
        "weights": "mean",
        "snr": [1.0],
        **changes,
    }
    with pytest.raises(ValueError) as error:
        simulate_cell(**arguments)
    assert fragment in str(error.value)


def test_largest_allowed_snr_still_gives_finite_numbers() -> None:
    """MAX_SNR: the signal dominates both matrices (top overlap 1), nothing overflows."""
    from attnrmt.model._cell_steps import MAX_SNR

    for spectrum in ("full", "top"):
        (result,) = simulate_cell(
            20, 0.5, 0.5, 4, "iid", "mean", [MAX_SNR], seed=1, spectrum=spectrum
        )
        for name, value in result.to_dict().items():
            if name != "downstream_accuracy":
                assert np.all(np.isfinite(value)), name
        assert result.overlap_signal[0] == pytest.approx(1.0, abs=1e-9)
        assert result.pop_overlap_signal[0] == pytest.approx(1.0, abs=1e-9)


def test_sample_matrix_is_a_rank_one_family_in_the_signal() -> None:
    """The identity behind the curve (d route): the cell's S at snr = r^2, formed from the
    pooled rows of the table E(r) = Z + r s u^T, equals S' + w(r) w(r)^T with S' and w
    from the table at snr 0 (to rounding, 1e-13 of the largest entry)."""
    from attnrmt.model.cell import Draws, pool
    from attnrmt.model.positional import sample_signs
    from attnrmt.model.table import sample_table, sample_tokens

    d, V, N = 30, 60, 60
    streams = [np.random.default_rng(child) for child in np.random.SeedSequence(4).spawn(4)]
    noise = sample_table(d, V, 0.0, streams[0])
    signs, _ = sample_signs({"kind": "prefix", "L": 2}, T, N, streams[1])
    tokens = sample_tokens(signs, V, streams[2])
    weights = pooling_weights("mean", T, np.eye(T))
    draws = Draws(
        noise,
        tokens,
        None,
        weights,
        weights,
        1.0,
        1.0,
        1.0,
        ((0.0, noise.table_mean), (0.0, noise.class_mean_difference)),
        streams[3],
        True,
    )
    family, _ = _curve._sample_family(draws, top_k=3)
    fixed = np.tril(family.lower) + np.tril(family.lower, -1).T
    w0, w1 = family.tracked[:, 0], family.tracked[:, 1]
    for r in (0.0, 0.7, 3.0):
        table = noise.embeddings.copy()
        table[:, 0] += r * noise.token_class
        pooled = pool(tokens, weights, table)
        centred = pooled - pooled.mean(axis=0)
        expected = centred.T @ centred / N
        found = fixed + np.outer(w0 + r * w1, w0 + r * w1)
        np.testing.assert_allclose(found, expected, rtol=0, atol=1e-13 * np.abs(expected).max())


# ------------------------------------------------------- secular equations, constructed


def explicit(poles: np.ndarray, components: np.ndarray, s: float) -> tuple[np.ndarray, ...]:
    """Eigenvalues and vectors of the member ``diag(poles) + z z^T`` (numpy, dense)."""
    z = components[:, 0] + s * components[:, 1]
    return np.linalg.eigh(np.diag(poles) + np.outer(z, z))


def assert_family_solved(
    poles: np.ndarray, components: np.ndarray, s_values: np.ndarray, count: int = 3
) -> None:
    """family_spectra / family_top against dense eigh for every member: all eigenvalues
    to 1e-13 of the largest (both backward stable on O(1) entries: errors ~1e-15), the
    top ``count`` values, and the squared inner products of the top vectors with the
    probes (components[:, 2:]) where the eigenvalue is simple (gap >= 1e-6 of the
    largest: vector errors <= rounding / gap ~1e-10)."""
    count = min(count, poles.size)
    rotated, active = _linalg.deflate_family(poles, components, s_values)
    spectra = _linalg.family_spectra(poles, rotated, s_values, active)
    values, inner = _linalg.family_top(poles, rotated, s_values, active, count)
    for member, s in enumerate(s_values):
        expected, vectors = explicit(poles, components, s)
        scale = np.abs(expected).max()
        np.testing.assert_allclose(spectra[member], expected, rtol=0, atol=1e-13 * scale)
        np.testing.assert_allclose(
            values[member], expected[::-1][:count], rtol=0, atol=1e-13 * scale
        )
        gaps = np.abs(np.subtract.outer(expected, expected)) + np.eye(expected.size) * scale
        for rank in range(count):
            index = expected.size - 1 - rank
            if gaps[index].min() < 1e-6 * scale:
                continue
            probes = vectors[:, index] @ components[:, 2:]
            np.testing.assert_allclose(inner[member, rank] ** 2, probes**2, rtol=0, atol=1e-10)


def random_family(n: int, seed: int, probes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    poles = np.sort(rng.standard_normal(n))
    return poles, rng.standard_normal((n, 2 + probes)) / np.sqrt(n)


@pytest.mark.parametrize("n", [1, 2, 7, 60, 150])
def test_random_families(n: int) -> None:
    """n = 150 > 4 NEAR_POLES takes the far-field path (and the direct one for its
    exceptional intervals); n <= 48 the direct sum."""
    poles, components = random_family(n, seed=n)
    assert_family_solved(poles, components, np.array([0.0, 0.3, 1.0, 4.0, 30.0]))


def test_far_field_roots_equal_direct_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    """The far-field coefficients (Taylor terms of the far poles about each interval) give
    the roots of the direct sum to rounding (1e-15 relative to the interval positions)."""
    poles, components = random_family(300, seed=1)
    s_values = np.linspace(0.0, 2.0, 5)
    active = np.ones(300, dtype=bool)
    far = _linalg.family_spectra(poles, components, s_values, active)
    # most intervals take the far-field path (86% for these independent Gaussian poles,
    # whose spacings fluctuate more than an eigenvalue spectrum's; 98% for a Wishart one)
    assert np.mean(_linalg._far_ratios(poles, _linalg.NEAR_POLES) <= _linalg.FAR_RATIO) > 0.8
    monkeypatch.setattr(_linalg, "FAR_RATIO", -1.0)  # no interval qualifies: all direct
    direct = _linalg.family_spectra(poles, components, s_values, active)
    np.testing.assert_allclose(far, direct, rtol=0, atol=2e-15 * np.abs(direct).max())


def test_coincident_poles_are_deflated() -> None:
    """Exactly repeated poles (a cluster of four and a pair) with components in every
    row: the cluster keeps two rows of the update (its span of z0, z1), the rest are
    eigenvalues of every member; a pair at the top keeps both rows, and its member roots
    between the two poles sit at the pole (deflated vector)."""
    poles, components = random_family(40, seed=2)
    poles[10:14] = poles[10]
    poles[-2:] = poles[-1] + 0.5
    poles = np.sort(poles)
    s_values = np.array([0.0, 0.5, 2.0])
    rotated, active = _linalg.deflate_family(poles, components, s_values)
    assert np.count_nonzero(~active) == 2  # 4 - 2 of the cluster
    np.testing.assert_array_equal(rotated[~active, :2], 0.0)
    assert_family_solved(poles, components, s_values)


def test_vanishing_components_and_roots_next_to_poles() -> None:
    """Components zero in every member (deflated), zero in one member only (z0_i = -s z1_i:
    that member's root is the pole), tiny (1e-9, 1e-13: roots within ~1e-18 - 1e-26 of a
    pole, resolved through the origin-shifted differences) and tiny in one member only."""
    poles, components = random_family(30, seed=3)
    components[4, :2] = 0.0
    components[9, 0], components[9, 1] = -0.5 * components[9, 1], components[9, 1]
    components[-1, :2] *= 1e-9  # the top pole: the top root next to it for small s
    components[15, :2] *= 1e-13
    components[20, 0] = 1e-30  # weight 1e-60 in the member s = 0 only: its root sits
    # ~1e-60 above the pole, a step tau + eta would cancel (found from the offset itself)
    s_values = np.array([0.0, 0.5, 1.0])
    _, active = _linalg.deflate_family(poles, components, s_values)
    assert not active[4] and active[9] and active[15] and active[20]
    assert_family_solved(poles, components, s_values)
    rotated, active = _linalg.deflate_family(poles, components, s_values)
    spectra = _linalg.family_spectra(poles, rotated, s_values, active)
    # the member s = 0.5 has z_9 = 0: pole 9 is one of its eigenvalues (to the rounding
    # floor of the bracket, 4 eps |mu|)
    assert np.min(np.abs(spectra[1] - poles[9])) <= 4 * _linalg._EPS * abs(poles[9])


def test_near_coincident_poles() -> None:
    """Poles 1e-13 apart (above the deflation tolerance 8 eps max|lambda| ~ 1e-14): the
    root between them is trapped in the tiny interval and every eigenvalue is right."""
    poles, components = random_family(25, seed=4)
    poles[12] = poles[11] + 1e-13 * np.abs(poles).max()
    poles = np.sort(poles)
    s_values = np.array([0.0, 1.0])
    _, active = _linalg.deflate_family(poles, components, s_values)
    assert active.all()
    assert_family_solved(poles, components, s_values)


def test_secular_iteration_converges_to_an_interval_end_without_sign_change() -> None:
    """A pole of zero weight that is not deflated (deflation is the caller's choice): the
    interval next to it has no root of f, and the iteration returns the pole itself."""
    poles = np.array([0.0, 1.0, 2.0])
    weights = np.array([[0.3, 0.0, 0.4]])
    origin, tau = _linalg._root_pairs(poles, weights, np.zeros(3, dtype=int), np.arange(3))
    roots = poles[origin] + tau
    expected = np.linalg.eigvalsh(
        np.diag(poles) + np.outer(np.sqrt(weights[0]), np.sqrt(weights[0]))
    )
    np.testing.assert_allclose(np.sort(roots), expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize(("n", "d"), [(200, 30), (60, 100)])  # primal, dual
def test_readout_curve_equals_the_readout_of_each_member(n: int, d: int) -> None:
    """The shared ridge solve (block elimination / Sherman-Morrison on the fixed columns)
    classifies exactly as the readout refitted on each member's features, including a
    member whose first column has no training spread (r cancels it)."""
    from attnrmt.model import ridge_readout_accuracy

    rng = np.random.default_rng(d)
    labels = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    pooled = rng.standard_normal((n, d))
    pooled[:, 3] += 0.5 * labels
    pooled[:, 7] = 0.0  # a constant feature (spread 0: only centred)
    signal = 0.8 * labels + 0.3 * rng.standard_normal(n)
    pooled[:, 0] = -2.0 * signal  # r = 2 leaves the first column constant
    roots = np.array([0.0, 0.3, 2.0, 5.0])
    found = _curve._ridge_curve(pooled, signal, labels, roots)
    for r, accuracy in zip(roots, found, strict=True):
        features = pooled.copy()
        features[:, 0] += r * signal
        assert accuracy == ridge_readout_accuracy(features, labels)
    assert len(set(found)) > 1  # the signal column matters


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_secular_iteration_converges_in_a_few_steps(seed: int) -> None:
    """All 200 roots of a Wishart-spectrum family reach the rounding floor within 12
    evaluations (quadratic convergence of the middle way: measured 8-10 over seeds 0-3
    and weights scaled 1-7x, the last ones for a few stragglers). Bisection alone needs
    ~50: a broken rational model still finds the roots, through the bracket, but not in
    this budget."""

    class Counting(_linalg._DirectEvaluator):
        calls = 0

        def __call__(self, upper: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, ...]:
            Counting.calls += 1
            return super().__call__(upper, tau)

    rng = np.random.default_rng(seed)
    n = 200
    rows = rng.standard_normal((2 * n, n))
    poles = np.linalg.eigvalsh(rows.T @ rows / (2 * n))
    weights = ((1 + 2 * seed) * rng.standard_normal(n) / np.sqrt(n))[None, :] ** 2
    intervals = np.arange(n)
    top = intervals == n - 1
    width = np.where(top, weights.sum() * (1 + 16 * _linalg._EPS), np.append(np.diff(poles), 0.0))
    upper, tau = _linalg._secular_iterate(
        width, top, Counting(poles, weights, np.zeros(n, dtype=int), intervals)
    )
    roots = poles[intervals + upper] + tau
    z = np.sqrt(weights[0])
    np.testing.assert_allclose(
        roots, np.linalg.eigvalsh(np.diag(poles) + np.outer(z, z)), rtol=0, atol=1e-14 * roots.max()
    )
    assert Counting.calls <= 12


# ------------------------------------------------------------------------------ table laws


@pytest.mark.parametrize("spectrum", ["full", "top"])
@pytest.mark.parametrize(
    "table", ["rademacher", {"kind": "student_t", "nu": 5.0}, {"kind": "sparse", "p": 0.3}]
)
def test_curve_with_a_table_law_equals_the_cells(spectrum: str, table) -> None:
    """``table=``: the signal is still a rank-one term added to the noise, whatever its
    law, so the curve equals the cells of that law (same tolerances as above); and the
    law matters (the rademacher curve differs from the Gaussian one)."""
    cell = {"delta": 0.5, "gamma": 0.5, "T": T, "positional": "iid", "weights": "mean"}
    snrs = threshold_snrs(60, 0.5, 0.5, "iid", "mean")
    results = simulate_cell(60, snr=snrs, spectrum=spectrum, seed=5, table=table, **cell)
    for snr, found in zip(snrs, results, strict=True):
        expected = simulate_cell(60, snr=snr, spectrum=spectrum, seed=5, table=table, **cell)
        assert_same_cell(
            found, expected, value_rtol=VALUE_RTOL, value_atol=VALUE_ATOL, overlap_atol=OVERLAP_ATOL
        )
    gaussian = simulate_cell(60, snr=snrs, spectrum=spectrum, seed=5, **cell)
    assert not np.allclose(gaussian[-1].top_eigenvalues, results[-1].top_eigenvalues)


def test_gaussian_table_law_is_the_default_bit_for_bit() -> None:
    """``table=None`` and ``table="gaussian"`` give the same curve bit for bit."""
    cell = {"delta": 0.5, "gamma": 0.5, "T": T, "positional": "iid", "weights": "mean"}
    default = simulate_cell(40, snr=[0.0, 1.0, 3.0], seed=2, **cell)
    named = simulate_cell(40, snr=[0.0, 1.0, 3.0], seed=2, table="gaussian", **cell)
    for a, b in zip(default, named, strict=True):
        np.testing.assert_array_equal(a.eigenvalues, b.eigenvalues)
        np.testing.assert_array_equal(a.overlap_signal, b.overlap_signal)
