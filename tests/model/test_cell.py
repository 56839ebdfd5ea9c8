"""simulate_cell: reproducibility, shapes, validation, and agreement with a direct
(slow, obviously-correct) computation of the same cell (docs/model.md, "The generative model",
"Population covariance given the table")."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from attnrmt.contract import TOP_K_FIELDS
from attnrmt.model import (
    CellResult,
    causal_limit_weights,
    pooling_scalars,
    pooling_weights,
    positional_correlation,
    realised_sizes,
    ridge_readout_accuracy,
    sample_signs,
    simulate_cell,
)
from attnrmt.model.table import sample_table, sample_tokens
from tests.model.conftest import assert_products_in_precision

BASE = {
    "d": 60,
    "delta": 0.5,
    "gamma": 0.5,
    "T": 6,
    "positional": {"kind": "prefix", "L": 3},
    "weights": "mean",
    "snr": 2.0,
}
ARRAY_FIELDS = ("eigenvalues", *TOP_K_FIELDS, "effective_weights")
# Agreement with the direct computation: both are exact linear algebra in float64 on
# matrices with entries O(1) and d = 60, so eigenvalues agree to ~1e-13; eigenvector
# overlaps agree to rounding divided by the eigenvalue gap (>= 1e-3 here), so 1e-9 is safe.
LINALG_TOL = 1e-9


def direct_cell(
    seed: int,
    centered: bool,
    positional: dict,
    weights: str,
    top_k: int = 3,
    d: int = BASE["d"],
    delta: float = BASE["delta"],
):
    """The same cell computed naively from the documented random streams (cell.py):
    SeedSequence(seed).spawn(3) -> table, signs, tokens."""
    T = BASE["T"]
    V, N = realised_sizes(d, delta, BASE["gamma"])
    table_rng, sign_rng, token_rng = (
        np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(3)
    )
    table = sample_table(d, V, BASE["snr"], table_rng)
    signs, labels = sample_signs(positional, T, N, sign_rng)
    tokens = sample_tokens(signs, V, token_rng)
    R = positional_correlation(positional, T)
    w = pooling_weights(weights, T, R)
    E = table.embeddings.T  # docs/model.md's d x V
    pooled = sum(w[t] * E[:, tokens[:, t]] for t in range(T))  # d x N, c_n as columns
    assert np.all(table.token_class[tokens] == signs)  # tokens are of the sign's class
    vectors = pooled - pooled.mean(axis=1, keepdims=True) if centered else pooled
    S = vectors @ vectors.T / N
    eigenvalues, eigenvectors = np.linalg.eigh(S)
    top = eigenvectors[:, ::-1][:, :top_k]
    m_plus = E[:, table.token_class == 1].mean(axis=1)
    m_minus = E[:, table.token_class == -1].mean(axis=1)
    mbar, dlt = (m_plus + m_minus) / 2, (m_plus - m_minus) / 2
    alpha, kappa, sigma = w @ R @ w, w @ w, w.sum()
    population = (
        kappa * E @ E.T / V - kappa * np.outer(mbar, mbar) + (alpha - kappa) * np.outer(dlt, dlt)
    )
    if not centered:
        population += sigma**2 * np.outer(mbar, mbar)
    pop_values, pop_vectors = np.linalg.eigh(population)
    u = np.zeros(d)
    u[0] = 1.0

    def overlaps(basis: np.ndarray, direction: np.ndarray) -> np.ndarray:
        return (direction @ basis / np.linalg.norm(direction)) ** 2

    return {
        "eigenvalues": eigenvalues,
        "top_eigenvalues": eigenvalues[::-1][:top_k],
        "overlap_signal": overlaps(top, u),
        "overlap_class_mean": overlaps(top, dlt),
        "overlap_table_mean": overlaps(top, mbar),
        "pop_top_eigenvalues": pop_values[::-1][:top_k],
        "pop_overlap_signal": overlaps(pop_vectors[:, ::-1][:, :top_k], u),
        "effective_weights": w,
        "alpha": alpha,
        "kappa": kappa,
        "sigma": sigma,
        "pooled": pooled.T,
        "labels": labels,
    }


@pytest.mark.parametrize("centered", [True, False])
@pytest.mark.parametrize(
    ("positional", "weights"),
    [
        ({"kind": "prefix", "L": 3}, "mean"),
        ({"kind": "markov", "r": 0.6}, "optimal"),
        ({"kind": "label", "rho0": 0.9, "L": 2}, "harmonic"),
    ],
)
def test_matches_direct_computation(centered: bool, positional: dict, weights: str) -> None:
    result = simulate_cell(
        **{**BASE, "positional": positional, "weights": weights}, centered=centered, seed=11
    )
    expected = direct_cell(11, centered, positional, weights)
    for name in ARRAY_FIELDS:
        np.testing.assert_allclose(getattr(result, name), expected[name], rtol=0, atol=LINALG_TOL)
    for name in ("alpha", "kappa", "sigma"):
        assert getattr(result, name) == pytest.approx(expected[name], abs=1e-14)
    if expected["labels"] is None:
        assert math.isnan(result.downstream_accuracy)
    else:
        accuracy = ridge_readout_accuracy(expected["pooled"], expected["labels"].astype(float))
        assert result.downstream_accuracy == accuracy


@pytest.mark.parametrize("centered", [True, False])
@pytest.mark.parametrize(
    ("positional", "weights"),
    [({"kind": "markov", "r": 0.6}, "mean"), ({"kind": "label", "rho0": 0.9, "L": 2}, "harmonic")],
)
def test_matches_direct_computation_with_fewer_tokens_than_dimensions(
    centered: bool, positional: dict, weights: str
) -> None:
    """delta = 2 (V = 30 < d = 60 < N = 120): S and the population matrix both go through
    V x V matrices (``_sample_spectrum_from_tokens``, ``_population_top_from_tokens``);
    every field still equals the direct computation, and a label model still gets its
    readout of the pooled rows."""
    result = simulate_cell(
        **{**BASE, "delta": 2.0, "positional": positional, "weights": weights},
        centered=centered,
        seed=5,
    )
    assert result.V == 30 < BASE["d"]
    expected = direct_cell(5, centered, positional, weights, delta=2.0)
    for name in ARRAY_FIELDS:
        np.testing.assert_allclose(getattr(result, name), expected[name], rtol=0, atol=LINALG_TOL)
    if expected["labels"] is None:
        assert math.isnan(result.downstream_accuracy)
    else:
        accuracy = ridge_readout_accuracy(expected["pooled"], expected["labels"].astype(float))
        assert result.downstream_accuracy == accuracy


def test_matches_direct_computation_with_lanczos_population() -> None:
    # d = 320 >= _LANCZOS_MIN_D: the population eigenpairs come from Lanczos, accurate to
    # 1e-12 relative in eigenvalues and ~1e-6 in overlaps (see the Lanczos test below).
    positional = {"kind": "markov", "r": 0.6}
    result = simulate_cell(**{**BASE, "d": 320, "positional": positional}, seed=4)
    expected = direct_cell(4, True, positional, "mean", d=320)
    for name in ARRAY_FIELDS[:5]:
        np.testing.assert_allclose(getattr(result, name), expected[name], rtol=0, atol=LINALG_TOL)
    np.testing.assert_allclose(
        result.pop_top_eigenvalues, expected["pop_top_eigenvalues"], rtol=1e-12
    )
    np.testing.assert_allclose(
        result.pop_overlap_signal, expected["pop_overlap_signal"], rtol=0, atol=1e-6
    )


def test_same_seed_is_bit_identical_and_seeds_matter() -> None:
    for weights in ("mean", {"kind": "causal_attention", "tau": 1.0}):
        kwargs = {**BASE, "positional": {"kind": "label", "rho0": 0.8, "L": 3}, "weights": weights}
        first, second = simulate_cell(**kwargs, seed=3), simulate_cell(**kwargs, seed=3)
        other = simulate_cell(**kwargs, seed=4)
        words = simulate_cell(**kwargs, seed=[3, 1])
        for field in dataclasses.fields(CellResult):
            if field.name == "compute_seconds":
                continue
            np.testing.assert_array_equal(getattr(first, field.name), getattr(second, field.name))
        assert not np.array_equal(first.eigenvalues, other.eigenvalues)
        assert not np.array_equal(first.eigenvalues, words.eigenvalues)
        np.testing.assert_array_equal(
            simulate_cell(**kwargs, seed=np.array([3, 1])).eigenvalues, words.eigenvalues
        )


def test_common_random_numbers_across_weights() -> None:
    # Same seed, different weights: same table, signs and tokens. Doubling the weights
    # must then scale S and the population matrix by exactly 4 (up to rounding, 1e-12
    # relative) and leave every overlap unchanged.
    T = BASE["T"]
    kwargs = {key: value for key, value in BASE.items() if key != "weights"}
    mean = simulate_cell(**kwargs, weights="mean", seed=2)
    double = simulate_cell(**kwargs, weights={"kind": "custom", "values": [2 / T] * T}, seed=2)
    np.testing.assert_allclose(double.top_eigenvalues, 4 * mean.top_eigenvalues, rtol=1e-12)
    np.testing.assert_allclose(double.pop_top_eigenvalues, 4 * mean.pop_top_eigenvalues, rtol=1e-12)
    np.testing.assert_allclose(double.overlap_signal, mean.overlap_signal, atol=1e-10)
    assert double.kappa == pytest.approx(4 * mean.kappa)


def test_shapes_orderings_and_ranges() -> None:
    result = simulate_cell(**BASE, top_k=4, seed=0)
    d, k = BASE["d"], 4
    assert result.eigenvalues.shape == (d,)
    for name in TOP_K_FIELDS:
        assert getattr(result, name).shape == (k,), name
    assert result.effective_weights.shape == (BASE["T"],)
    assert np.all(np.diff(result.eigenvalues) >= 0)
    assert np.all(np.diff(result.top_eigenvalues) <= 0)
    assert np.all(np.diff(result.pop_top_eigenvalues) <= 0)
    np.testing.assert_array_equal(result.top_eigenvalues, result.eigenvalues[::-1][:k])
    for name in (
        "overlap_signal",
        "overlap_class_mean",
        "overlap_table_mean",
        "pop_overlap_signal",
    ):
        values = getattr(result, name)
        # Bessel: squared overlaps of k orthonormal eigenvectors with one unit direction sum
        # to at most 1. squared_overlaps clips each value into [0, 1], so a per-value range
        # check could not fail; the sum catches unnormalised or non-orthogonal vectors.
        assert np.all(values >= 0) and values.sum() <= 1 + 1e-9, name
    assert isinstance(result.V, int) and isinstance(result.N, int)
    assert isinstance(result.alpha, float) and result.compute_seconds > 0
    assert math.isnan(result.downstream_accuracy)
    as_dict = result.to_dict()
    # a two-class cell's record: the fields without a default (no K-class details)
    assert list(as_dict) == [
        field.name
        for field in dataclasses.fields(CellResult)
        if field.default is dataclasses.MISSING
    ]
    with pytest.raises(ValueError, match="read-only"):
        result.eigenvalues[0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.alpha = 2.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("d", "delta", "gamma", "V", "N"),
    [
        (100, 0.3, 0.7, 334, 143),  # V = 2 round(166.7) ; N = round(142.9)
        (60, 0.5, 0.5, 120, 120),
        (10, 2.0, 4.0, 4, 2),  # d/(2 delta) = 2.5 rounds half to even -> 2; 10/4 = 2.5 -> 2
        (7, 0.25, 2.0, 28, 4),  # N = round(3.5) = 4
    ],
)
def test_realised_sizes(d: int, delta: float, gamma: float, V: int, N: int) -> None:
    assert realised_sizes(d, delta, gamma) == (V, N)
    result = simulate_cell(d, delta, gamma, 3, {"kind": "iid"}, "mean", 1.0, top_k=2)
    assert (result.V, result.N) == (V, N)


def test_tiny_cells() -> None:
    result = simulate_cell(2, 0.5, 0.5, 1, {"kind": "iid"}, "optimal", 0.0, top_k=2, seed=1)
    assert result.eigenvalues.shape == (2,) and result.top_eigenvalues.shape == (2,)
    assert result.alpha == pytest.approx(result.kappa)
    for weights in ("mean", "last", "harmonic", {"kind": "causal_limit", "tau": 1.0}):
        single = simulate_cell(5, 1.0, 1.0, 1, "iid", weights, 1.0, top_k=5)
        np.testing.assert_allclose(single.effective_weights, [1.0], atol=1e-15)


def test_causal_attention_cell() -> None:
    # The pooled vectors are the real attention outputs; their mean effective weights sum to
    # 1 and at d = 200 sit within 2e-3 of causal_limit(tau) (per-sequence fluctuations
    # ~ tau/sqrt(d) * w ~ 0.012, averaged over N = 400 sequences -> ~6e-4; 2e-3 is ~3.5 SE).
    kwargs = {**BASE, "d": 200, "T": 6, "weights": {"kind": "causal_attention", "tau": 1.0}}
    result = simulate_cell(**kwargs, seed=5)
    assert result.effective_weights.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(
        result.effective_weights, causal_limit_weights(6, 1.0), rtol=0, atol=2e-3
    )
    R = positional_correlation(BASE["positional"], 6)
    alpha, kappa, sigma = pooling_scalars(result.effective_weights, R)
    assert (result.alpha, result.kappa, result.sigma) == pytest.approx((alpha, kappa, sigma))
    limit = simulate_cell(**{**kwargs, "weights": {"kind": "causal_limit", "tau": 1.0}}, seed=5)
    # Same table and tokens: the spectra of real attention and of its limit are close
    # (relative 2%: weights differ by ~1% per sequence).
    np.testing.assert_allclose(result.top_eigenvalues, limit.top_eigenvalues, rtol=0.02)


def test_downstream_accuracy_of_a_strong_label_model() -> None:
    # rho0 = 0.95 on 4 of 6 positions with snr = 4: the label is nearly a linear function
    # of the pooled class-mean coordinate, so a readout must beat chance by far. With
    # N/2 = 100 test rows a 0.75 floor is > 5 binomial SE above 0.5.
    result = simulate_cell(
        100, 0.5, 0.5, 6, {"kind": "label", "rho0": 0.95, "L": 4}, "optimal", 4.0, seed=0
    )
    assert 0.75 < result.downstream_accuracy <= 1.0


def test_ridge_readout() -> None:
    rng = np.random.default_rng(0)
    labels = np.where(rng.random(200) < 0.5, 1.0, -1.0)
    features = rng.standard_normal((200, 30))
    features[:, 3] += 3 * labels  # Bayes accuracy Phi(3) = 0.999 along one coordinate
    # Fitting 30 coefficients from 100 training rows adds noise of ~sqrt(29/100) per unit of
    # signal in the 29 null coordinates (measured accuracy 0.95); 0.9 leaves room for it.
    assert ridge_readout_accuracy(features, labels) > 0.9
    # A useless feature set gives chance level (100 test rows: 0.5 +- 0.05 SE; 4 SE band).
    assert abs(ridge_readout_accuracy(rng.standard_normal((200, 30)), labels) - 0.5) < 0.2
    with pytest.raises(ValueError, match=r"train_fraction=1\.5"):
        ridge_readout_accuracy(features, labels, train_fraction=1.5)
    with pytest.raises(ValueError, match="ridge=0"):
        ridge_readout_accuracy(features, labels, ridge=0)
    with pytest.raises(ValueError, match="labels shape"):
        ridge_readout_accuracy(features, labels[:10])


BAD_ARGUMENTS = [
    ({"d": 1}, "d=1"),
    ({"d": 2.5}, "d=2.5"),
    ({"d": True}, "d=True"),
    ({"delta": 0}, "delta=0"),
    ({"delta": -0.5}, "delta=-0.5"),
    ({"delta": 1e9}, "delta=1000000000.0"),  # V = 0 tokens
    ({"gamma": float("nan")}, "gamma=nan"),
    ({"gamma": 0.0}, "gamma=0.0"),
    ({"gamma": 100.0}, "gamma=100.0"),  # N = round(0.6) = 1 sample
    ({"T": 0}, "T=0"),
    ({"snr": -1.0}, "snr=-1.0"),
    ({"snr": float("inf")}, "snr=inf"),
    ({"centered": "yes"}, "centered='yes'"),
    ({"top_k": 0}, "top_k=0"),
    ({"top_k": 61}, "top_k=61"),
    ({"seed": -3}, "seed=-3"),
    ({"seed": 1.5}, "seed=1.5"),
    ({"seed": [1, -2]}, "seed=[1, -2]"),
    ({"seed": []}, "seed=[]"),
    ({"positional": {"kind": "nosuch"}}, "positional.kind='nosuch'"),
    ({"positional": {"kind": "prefix", "L": 7}}, "positional.L=7"),
    ({"positional": {"kind": "markov", "r": 1}}, "positional.r=1"),
    ({"positional": {"kind": "label", "rho": [0.5] * 5}}, "positional.rho="),
    ({"positional": {"kind": "custom", "R": np.eye(3).tolist()}}, "positional.R="),
    ({"weights": "nosuch"}, "weights.kind='nosuch'"),
    ({"weights": {"kind": "custom", "values": [1, 2]}}, "weights.values=[1, 2]"),
    ({"weights": {"kind": "causal_limit", "tau": float("nan")}}, "weights.tau=nan"),
]


@pytest.mark.parametrize(("changes", "fragment"), BAD_ARGUMENTS)
def test_bad_arguments_raise_value_error_naming_them(changes: dict, fragment: str) -> None:
    kwargs = {**BASE, "seed": 0, **changes}
    with pytest.raises(ValueError) as error:
        simulate_cell(**kwargs)
    assert fragment in str(error.value)


def test_largest_allowed_snr_still_simulates_finite_numbers() -> None:
    """MAX_SNR (the config's ceiling too) is safely below where float64 overflows."""
    from attnrmt.model._cell_steps import MAX_SNR

    # exact route and Lanczos route for the population pairs; the top route (dense below
    # d = 200, block Lanczos above)
    for d, spectrum in ((20, "full"), (400, "full"), (20, "top"), (400, "top")):
        result = simulate_cell(d, 0.5, 0.5, 4, "iid", "mean", MAX_SNR, seed=1, spectrum=spectrum)
        for name, value in result.to_dict().items():
            if name != "downstream_accuracy":  # NaN by definition without labels
                assert np.all(np.isfinite(value)), name
        # the signal dominates: the top eigenvector is u, the outlier ~ (alpha/kappa) snr
        assert result.overlap_signal[0] == pytest.approx(1.0, abs=1e-9)
        assert result.pop_overlap_signal[0] == pytest.approx(1.0, abs=1e-9)


# ------------------------------------------------------------------ spectrum="top" route

# Top route against full route, same seed (same table and tokens). Both are float64 linear
# algebra; the top route's stop rule bounds its eigenvalue errors by 1e-10 relative and the
# errors of its squared overlaps by 5e-7 (model/_linalg.py, BLOCK_OVERLAP_TOL), so the
# contract tolerances 1e-8 and 1e-6 hold with margin (measured over the cases below and
# d = 1000, 2000 at snr 0.8, 1.28, 2, two seeds each: <= 1.4e-14 and <= 1.6e-10 with
# overlap bound 1e-7 and no warm start; <= 1.8e-13 and <= 1.8e-9 with the float32 warm
# start and bound 5e-7).
TOP_VALUE_RTOL = 1e-8
TOP_OVERLAP_ATOL = 1e-6
TOP_CASES = [
    # (positional, weights, centered, delta, gamma, snr)
    ({"kind": "iid"}, "mean", True, 0.5, 0.5, 2.0),
    ({"kind": "prefix", "L": 3}, "harmonic", False, 2.0, 0.5, 1.0),
    ({"kind": "markov", "r": 0.5}, "optimal", True, 0.5, 2.0, 3.0),
    (
        {"kind": "label", "rho0": 0.6, "L": 3},
        {"kind": "causal_attention", "tau": 1.0},
        True,
        1.5,
        1.5,
        1.5,
    ),
    (
        {"kind": "custom", "R": np.eye(6).tolist()},
        {"kind": "custom", "values": [1, 0, 0, 0, 0, 1]},
        False,
        0.8,
        1.2,
        0.5,
    ),
]


def assert_top_matches_full(top: CellResult, full: CellResult, top_k: int) -> None:
    """Every field of the top cell equals the full cell's (eigenvalues: the top 2k)."""
    n_values = min(2 * top_k, full.eigenvalues.size)
    assert top.eigenvalues.shape == (n_values,)
    assert np.all(np.diff(top.eigenvalues) >= 0)  # ascending
    np.testing.assert_allclose(top.eigenvalues, full.eigenvalues[-n_values:], rtol=TOP_VALUE_RTOL)
    for name in ("top_eigenvalues", "pop_top_eigenvalues"):
        np.testing.assert_allclose(getattr(top, name), getattr(full, name), rtol=TOP_VALUE_RTOL)
    for name in (
        "overlap_signal",
        "overlap_class_mean",
        "overlap_table_mean",
        "pop_overlap_signal",
    ):
        np.testing.assert_allclose(
            getattr(top, name), getattr(full, name), atol=TOP_OVERLAP_ATOL, err_msg=name
        )
    for name in ("alpha", "kappa", "sigma", "V", "N"):
        assert getattr(top, name) == getattr(full, name)
    np.testing.assert_array_equal(top.effective_weights, full.effective_weights)
    np.testing.assert_equal(top.downstream_accuracy, full.downstream_accuracy)


@pytest.mark.parametrize(("positional", "weights", "centered", "delta", "gamma", "snr"), TOP_CASES)
def test_top_route_matches_full_route(
    positional: dict, weights, centered: bool, delta: float, gamma: float, snr: float
) -> None:
    """d = 400 > DENSE_TOP_MAX_N: the block Lanczos route, over R models, weights,
    centring and delta, gamma on both sides of 1."""
    cell = {
        "d": 400,
        "delta": delta,
        "gamma": gamma,
        "T": 6,
        "positional": positional,
        "weights": weights,
        "snr": snr,
        "centered": centered,
        "top_k": 3,
        "seed": 11,
    }
    assert_top_matches_full(simulate_cell(**cell, spectrum="top"), simulate_cell(**cell), 3)


def test_top_route_matches_full_route_at_the_sample_threshold() -> None:
    """At the finite_vocab sample threshold (iid, mean, delta = gamma = 0.5: snr 1.28) the
    outlier touches the bulk edge: the top pairs are separated by bulk-edge spacings, the
    hard case for the Krylov stop rule (tests/model/test_linalg.py checks a 1e-5 gap).
    d = 1000 (the contract promises equality up to d = 2000)."""
    cell = {
        "d": 1000,
        "delta": 0.5,
        "gamma": 0.5,
        "T": 8,
        "positional": "iid",
        "weights": "mean",
        "snr": 1.28,
        "top_k": 3,
        "seed": 2,
    }
    top, full = simulate_cell(**cell, spectrum="top"), simulate_cell(**cell)
    gaps = -np.diff(full.eigenvalues[::-1][:4]) / full.eigenvalues[-1]
    assert gaps.min() < 0.02  # really next to the edge: relative gaps of bulk-edge size
    assert_top_matches_full(top, full, 3)


def test_top_route_matches_full_route_at_the_population_threshold() -> None:
    """Next to the population transition (snr 0.8 at d = 1000, seed 2; measured with the
    full route) the signal is spread over the top bulk-edge vectors of the population
    matrix (squared overlaps 0.08, 0.03, 0.04, relative gaps 0.02 and 0.01): the
    overlap-aware stop rule must get every one of them right, not only the largest."""
    cell = {
        "d": 1000,
        "delta": 0.5,
        "gamma": 0.5,
        "T": 8,
        "positional": "iid",
        "weights": "mean",
        "snr": 0.8,
        "top_k": 3,
        "seed": 2,
    }
    top, full = simulate_cell(**cell, spectrum="top"), simulate_cell(**cell)
    gaps = -np.diff(full.pop_top_eigenvalues) / full.pop_top_eigenvalues[0]
    assert gaps.max() < 0.03 and np.all(full.pop_overlap_signal > 0.02)  # spread, close
    assert_top_matches_full(top, full, 3)


def test_top_route_without_warm_start_and_its_float32_guard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The warm start (float32 passes, cell.TOP_WARM_START_DTYPE) changes where the exact
    iteration starts, not what it returns: with it switched off the top route still equals
    the full route, and its numbers differ from the warm-started ones only within the
    contract. A table too large for float32 (snr 1e30) gets no warm start."""
    from attnrmt.model import cell as cell_module

    cell = {
        "d": 400,
        "delta": 0.5,
        "gamma": 0.5,
        "T": 8,
        "positional": "iid",
        "weights": "mean",
        "snr": 2.0,
        "top_k": 3,
        "seed": 5,
    }
    warm, full = simulate_cell(**cell, spectrum="top"), simulate_cell(**cell)
    monkeypatch.setattr(cell_module, "TOP_WARM_START_DTYPE", None)
    cold = simulate_cell(**cell, spectrum="top")
    assert_top_matches_full(cold, full, 3)
    assert_top_matches_full(warm, cold, 3)
    monkeypatch.setattr(cell_module, "TOP_WARM_START_DTYPE", np.float32)
    rng = np.random.default_rng(0)
    incidence = cell_module.token_incidence(rng.integers(0, 20, (30, 4)), np.full(4, 0.25), 20)
    arguments = (incidence, True, (), 1.0)
    for snr, engaged in ((2.0, True), (1e30, False)):
        for rough_dtype in (None, np.float32):  # copied here, or drawn with the table
            table = sample_table(10, 20, snr, np.random.default_rng(1), rough_dtype)
            operators = cell_module._warm_start_operators(arguments[0], table, *arguments[1:])
            assert (operators is not None) == engaged
    monkeypatch.setattr(cell_module, "TOP_WARM_START_DTYPE", None)
    assert cell_module._warm_start_operators(incidence, table, *arguments[1:]) is None


@pytest.mark.parametrize(("d", "V", "snr"), [(10, 20, 1e80), (300, 600, 2.0), (3000, 200, 0.5)])
def test_table_drawn_with_its_rough_copy_is_bit_identical(d: int, V: int, snr: float) -> None:
    """``sample_table(rough_dtype=float32)`` draws, sums and rounds chunk by chunk: the same
    table and class means bit for bit as without, and the rough copy and its largest
    magnitude equal ``astype`` (overflowing to inf at snr 1e80). d = 3000 has chunks of 10
    rows (``_FUSED_CHUNK_BYTES``), d = 300 of 109, d = 10 one chunk a block."""
    plain = sample_table(d, V, snr, np.random.default_rng(7))
    with np.errstate(over="ignore"):
        fused = sample_table(d, V, snr, np.random.default_rng(7), np.float32)
        expected_rough = plain.embeddings.astype(np.float32)
    for name in ("embeddings", "table_mean", "class_mean_difference"):
        np.testing.assert_array_equal(getattr(fused, name), getattr(plain, name), err_msg=name)
    np.testing.assert_array_equal(fused.rough_embeddings, expected_rough)
    assert fused.rough_max_abs == np.abs(expected_rough).max()
    assert plain.rough_embeddings is None and np.isnan(plain.rough_max_abs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_table_passes_in_either_orientation_are_the_plain_products(dtype: type) -> None:
    """``tall_times`` / ``tall_transpose_times`` (row orientation in float64, column in
    float32) give ``E X`` and ``E^T Y`` in ``E``'s precision, to its rounding: float64
    1e-12, float32 1e-5 relative to the largest entry (products of 50 terms of unit
    size; measured 0 and <= 2.1e-7 for this seed)."""
    from attnrmt.model._linalg import tall_times, tall_transpose_times

    rng = np.random.default_rng(3)
    embeddings = rng.standard_normal((70, 50)).astype(dtype)
    block, rows = rng.standard_normal((50, 7)), rng.standard_normal((70, 7)).astype(dtype)
    exact_table = embeddings.astype(np.float64)
    assert_products_in_precision(
        (
            (tall_times(embeddings, block.astype(dtype)), exact_table @ block),
            (
                tall_transpose_times(embeddings, rows),
                exact_table.T @ rows.astype(np.float64),
            ),
        ),
        dtype,
    )


def test_top_route_small_d_uses_the_dense_route_and_validates() -> None:
    """d <= DENSE_TOP_MAX_N forms the matrix (same answer); top_k = d keeps all d values;
    a bad spectrum is named."""
    cell = {**BASE, "seed": 4, "top_k": 2}
    assert_top_matches_full(simulate_cell(**cell, spectrum="top"), simulate_cell(**cell), 2)
    tiny = {**BASE, "d": 4, "seed": 4, "top_k": 4}
    assert_top_matches_full(simulate_cell(**tiny, spectrum="top"), simulate_cell(**tiny), 4)
    with pytest.raises(ValueError, match="spectrum='partial'"):
        simulate_cell(**BASE, spectrum="partial")


def test_column_blocked_pooling_is_bit_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    """Column blocks (used for tables beyond 32 MiB) give exactly the plain product, for a
    width that is not a multiple of the block, with and without helper threads."""
    from attnrmt.model import cell

    rng = np.random.default_rng(2)
    d, V, T = 150, 300, 5
    embeddings = rng.standard_normal((V, d))
    signs, _ = sample_signs({"kind": "iid"}, T, 400, rng)
    tokens = sample_tokens(signs, V, rng)
    weights = rng.uniform(0.1, 1.0, T)
    plain = cell.token_incidence(tokens, weights, V) @ embeddings
    monkeypatch.setattr(cell, "_POOL_BLOCKED_ABOVE_BYTES", 0)
    np.testing.assert_array_equal(cell.pool(tokens, weights, embeddings), plain)
    monkeypatch.setattr(cell, "helper_threads", lambda: 1)
    np.testing.assert_array_equal(cell.pool(tokens, weights, embeddings), plain)


@pytest.mark.parametrize("centered", [True, False])
def test_sample_spectrum_in_the_smaller_dimension_matches_the_d_route(centered: bool) -> None:
    """For N < d the full route diagonalises the N x N Gram of the pooled rows: the same d
    eigenvalues (the extra ones exact zeros; the d route gives rounding-level values) and
    the same top eigenvectors up to sign."""
    from attnrmt.model import _linalg, cell

    rng = np.random.default_rng(8)
    pooled = rng.standard_normal((70, 120))
    pooled[:, 0] += 2.0 * np.sign(rng.standard_normal(70))  # one outlier
    values, vectors = cell.sample_spectrum_from_samples(pooled, centered, 3)
    lower = _linalg.lower_gram(pooled, 1 / 70)
    if centered:
        _linalg.add_rank_one(lower, -1.0, pooled.mean(axis=0))
    expected_values, expected_vectors = _linalg.spectrum_and_top_eigenvectors(lower, 3)
    assert values.shape == (120,) and np.all(np.diff(values) >= 0)
    np.testing.assert_allclose(values, expected_values, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.abs(np.sum(vectors * expected_vectors, axis=0)), 1.0, atol=1e-10)


@pytest.mark.parametrize("centered", [True, False])
def test_population_in_the_smaller_dimension_matches_the_d_route(centered: bool) -> None:
    """For V < d the full route takes the population eigenpairs from the V x V Gram of
    ``Y = M^(1/2) E`` (cell.population_rows). Against the d x d route it replaces (the
    previous code: form P, Lanczos from the same start): eigenvalues to 1e-12 relative and
    squared overlaps to 1e-10 (the tolerance the issue allows a full-route change; measured
    <= 1e-15 and <= 1.5e-12 at d = 320-2000, delta = 1.5-4), and both against a dense
    eigendecomposition of P. d = 640, delta = 2: V = 320, so both routes run Lanczos."""
    from attnrmt.model import _linalg, cell

    d, V = 640, 320
    table_stream, solver_stream = (
        np.random.default_rng(c) for c in np.random.SeedSequence(9).spawn(2)
    )
    table = sample_table(d, V, 2.0, table_stream)
    kappa, alpha, sigma = 0.1, 0.35, 0.9
    terms = cell.population_rank_one_terms(
        table.table_mean, table.class_mean_difference, alpha, kappa, sigma, centered
    )
    start = cell._spike_start(d, table, solver_stream, 1)[:, 0]

    population = _linalg.lower_gram(table.embeddings, kappa / V)
    for coefficient, vector in terms:
        _linalg.add_rank_one(population, coefficient, vector)
    dense = np.tril(population) + np.tril(population, -1).T
    d_values, d_vectors = _linalg.top_eigenpairs(population, 3, start)
    values, vectors = cell._population_top_from_tokens(table, terms, kappa, 3, start)

    rows = cell.population_rows(table, terms, kappa)
    np.testing.assert_allclose(rows.T @ rows, dense, rtol=0, atol=1e-13 * np.abs(dense).max())
    exact_values, exact_vectors = np.linalg.eigh(dense)
    u = table.signal_direction
    for expected_values, expected_vectors in (
        (d_values, d_vectors),
        (exact_values[::-1][:3], exact_vectors[:, ::-1][:, :3]),
    ):
        np.testing.assert_allclose(values, expected_values, rtol=1e-12)
        np.testing.assert_allclose((u @ vectors) ** 2, (u @ expected_vectors) ** 2, atol=1e-10)
    np.testing.assert_allclose(np.sum(vectors**2, axis=0), 1.0, atol=1e-14)


@pytest.mark.parametrize("centered", [True, False])
def test_sample_spectrum_through_the_tokens_matches_the_d_route(centered: bool) -> None:
    """For V < min(N, d) the full route takes S = E^T B E through the V x V matrix
    L^T B L (E E^T = L L^T): against the d route it replaces (form S from the pooled rows,
    one reduction) all d eigenvalues agree to 1e-10 relative / 1e-12 absolute (the d - V
    zeros are exact on this route, rounding-level on the other), the top ones to 1e-12
    relative, the top eigenvectors up to sign and their squared overlaps to 1e-10 (the
    tolerances the issue allows a full-route change; measured <= 1e-14, <= 6e-15 and
    <= 1e-15 at d = 400-2000). Per-sequence weights (as causal attention has) and one
    outlier; d = 240, V = 120, N = 480."""
    from attnrmt.model import _linalg, cell

    rng = np.random.default_rng(12)
    d, V, N, T = 240, 120, 480, 6
    table = sample_table(d, V, 3.0, rng)
    signs, _ = sample_signs({"kind": "prefix", "L": 2}, T, N, rng)
    tokens = sample_tokens(signs, V, rng)
    token_weights = rng.uniform(0.1, 1.0, (N, T))
    assert cell.sample_through_tokens(d, V, N, 3)
    values, vectors = cell._sample_spectrum_from_tokens(
        cell.token_incidence(tokens, token_weights, V), table.embeddings, centered, 3
    )
    pooled = cell.pool(tokens, token_weights, table.embeddings)
    lower = _linalg.lower_gram(pooled, 1 / N)
    if centered:
        _linalg.add_rank_one(lower, -1.0, pooled.mean(axis=0))
    expected_values, expected_vectors = _linalg.spectrum_and_top_eigenvectors(lower, 3)
    assert values.shape == (d,) and np.all(np.diff(values) >= 0)
    assert np.count_nonzero(values) <= V
    np.testing.assert_allclose(
        values, expected_values, rtol=1e-10, atol=1e-12 * expected_values.max()
    )
    np.testing.assert_allclose(values[-3:], expected_values[-3:], rtol=1e-12)
    np.testing.assert_allclose(np.abs(np.sum(vectors * expected_vectors, axis=0)), 1.0, atol=1e-10)
    for direction in (table.signal_direction, table.class_mean_difference, table.table_mean):
        np.testing.assert_allclose(
            cell.squared_overlaps(vectors, direction),
            cell.squared_overlaps(expected_vectors, direction),
            atol=1e-10,
        )


def test_the_smaller_dimension_is_chosen_by_its_flop_count() -> None:
    """The token route only where it counts fewer flops: V well below d and N."""
    from attnrmt.model import cell

    assert cell.sample_through_tokens(1000, 500, 2000, 3)  # delta = 2, gamma = 0.5
    assert not cell.sample_through_tokens(1000, 800, 1250, 3)  # measured slower there
    assert not cell.sample_through_tokens(1000, 2000, 2000, 3)  # V > d
    assert not cell.sample_through_tokens(1000, 500, 400, 3)  # N < V: the sample route
    assert not cell.sample_through_tokens(1000, 3, 2000, 3)  # top_k >= V
