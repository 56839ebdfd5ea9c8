"""The free-probability engine (docs/model.md, "A general bulk by subordination")."""

from __future__ import annotations

import numpy as np
import pytest

from attnrmt.theory import bulk_density, bulk_edges
from attnrmt.theory.free import (
    DiscreteLaw,
    FreeProduct,
    MarchenkoPastur,
    free_density,
    free_edges,
    free_stieltjes,
)

# (delta, gamma): both below 1, one above, a hard edge at 0 (delta = 1), equal above 1, and
# two where the lower edge's critical point sits next to the zero of x(s) at s = 0
RATIOS = [
    (0.5, 0.5),
    (0.3, 1.7),
    (2.0, 0.4),
    (1.0, 0.5),
    (1.5, 1.5),
    (0.05, 0.2),
    (3.0, 1.0),
    (0.9, 1.1),
]


def _laws(delta: float, gamma: float) -> list[FreeProduct]:
    """``MP_delta ⊠ MP_gamma`` three ways: two MP factors on a point mass, and one MP
    factor on the closed-form other one (either order)."""
    return [
        FreeProduct((delta, gamma), DiscreteLaw.of([1.0])),
        FreeProduct((delta,), MarchenkoPastur(gamma)),
        FreeProduct((gamma,), MarchenkoPastur(delta)),
    ]


@pytest.mark.parametrize(("delta", "gamma"), RATIOS)
def test_density_and_edges_match_the_closed_form(delta: float, gamma: float) -> None:
    lower, upper = bulk_edges(delta, gamma)
    x = np.linspace(1e-3, 1.05 * upper, 241)  # inside, near and beyond both edges
    expected = bulk_density(x, delta, gamma)
    for law in _laws(delta, gamma):
        np.testing.assert_allclose(free_density(law, x), expected, rtol=0, atol=1e-9)
        np.testing.assert_allclose(free_edges(law), [[lower, upper]], rtol=1e-9, atol=1e-12)


def test_stieltjes_outside_the_support_is_real_and_its_derivative_matches() -> None:
    law = FreeProduct((0.5, 0.5), DiscreteLaw.of([1.0]))
    x, h = np.array([5.0, 8.0, 20.0]), 1e-5
    m, dm = free_stieltjes(law, x)
    np.testing.assert_array_equal(m.imag, 0.0)
    assert np.all(m.real < 0.0)  # m(x) = E[1/(t - x)] < 0 right of the support
    m_plus, _ = free_stieltjes(law, x + h)
    m_minus, _ = free_stieltjes(law, x - h)
    np.testing.assert_allclose(dm.real, ((m_plus - m_minus) / (2 * h)).real, rtol=1e-7)
    # the mean is 1: m(x) = -1/x - 1/x^2 - ... at large x
    big, _ = free_stieltjes(law, np.array([1e6]))
    assert big.real[0] == pytest.approx(-1e-6 - 1e-12, rel=1e-9)


def test_a_fine_discrete_law_approaches_the_continuous_one() -> None:
    # MP_gamma by 400 atoms at its mid-quantiles: the product's density within 2e-3 of the
    # closed form (discretisation error O(1/atoms) away from the edges)
    delta, gamma, atoms = 0.5, 0.5, 400
    lo, hi = (1 - np.sqrt(gamma)) ** 2, (1 + np.sqrt(gamma)) ** 2
    grid = np.linspace(lo, hi, 200_001)
    mp = np.sqrt(np.maximum((hi - grid) * (grid - lo), 0.0)) / (2 * np.pi * gamma * grid)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (mp[1:] + mp[:-1]) * np.diff(grid))])
    quantiles = np.interp((np.arange(atoms) + 0.5) / atoms, cdf / cdf[-1], grid)
    law = FreeProduct((delta,), DiscreteLaw.of(quantiles))
    upper = float(bulk_edges(delta, gamma)[1])
    x = np.linspace(0.2, 0.9 * upper, 60)
    np.testing.assert_allclose(free_density(law, x), bulk_density(x, delta, gamma), atol=2e-3)


def test_two_atom_population_matches_a_sample_covariance() -> None:
    # population 1 and 4 (half each), ratio 0.1: two separated components; d = 600,
    # N = 6000, seed 0. Edges within 3% (finite-d offset ~ d^(-2/3)), the empirical CDF
    # within 0.01 of the theory's (eigenvalue fluctuations are O(1/d)).
    d, ratio = 600, 0.1
    population = np.repeat([1.0, 4.0], d // 2)
    law = FreeProduct((ratio,), DiscreteLaw.of([1.0, 4.0]))
    rng = np.random.default_rng(0)
    X = rng.standard_normal((d, int(d / ratio))) * np.sqrt(population)[:, None]
    eigenvalues = np.linalg.eigvalsh(X @ X.T / X.shape[1])
    edges = free_edges(law)
    assert edges.shape == (2, 2)
    empirical = [eigenvalues[: d // 2], eigenvalues[d // 2 :]]
    for (lower, upper), cluster in zip(edges, empirical, strict=True):
        assert cluster.min() == pytest.approx(lower, rel=0.03)
        assert cluster.max() == pytest.approx(upper, rel=0.03)
    x = np.concatenate([np.linspace(lower, upper, 400) for lower, upper in edges])
    rho = free_density(law, x)
    parts = [
        np.cumsum(np.diff(x[i : i + 400]) * 0.5 * (rho[i + 1 : i + 400] + rho[i : i + 399]))
        for i in (0, 400)
    ]
    cdf = np.concatenate([[0.0], parts[0], parts[0][-1] + np.concatenate([[0.0], parts[1]])])
    assert cdf[-1] == pytest.approx(1.0, abs=2e-3)  # the grid's quadrature error
    sim = np.searchsorted(np.sort(eigenvalues), x, side="right") / d
    assert np.max(np.abs(sim - cdf)) < 0.01


@pytest.mark.parametrize(
    ("ratios", "atoms"),
    [((0.05, 0.01), [0.2, 0.5, 1.0, 2.0, 5.0]), ((0.02, 0.01), np.geomspace(0.1, 10.0, 8))],
)
def test_separated_components_each_carry_their_atom_s_mass(ratios, atoms) -> None:
    # small ratios split the bulk into one component per atom; each holds mass 1/atoms
    # (quadrature on cosine-spaced points resolves the square-root edges to ~1e-7)
    law = FreeProduct(ratios, DiscreteLaw.of(atoms))
    edges = free_edges(law)
    assert edges.shape == (len(atoms), 2)
    t = 0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, 1001))
    for lower, upper in edges:
        x = lower + (upper - lower) * t
        rho = free_density(law, x)
        assert np.sum(np.diff(x) * 0.5 * (rho[1:] + rho[:-1])) == pytest.approx(
            1 / len(atoms), abs=1e-6
        )


def test_laws_refuse_non_positive_ratios_and_mismatched_weights() -> None:
    with pytest.raises(ValueError, match="ratios"):
        FreeProduct((0.5, 0.0), DiscreteLaw.of([1.0]))
    with pytest.raises(ValueError, match="ratio"):
        MarchenkoPastur(-0.5)
    with pytest.raises(ValueError, match="weights"):
        DiscreteLaw.of([1.0, 2.0], [1.0])


@pytest.mark.parametrize("ratios", [(0.5,), (0.5, 0.5), (2.0, 0.3)])
def test_skipping_intervals_without_a_physical_turn_keeps_every_edge(
    ratios: tuple[float, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan skips the intervals between poles where ``1 - c g(s)`` is negative
    throughout: the critical points equal those of the full scan to round-off, for power
    spectra (``i^-beta``, 300 atoms: isolated atoms, gaps between them and a dense bulk) and
    a two-level one with a lone atom."""
    import attnrmt.theory.free as free

    spectra = [np.arange(1, 301) ** -beta for beta in (0.25, 0.5, 1.0)]
    spectra.append(np.r_[np.full(75, 4.0), np.full(224, 1.0), 9.0])
    for atoms in spectra:
        law = FreeProduct(ratios, DiscreteLaw.of(atoms))
        found = free.critical_points(law)
        with monkeypatch.context() as patch:
            patch.setattr(free, "_may_turn", lambda law, low, high: np.ones(low.shape, bool))
            full = free.critical_points(law)
        assert found[0].size == full[0].size and found[0].size >= 2
        np.testing.assert_allclose(found[0], full[0], rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(found[1], full[1])
