"""Tests of the bulk law MP_delta ⊠ MP_gamma (docs/model.md, "Bulk law", "Textbook limits").

Tolerances:

* Textbook limits (docs/model.md, "Textbook limits") are evaluated at ratio 1e-12, where
  the exact answer differs from the limit by O(1e-12); the solvers are converged to machine
  precision, so 1e-8 is a comfortable bound that still catches any formula slip.
* Moment checks integrate the density with Gauss–Legendre after a substitution
  ``x = lower + (upper - lower) * ((1 - cos(pi s))/2)^3`` that turns the square-root edges
  and the ``x^{-1/2}`` / ``x^{-2/3}`` hard edges at 0 into smooth integrands; with 600 nodes
  the quadrature error is < 1e-9, far inside the required 1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnrmt.theory import (
    bulk_atom,
    bulk_cdf,
    bulk_density,
    bulk_edges,
    bulk_moments,
    critical_u,
)

TINY = 1e-12
GRID = (0.05, 0.3, 0.5, 1.0, 2.0, 4.0)
PAIRS = [(d, g) for d in GRID for g in GRID]
NODES, WEIGHTS = np.polynomial.legendre.leggauss(600)  # computed once: an eigenproblem


def integrate_density(delta: float, gamma: float, power: int) -> float:
    """``∫ x^power rho(x) dx`` over the support, by substitution + Gauss–Legendre."""
    lower, upper = bulk_edges(delta, gamma)
    s = 0.5 * (NODES + 1.0)
    weights = 0.5 * WEIGHTS
    half = 0.5 * (1.0 - np.cos(np.pi * s))
    x = lower + (upper - lower) * half**3
    dx_ds = (upper - lower) * 3.0 * half**2 * 0.5 * np.pi * np.sin(np.pi * s)
    return float(np.sum(weights * dx_ds * x**power * bulk_density(x, delta, gamma)))


def mp_density(x: np.ndarray, ratio: float) -> np.ndarray:
    """Marchenko–Pastur density (mean 1, ratio < 1), the gamma -> 0 limit."""
    a, b = (1 - np.sqrt(ratio)) ** 2, (1 + np.sqrt(ratio)) ** 2
    return np.sqrt(np.maximum((b - x) * (x - a), 0.0)) / (2 * np.pi * ratio * x)


# --- examples and edges -------------------------------------------------------------------


def test_example_right_edge_half_half() -> None:
    """Spec example: delta = gamma = 0.5 has right edge 4.409; exact value in closed form."""
    u_star = (-0.5 + np.sqrt(4.25)) / 2  # 0.5u^3 + 1.25u^2 - 1 = (u+2)(0.5u^2+0.25u-0.5)
    exact = (1 + u_star) * (1 + 0.5 * u_star) ** 2 / u_star
    _lower, upper = bulk_edges(0.5, 0.5)
    assert upper == pytest.approx(4.409, abs=5e-4)
    assert upper == pytest.approx(exact, rel=1e-13)
    assert critical_u(0.5, 0.5) == pytest.approx(u_star, rel=1e-13)


def test_lower_edge_equal_ratios_below_one_is_positive() -> None:
    """delta == gamma < 1: both factors avoid 0, so the product does
    (a common statement says 0; it is 0 only when the two largest of {1, delta, gamma} coincide)."""
    lower, _ = bulk_edges(0.5, 0.5)
    u_lower = (-0.5 - np.sqrt(4.25)) / 2  # the negative root of 0.5u^2+0.25u-0.5 (÷0.5)
    exact = (1 + u_lower) * (1 + 0.5 * u_lower) ** 2 / u_lower
    assert lower == pytest.approx(exact, rel=1e-12)
    assert lower == pytest.approx(0.0283501364, rel=1e-9)
    assert lower > (1 - np.sqrt(0.5)) ** 4  # free product support bound


@pytest.mark.parametrize(
    ("delta", "gamma"), [(1.0, 1.0), (2.0, 2.0), (4.0, 4.0), (1.0, 0.3), (0.3, 1.0)]
)
def test_lower_edge_zero_when_hard_edge(delta: float, gamma: float) -> None:
    lower, upper = bulk_edges(delta, gamma)
    assert lower == 0.0
    assert upper > 1.0


def test_fuss_catalan_edge() -> None:
    """delta = gamma = 1: critical polynomial (u+1)^2(2u-1), right edge f(1/2) = 27/4."""
    assert critical_u(1.0, 1.0) == pytest.approx(0.5, rel=1e-14)
    assert bulk_edges(1.0, 1.0)[1] == pytest.approx(6.75, rel=1e-14)


@pytest.mark.parametrize("delta", [0.05, 0.3, 0.5, 0.9, 2.0, 4.0])
def test_gamma_to_zero_gives_marchenko_pastur_edges(delta: float) -> None:
    """docs/model.md, "Textbook limits": gamma -> 0, bulk MP_delta with edges (1 ±
    sqrt(delta))^2."""
    for a, b in [(delta, TINY), (TINY, delta)]:  # symmetric in the two ratios
        lower, upper = bulk_edges(a, b)
        assert upper == pytest.approx((1 + np.sqrt(delta)) ** 2, abs=1e-8)
        assert lower == pytest.approx((1 - np.sqrt(delta)) ** 2, abs=1e-8)
        assert critical_u(a, b) == pytest.approx(1 / np.sqrt(delta), rel=1e-8)


@pytest.mark.parametrize("delta", [0.1, 0.5, 0.8])
def test_gamma_to_zero_density_is_marchenko_pastur(delta: float) -> None:
    lower, upper = (1 - np.sqrt(delta)) ** 2, (1 + np.sqrt(delta)) ** 2
    x = np.linspace(lower, upper, 203)[1:-1]
    np.testing.assert_allclose(
        bulk_density(x, delta, TINY), mp_density(x, delta), rtol=0, atol=1e-8
    )


def test_edges_are_critical_values_of_f() -> None:
    """f has a local minimum at u* (upper) and local maximum at the lower critical point."""
    delta, gamma = np.meshgrid(GRID, GRID)
    u_star = critical_u(delta, gamma)
    residual = 2 * delta * gamma * u_star**3 + (delta + gamma + delta * gamma) * u_star**2 - 1
    np.testing.assert_allclose(residual, 0.0, atol=1e-13)
    f_star = (1 + u_star) * (1 + delta * u_star) * (1 + gamma * u_star) / u_star
    np.testing.assert_allclose(bulk_edges(delta, gamma)[1], f_star, rtol=1e-14)


def test_atom() -> None:
    assert bulk_atom(0.5, 0.5) == 0.0
    assert bulk_atom(2.0, 0.5) == pytest.approx(0.5)
    assert bulk_atom(2.0, 4.0) == pytest.approx(0.75)
    np.testing.assert_allclose(bulk_atom([1.0, 3.0], [0.2, 1.5]), [0.0, 2 / 3])


def test_moments_formula() -> None:
    m1, m2, m3 = bulk_moments(0.5, 2.0)
    assert (m1, m2, m3) == pytest.approx((1.0, 3.5, 1 + 7.5 + 0.25 + 4 + 3))


# --- density against moments ----------------------------------------------------------------


@pytest.mark.parametrize(("delta", "gamma"), PAIRS)
def test_density_mass_and_moments(delta: float, gamma: float) -> None:
    """∫rho = 1 - atom; ∫x rho = 1; ∫x^2 rho = m2; ∫x^3 rho = m3 (atom at 0 adds nothing)."""
    m1, m2, m3 = bulk_moments(delta, gamma)
    mass = integrate_density(delta, gamma, 0)
    assert mass == pytest.approx(1 - bulk_atom(delta, gamma), abs=1e-4)
    assert integrate_density(delta, gamma, 1) == pytest.approx(m1, rel=1e-4)
    assert integrate_density(delta, gamma, 2) == pytest.approx(m2, rel=1e-4)
    assert integrate_density(delta, gamma, 3) == pytest.approx(m3, rel=1e-4)


def test_density_zero_outside_support() -> None:
    lower, upper = bulk_edges(0.5, 2.0)
    x = np.array([-1.0, 0.0, 0.5 * lower, lower, upper, 1.5 * upper, 100.0])
    np.testing.assert_array_equal(bulk_density(x, 0.5, 2.0), 0.0)
    assert np.all(bulk_density(np.linspace(lower, upper, 50)[1:-1], 0.5, 2.0) > 0)


# --- cumulative distribution ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "gamma"),
    [(0.5, 0.5), (0.05, 4.0), (2.0, 3.0), (1.0, 1.0), (4.0, 4.0), (1.0, 0.3), (3.0, 1.0)],
)
def test_cdf_monotone_from_atom_to_one(delta: float, gamma: float) -> None:
    """Closed-form cdf: 0 below 0, atom on [0, lower], 1 from upper, non-decreasing.

    Round-off allowance for monotonicity: 1e-13 (each value is a sum of O(1) terms)."""
    lower, upper = bulk_edges(delta, gamma)
    atom = bulk_atom(delta, gamma)
    x = np.linspace(lower, upper, 100_001)
    cdf = bulk_cdf(x, delta, gamma)
    assert np.all(np.diff(cdf) >= -1e-13)
    assert cdf[0] == pytest.approx(atom, abs=1e-12)
    assert cdf[-1] == 1.0
    assert bulk_cdf(-0.1, delta, gamma) == 0.0
    assert bulk_cdf(0.0, delta, gamma) == pytest.approx(atom)
    assert bulk_cdf(upper * 1.01, delta, gamma) == 1.0


@pytest.mark.parametrize(("delta", "gamma"), [(0.5, 0.5), (0.3, 2.0), (2.0, 2.0), (1.0, 0.3)])
def test_cdf_matches_integrated_density(delta: float, gamma: float) -> None:
    """Two independent routes: closed form (F) vs quadrature of |Im u|/(pi x); 1e-7
    (quadrature error with 600 nodes is below 1e-10)."""
    lower, upper = bulk_edges(delta, gamma)
    atom = bulk_atom(delta, gamma)
    s, weights = NODES, WEIGHTS
    for fraction in (0.01, 0.2, 0.5, 0.9, 0.999):
        end = lower + fraction * (upper - lower)
        t = 0.5 * (s + 1.0)
        # x - lower ~ t^6 at the lower edge (smooths sqrt and x^{-1/2}, x^{-2/3} hard edges);
        # the cut at `end` is an interior point, where the density is smooth
        x = lower + (end - lower) * (2 * t - t**2) ** 6
        dx = (end - lower) * 6 * (2 * t - t**2) ** 5 * 2 * (1 - t)
        integral = float(np.sum(0.5 * weights * dx * bulk_density(x, delta, gamma)))
        assert bulk_cdf(end, delta, gamma) == pytest.approx(atom + integral, abs=1e-7)


def test_cdf_derivative_is_density() -> None:
    x = np.linspace(0.2, 4.2, 41)
    step = 1e-6
    numeric = (bulk_cdf(x + step, 0.5, 0.5) - bulk_cdf(x - step, 0.5, 0.5)) / (2 * step)
    np.testing.assert_allclose(numeric, bulk_density(x, 0.5, 0.5), rtol=1e-6, atol=1e-8)


# --- vectorisation and validation -------------------------------------------------------------


def test_broadcast_shapes() -> None:
    x = np.linspace(0.1, 5, 5).reshape(5, 1, 1)
    delta = np.array([0.2, 1.0, 3.0]).reshape(1, 3, 1)
    gamma = np.array([0.5, 2.0]).reshape(1, 1, 2)
    density = bulk_density(x, delta, gamma)
    cdf = bulk_cdf(x, delta, gamma)
    assert density.shape == cdf.shape == (5, 3, 2)
    lower, upper = bulk_edges(delta, gamma)
    assert lower.shape == upper.shape == (1, 3, 2)
    assert critical_u(delta, gamma).shape == (1, 3, 2)
    assert bulk_atom(delta, gamma).shape == (1, 3, 2)
    assert all(m.shape == (1, 3, 2) for m in bulk_moments(delta, gamma))
    for i, j, k in np.ndindex(5, 3, 2):
        args = (float(x[i, 0, 0]), float(delta[0, j, 0]), float(gamma[0, 0, k]))
        assert density[i, j, k] == pytest.approx(bulk_density(*args), rel=1e-12, abs=1e-300)
        assert cdf[i, j, k] == pytest.approx(bulk_cdf(*args), rel=1e-12)


def test_scalar_in_scalar_out() -> None:
    assert np.ndim(bulk_density(1.0, 0.5, 0.5)) == 0
    assert np.ndim(bulk_cdf(1.0, 0.5, 0.5)) == 0
    assert isinstance(float(bulk_edges(0.5, 0.5)[0]), float)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: bulk_density(1.0, 0.0, 0.5), "delta"),
        (lambda: bulk_density(1.0, 0.5, -1.0), "gamma"),
        (lambda: bulk_density(np.nan, 0.5, 0.5), "x"),
        (lambda: bulk_cdf([1.0, np.inf], 0.5, 0.5), "x"),
        (lambda: bulk_cdf(1.0, np.nan, 0.5), "delta"),
        (lambda: bulk_edges(0.5, 0.0), "gamma"),
        (lambda: bulk_atom(-0.5, 0.5), "delta"),
        (lambda: bulk_moments(0.5, np.nan), "gamma"),
        (lambda: critical_u(0.0, 1.0), "delta"),
    ],
)
def test_invalid_inputs_raise_naming_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name}="):
        call()


@pytest.mark.parametrize(("delta", "gamma"), [(1.0, 0.3), (2.0, 2.0), (0.5, 0.5)])
def test_continuous_across_hard_edge_degeneracy(delta: float, gamma: float) -> None:
    """The hard-edge branch (two largest of {1, delta, gamma} equal) joins the generic
    one continuously: perturbing delta by 1e-9 moves density and cdf by O(1e-9) at x >= 1e-6
    (relative 1e-6 allowed)."""
    x = np.array([1e-6, 1e-3, 0.1, 1.0, 3.0])
    for nearby in (delta * (1 - 1e-9), delta * (1 + 1e-9)):
        np.testing.assert_allclose(
            bulk_density(x, nearby, gamma), bulk_density(x, delta, gamma), rtol=1e-6
        )
        np.testing.assert_allclose(
            bulk_cdf(x, nearby, gamma), bulk_cdf(x, delta, gamma), rtol=1e-6, atol=1e-8
        )


@pytest.mark.parametrize(("delta", "gamma", "k"), [(1.0, 0.3, 2), (2.0, 2.0, 2), (1.0, 1.0, 3)])
def test_hard_edge_power_law(delta: float, gamma: float, k: int) -> None:
    """At a hard edge u -> z1 = -1/M as a k-fold zero of f: rho ~ C x^{1/k - 1} with
    C = sin(pi/k) / (pi (M K)^{1/k}), K = M^k prod_{a != M} (1 - a/M); relative 1e-6 at
    x = 1e-30 (the correction is O(x^{1/k}))."""
    scales = np.array([1.0, delta, gamma])
    largest = scales.max()
    strength = largest**k * np.prod(1 - scales[scales != largest] / largest)
    constant = np.sin(np.pi / k) / (np.pi * (largest * strength) ** (1 / k))
    x = 1e-30
    assert bulk_density(x, delta, gamma) == pytest.approx(constant * x ** (1 / k - 1), rel=1e-6)


def test_broadcast_views_match_materialised_grids() -> None:
    """Edges are solved once per distinct (delta, gamma) along broadcast axes; results must
    equal those on materialised arrays and be writeable."""
    shape = (3, 4, 50)
    delta = np.broadcast_to(np.array([0.25, 1.0, 2.0]).reshape(3, 1, 1), shape)
    gamma = np.broadcast_to(np.array([0.5, 1.0, 2.0, 4.0]).reshape(1, 4, 1), shape)
    lower, upper = bulk_edges(delta, gamma)
    lower_ref, upper_ref = bulk_edges(delta.copy(), gamma.copy())
    np.testing.assert_array_equal(lower, lower_ref)
    np.testing.assert_array_equal(upper, upper_ref)
    assert lower.flags.writeable and upper.flags.writeable
    assert critical_u(delta, gamma).flags.writeable
    x = np.linspace(0.01, 10, 50)
    np.testing.assert_array_equal(bulk_cdf(x, delta, gamma), bulk_cdf(x, delta.copy(), gamma))
