"""The theory's numbers against computations that cannot share its bugs (docs/model.md,
"Bulk law", "Spikes", "Two variants of the theory", "Thresholds").

* Bulk edges, from Silverstein and Choi (1995), not from the cubic of "Bulk law": the law
  of ``S/kappa`` is that of a sample covariance of ratio ``gamma`` whose population law is
  ``H = MP_delta``, and the edges of its support are the values of
  ``z(m) = -1/m + gamma int tau dH(tau) / (1 + tau m)`` at the real critical points of
  ``z`` (``m`` in ``(-1/b_H, 0)`` for the upper edge; ``(-inf, -1/a_H)`` for the lower
  edge when ``gamma < 1``, ``(0, inf)`` when ``gamma > 1``). The integrals over ``MP_c`` are
  Gauss-Chebyshev sums (the integrands are smooth on the support); the law is symmetric in
  ``delta, gamma`` and the smaller one is taken as the population ratio. Measured against
  :func:`attnrmt.theory.bulk_edges` on 36 pairs of ``{0.05, ..., 4}``: <= 1.8e-15
  relative; tolerance 1e-12. Closed forms where the critical polynomial factors
  (``delta = 1``: a root -1; ``delta = gamma = c``: a root ``-1/c``) agree to 2.2e-16
  (tolerance 1e-14).
* Spike formulas at points where everything is rational (``delta = gamma = 1, theta = 5``
  and ``delta = 1/2, gamma = 2, theta = 9/2``), and the overlaps from their definition as
  derivatives of the outlier maps (``-u^2 g'(u)``, ``-u^2 f'(u) / (1 + gamma u)``, with
  ``f`` and ``g`` written here and differentiated by complex step), to 1e-12.
* The theory store (``predict_grid``): ``theta``, thresholds, bulk edges and sample
  outliers from their definitions, with ``alpha, kappa`` from ``w, R`` written here and the
  realised ratios ``d/V``, ``d/N`` computed here, to 1e-12.
* ``finite_vocab``'s ``theta = (alpha/kappa)(snr + delta)`` rests on
  ``E ||Dlt||^2 = snr + d/V`` (exact at every ``d``: ``Dlt = mu + eta``,
  ``eta ~ N(0, I/V)``): checked on tables drawn by the model's own sampler at ``snr = 0``,
  where ``theta`` is ``(alpha/kappa) delta`` alone (``paper``: 0).

Breaking the code on purpose (scratch edits, restored; the values measured under the bug,
against tolerances of 1e-12 (measured without it: <= 2.3e-14) unless stated):

* ``bulk_edges``' upper edge times 1.02 (``theory/bulk.py``): 2.0e-2 relative off here and
  in ``predict_grid``'s ``bulk_upper_edge`` (43 of 51 tests fail); the lower edge (its
  ``_lower_edge``) times 1.02: 2.0e-2 (34 fail); ``bulk_upper_edge`` times 1.02 in
  ``theory/predict.py`` alone: 2.0e-2 in the store test.
* ``theta`` with ``1.03 delta`` for ``delta`` in ``spike`` (finite_vocab): the store's
  ``theta`` 3.0e-2 off at ``snr = 0`` and its sample thresholds up to 18%; the table
  check's z-scores -0.12 and -0.22 become -6.8 and -6.9 (bound 4). ``u = 1/(theta - 1.03
  delta)`` instead: the hand values 6.1e-3 off, the derivative check fails.
* The sample overlap's cubic term ``2 delta gamma u^3`` with 2.1 for 2: the hand value 1/2
  becomes 0.49896 (2.1e-3 off), the derivative check up to 0.24 relative off next to the
  threshold.

Reference: J. W. Silverstein, S.-I. Choi, Analysis of the limiting spectral distribution of
large dimensional random matrices, *J. Multivariate Anal.* 54 (1995) 295-309.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest
from scipy.optimize import brentq

from attnrmt.model.table import sample_table
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.theory import bulk_edges, critical_u, predict_grid, spike, spike_outliers

RTOL = 1e-12
GRID = (0.05, 0.3, 0.5, 1.0, 2.0, 4.0)
PAIRS = [(delta, gamma) for delta in GRID for gamma in GRID]
QUADRATURE_NODES = 4000
COMPLEX_STEP = 1e-30


# --------------------------------------------------------------------------- references


@functools.cache
def mp_quadrature(c: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``tau`` and weights with ``sum(weights * g(tau)) = int g dMP_c`` over the
    continuous part of ``MP_c`` (density ``sqrt((b - x)(x - a)) / (2 pi c x)`` on
    ``[a, b] = [(1 - sqrt c)^2, (1 + sqrt c)^2]``; the atom at 0 of ``c > 1`` adds nothing
    to the integrals below, whose integrands vanish at 0): Gauss-Chebyshev of the second
    kind after ``x = (a + b)/2 + (b - a)/2 t``. O(QUADRATURE_NODES)."""
    a, b = (1 - np.sqrt(c)) ** 2, (1 + np.sqrt(c)) ** 2
    angle = np.arange(1, QUADRATURE_NODES + 1) * np.pi / (QUADRATURE_NODES + 1)
    half = (b - a) / 2
    tau = (a + b) / 2 + half * np.cos(angle)
    chebyshev = np.pi / (QUADRATURE_NODES + 1) * np.sin(angle) ** 2
    return tau, chebyshev * half**2 / (2 * np.pi * c * tau)


def hard_edge(delta: float, gamma: float) -> bool:
    """Whether the two largest of ``{1, delta, gamma}`` coincide (lower edge 0)."""
    largest, middle = sorted((1.0, delta, gamma))[:0:-1]
    return largest == middle


def silverstein_choi_edges(delta: float, gamma: float) -> tuple[float, float]:
    """``(lower, upper)`` of the support of ``MP_delta ⊠ MP_gamma`` as the values of
    ``z(m) = -1/m + ratio int tau dH / (1 + tau m)`` (``H = MP_population``) at the roots
    of ``z'(m) = 1/m^2 - ratio int tau^2 dH / (1 + tau m)^2`` (Silverstein and Choi 1995);
    the lower edge is 0 on a hard edge. O(QUADRATURE_NODES) per evaluation."""
    population, ratio = min(delta, gamma), max(delta, gamma)
    tau, weight = mp_quadrature(population)
    a, b = (1 - np.sqrt(population)) ** 2, (1 + np.sqrt(population)) ** 2

    def z(m: float) -> float:
        return -1 / m + ratio * float(np.sum(weight * tau / (1 + tau * m)))

    def slope(m: float) -> float:
        return 1 / m**2 - ratio * float(np.sum(weight * tau**2 / (1 + tau * m) ** 2))

    upper = z(brentq(slope, -(1 - 1e-9) / b, -1e-9, xtol=1e-16, rtol=1e-15))
    if hard_edge(delta, gamma):
        return 0.0, upper
    if ratio < 1:  # m = -1/s, s in (0, a)
        s = brentq(lambda s: slope(-1 / s), 1e-9 * a, (1 - 1e-9) * a, xtol=1e-17, rtol=1e-15)
        return z(-1 / s), upper
    x = brentq(lambda x: slope(np.exp(x)), -30.0, 30.0, xtol=1e-15, rtol=1e-15)
    return z(float(np.exp(x))), upper


def sample_map(u: complex, delta: float, gamma: float) -> complex:
    """``f(u) = (1 + u)(1 + delta u)(1 + gamma u) / u`` (docs/model.md, "Spike formulas")."""
    return (1 + u) * (1 + delta * u) * (1 + gamma * u) / u


def population_map(u: complex, delta: float) -> complex:
    """``g(u) = (1 + u)(1 + delta u) / u``."""
    return (1 + u) * (1 + delta * u) / u


def derivative(function: Callable[[complex], complex], u: float) -> float:
    """``function'(u)`` by complex step (exact to rounding for an analytic function)."""
    return float(np.imag(function(u + 1j * COMPLEX_STEP)) / COMPLEX_STEP)


def critical_point(delta: float, gamma: float) -> float:
    """The positive root of ``f'(u)`` (``f`` decreases, then increases on ``u > 0``)."""
    return brentq(
        lambda u: derivative(lambda v: sample_map(v, delta, gamma), u),
        1e-6,
        1e3,
        xtol=1e-16,
        rtol=1e-15,
    )


# --------------------------------------------------------------------------- bulk edges


@pytest.mark.parametrize(("delta", "gamma"), PAIRS)
def test_bulk_edges_are_the_silverstein_choi_critical_values(delta: float, gamma: float) -> None:
    lower, upper = silverstein_choi_edges(delta, gamma)
    found_lower, found_upper = bulk_edges(delta, gamma)
    assert found_upper == pytest.approx(upper, rel=RTOL)
    if lower == 0.0:
        assert found_lower == 0.0
    else:
        assert found_lower == pytest.approx(lower, rel=RTOL)
    # the upper edge is also f at its positive critical point (the sample threshold's u*)
    assert sample_map(critical_point(delta, gamma), delta, gamma).real == pytest.approx(
        upper, rel=RTOL
    )
    assert critical_u(delta, gamma) == pytest.approx(critical_point(delta, gamma), rel=1e-10)


@pytest.mark.parametrize("c", [0.05, 0.3, 0.5, 0.8, 2.0, 4.0])
def test_bulk_edges_in_closed_form_where_the_critical_polynomial_factors(c: float) -> None:
    """``u^2 f'(u) = 2 delta gamma u^3 + (delta + gamma + delta gamma) u^2 - 1`` is
    ``(u + 1)(2 gamma u^2 + u - 1)`` at ``delta = 1`` and ``(u + 1/c)(2 c^2 u^2 + c^2 u - c)``
    at ``delta = gamma = c``; the edges are ``f`` at the quadratic's roots (the lower one
    only where it lies between the two zeros of ``f`` closest to 0)."""
    root = np.sqrt(1 + 8 * c)
    for delta, gamma in ((1.0, c), (c, 1.0)):
        lower, upper = bulk_edges(delta, gamma)
        assert upper == pytest.approx(sample_map((root - 1) / (4 * c), 1.0, c).real, rel=1e-14)
        expected_lower = sample_map(-(root + 1) / (4 * c), 1.0, c).real if c > 1 else 0.0
        assert lower == pytest.approx(expected_lower, rel=1e-14, abs=0.0)
    root = np.sqrt(c * c + 8 * c)
    lower, upper = bulk_edges(c, c)
    assert upper == pytest.approx(sample_map((root - c) / (4 * c), c, c).real, rel=1e-14)
    expected_lower = sample_map(-(root + c) / (4 * c), c, c).real if c < 1 else 0.0
    assert lower == pytest.approx(expected_lower, rel=1e-14, abs=0.0)


# --------------------------------------------------------------------------- spikes


#: (delta, gamma, theta) -> population outlier, population overlap, sample outlier, sample
#: overlap, at kappa = 1, worked by hand: u = 1/(theta - delta) = 1/4 in both.
HAND_VALUES = {
    (1.0, 1.0, 5.0): (25 / 4, 15 / 16, 125 / 16, 5 / 8),
    (0.5, 2.0, 4.5): (45 / 8, 31 / 32, 135 / 16, 1 / 2),
}


@pytest.mark.parametrize(("delta", "gamma", "theta"), list(HAND_VALUES))
def test_spike_formulas_at_hand_worked_points(delta: float, gamma: float, theta: float) -> None:
    """At u = 1/4: ell = (5/4)(1 + delta/4) 4, 1 - delta/16; lambda = ell (1 + gamma/4),
    [1 - (delta + gamma + delta gamma)/16 - 2 delta gamma/64] / (1 + gamma/4)."""
    pop, pop_overlap, sample, sample_overlap = HAND_VALUES[(delta, gamma, theta)]
    kappa = 0.3
    out = spike_outliers(theta, delta, gamma, kappa)
    assert out.population_outlier == pytest.approx(kappa * pop, rel=1e-14)
    assert out.population_overlap == pytest.approx(pop_overlap, rel=1e-14)
    assert out.sample_outlier == pytest.approx(kappa * sample, rel=1e-14)
    assert out.sample_overlap == pytest.approx(sample_overlap, rel=1e-14)
    # the same point through spike(): alpha/kappa = 2.5; finite_vocab at snr = theta/2.5 -
    # delta has overlaps with u times snr/(snr + delta); paper at snr = theta/2.5
    for variant, snr, alignment in (
        ("finite_vocab", theta / 2.5 - delta, 1 - 2.5 * delta / theta),
        ("paper", theta / 2.5, 1.0),
    ):
        prediction = spike(delta, gamma, snr, 2.5 * kappa, kappa, variant=variant)
        assert prediction.theta == pytest.approx(theta, rel=1e-14)
        assert prediction.sample_outlier == pytest.approx(kappa * sample, rel=1e-14)
        assert prediction.sample_overlap == pytest.approx(alignment * sample_overlap, rel=1e-14)
        assert prediction.population_overlap == pytest.approx(alignment * pop_overlap, rel=1e-14)


@pytest.mark.parametrize(("delta", "gamma"), [(0.3, 0.3), (0.5, 2.0), (2.5, 0.7), (2.5, 3.0)])
def test_overlaps_are_the_derivatives_of_the_outlier_maps(delta: float, gamma: float) -> None:
    """docs/model.md, "Spike formulas": population overlap ``-u^2 g'(u)``, sample overlap
    ``-u^2 f'(u) / (1 + gamma u)``, outliers ``kappa g(u)`` and ``kappa f(u)``, wherever the
    outlier is present (``f`` and ``g`` written here, differentiated by complex step)."""
    kappa = 0.7
    u_star = critical_point(delta, gamma)
    for u in np.linspace(0.05, 0.98, 12) * u_star:  # every sample outlier present
        theta = delta + 1 / u
        out = spike_outliers(theta, delta, gamma, kappa)
        sample_slope = derivative(lambda v: sample_map(v, delta, gamma), u)
        assert out.sample_overlap == pytest.approx(
            -u * u * sample_slope / (1 + gamma * u), rel=RTOL
        )
        assert out.sample_outlier == pytest.approx(
            kappa * sample_map(u, delta, gamma).real, rel=RTOL
        )
        if u < 1 / np.sqrt(delta):
            population_slope = derivative(lambda v: population_map(v, delta), u)
            assert out.population_overlap == pytest.approx(-u * u * population_slope, rel=RTOL)
            assert out.population_outlier == pytest.approx(
                kappa * population_map(u, delta).real, rel=RTOL
            )


# --------------------------------------------------------------------------- theory store


STORE_CONFIG = {
    "run": "exact",
    "seed": 1,
    "positional_models": {"prefix2": {"kind": "prefix", "L": 2}},
    "weight_models": {"w": {"kind": "custom", "values": [0.5, 0.3, 0.15, 0.05]}},
    "sweeps": {
        "grid": {
            "d": [30, 41],
            "delta": [0.5, 2.0],
            "gamma": [0.7, 1.5],
            "T": [4],
            "positional": ["iid", "prefix2"],
            "weights": ["mean", "w"],
            "snr": [0.0, 0.5, 3.0],
            "centered": [True],
            "replicates": 1,
            "top_k": 1,
        }
    },
}
STORE_WEIGHTS = {"mean": np.full(4, 0.25), "w": np.array([0.5, 0.3, 0.15, 0.05])}
STORE_R = {"iid": np.eye(4), "prefix2": np.eye(4)}
STORE_R["prefix2"][:2, :2] = 1.0  # one shared sign on the first L = 2 positions


def test_theory_store_values_follow_from_their_definitions() -> None:
    """``theta``, both thresholds, the bulk edges and the sample outlier of ``theory.zarr``
    (``predict_grid``) at every grid point, from ``w``, ``R``, ``V = 2 round(d/(2 delta))``,
    ``N = round(d/gamma)`` and the references above (1e-12)."""
    sweep = plan_run(STORE_CONFIG).sweeps["grid"]
    positional = {(c.positional, int(c.T)): c.positional_spec for c in sweep.cells}
    weights = {(c.weights, int(c.T)): c.weights_spec for c in sweep.cells}
    theory = predict_grid(sweep.axes, positional, weights)
    checked = 0
    for d in (30, 41):
        for nominal_delta in (0.5, 2.0):
            for nominal_gamma in (0.7, 1.5):
                V, N = 2 * round(d / (2 * nominal_delta)), round(d / nominal_gamma)
                delta, gamma = d / V, d / N
                lower, upper = silverstein_choi_edges(delta, gamma)
                u_star = critical_point(delta, gamma)
                for name, R in STORE_R.items():
                    for weights_name, w in STORE_WEIGHTS.items():
                        kappa, ratio = float(w @ w), float(w @ R @ w) / float(w @ w)
                        point = theory.sel(
                            d=d,
                            delta=nominal_delta,
                            gamma=nominal_gamma,
                            T=4,
                            positional=name,
                            weights=weights_name,
                            centered=True,
                        )
                        assert float(point["bulk_upper_edge"].isel(snr=0)[0]) == pytest.approx(
                            kappa * upper, rel=RTOL
                        )
                        assert float(point["bulk_lower_edge"].isel(snr=0)[0]) == pytest.approx(
                            kappa * lower, rel=RTOL, abs=0.0
                        )
                        assert float(point["pop_bulk_edge"].isel(snr=0)) == pytest.approx(
                            kappa * (1 + np.sqrt(delta)) ** 2, rel=RTOL
                        )
                        for variant, bias in (("finite_vocab", delta), ("paper", 0.0)):
                            at = point.sel(variant=variant)
                            np.testing.assert_allclose(
                                at["theta"], ratio * (np.array([0.0, 0.5, 3.0]) + bias), rtol=RTOL
                            )
                            assert float(
                                at["threshold_snr_population"].isel(snr=0)
                            ) == pytest.approx((delta + np.sqrt(delta)) / ratio - bias, rel=RTOL)
                            assert float(at["threshold_snr_sample"].isel(snr=0)) == pytest.approx(
                                (delta + 1 / u_star) / ratio - bias, rel=1e-10
                            )
                            for s, theta in zip(at["snr"].values, at["theta"].values, strict=True):
                                u = 1 / (theta - delta) if theta > delta else np.inf
                                found = float(at["sample_outlier"].sel(snr=s))
                                if u < u_star:
                                    assert found == pytest.approx(
                                        kappa * sample_map(u, delta, gamma).real, rel=RTOL
                                    )
                                    checked += 1
                                else:
                                    assert np.isnan(found)
    assert checked > 20  # the grid has outliers to compare


# --------------------------------------------------------------------------- theta on tables


TABLE_D = 100
TABLES = 1000


@pytest.mark.parametrize("delta", [0.5, 2.0])
def test_finite_vocab_theta_is_the_mean_class_difference_of_the_tables(delta: float) -> None:
    """``E ||Dlt||^2 = snr + d/V`` at every ``d`` (``||eta||^2 = chi^2_d / V``, variance
    ``2 d / V^2``), so at ``snr = 0`` ``finite_vocab``'s ``theta / (alpha/kappa)`` must be
    the mean of ``||Dlt||^2`` over tables drawn by :func:`attnrmt.model.table.sample_table`:
    ``TABLES = 1000`` tables at ``d = 100``, ``V = 200`` and ``50``, mean within 4 sd of its
    exact sd ``sqrt(2 d / V^2 / TABLES)`` (z measured -0.12 and -0.22). A ``theta`` 3% of
    ``delta`` off is 6.7 sd away (detected with probability 0.997); ``paper`` (``theta =
    0`` at ``snr = 0``) is > 200 sd away."""
    V = 2 * round(TABLE_D / (2 * delta))
    norms = []
    for child in np.random.SeedSequence([2024, V]).spawn(TABLES):
        table = sample_table(TABLE_D, V, 0.0, np.random.default_rng(child))
        norms.append(float(table.class_mean_difference @ table.class_mean_difference))
    sd = np.sqrt(2 * TABLE_D / V**2 / TABLES)
    ratio = 1.7  # any alpha/kappa
    predicted = float(spike(TABLE_D / V, 0.5, 0.0, ratio, 1.0, variant="finite_vocab").theta)
    z = (np.mean(norms) - predicted / ratio) / sd
    assert abs(z) < 4, z
    assert float(spike(TABLE_D / V, 0.5, 0.0, ratio, 1.0, variant="paper").theta) == 0.0
