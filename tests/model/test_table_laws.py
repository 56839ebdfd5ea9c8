"""Table laws: the entries' law and moments, the documented random streams, the Gaussian
default bit for bit, validation, and both spectrum routes for every law (docs/model.md,
"Table laws"; :mod:`attnrmt.model.table_laws`).

Statistical checks draw one table of ``n = V d = 4 x 10^5`` i.i.d. entries per law (snr = 0,
seed ``SEED``) and compare it with exact values from :mod:`scipy.stats` (an independent
reference, not the module's own formulas):

* raw moments ``E z``, ``E z^2``, ``E z^4`` within ``4 SE`` with
  ``SE(E z^k) = sqrt((E z^{2k} - (E z^k)^2) / n)`` from the exact moments (a two-sided
  normal tail of 6e-5 per check; 16 moment checks in all, so a false alarm has
  probability ~1e-3 per seed). ``E z^2`` is checked where ``E z^4`` is finite (not for
  ``student_t`` nu = 3), ``E z^4`` where ``E z^8`` is; the Student t of the moment checks
  has ``nu = 20``, since at ``nu = 10`` ``z^4`` is itself so heavy-tailed (``E z^{16} =
  inf``) that its sample mean is far from normal: 1 of 100 seeds failed the 4 SE band;
* the law itself: Kolmogorov-Smirnov distance of the entries to the exact cdf below
  ``1.95 / sqrt(n)`` (the asymptotic Kolmogorov tail ``P(sqrt(n) D > 1.95) = 0.001``);
  atoms (``rademacher``'s signs, ``sparse``'s zeros) as binomial fractions within 4 SE.

Pass rates over disjoint seeds (``python -m benchmarks.seed_groups
tests.model.test_table_laws --groups 100``, one seed a group, group 0 is the test's seed
20260): 100/100 for every moment and law check of every law.

Breaking the code on purpose (scratch edits, restored; each made the tests named fail):

* ``sparse`` without the ``1/sqrt(p)``: moments, law, documented stream (and
  ``tests/theory/test_table_theory.py``'s universality);
* ``student_t`` without the ``sqrt((nu-2)/nu)`` (the plain t): ``E z^2`` 1.118 at
  nu = 20 (48 SE), KS 0.014 (nu = 20) and 0.113 (nu = 3) against 0.003;
  ``Gamma(nu)`` instead of ``Gamma(nu/2)``: KS 0.084 and 0.092;
* ``uniform`` from ``erf(g)`` instead of ``erf(g / sqrt 2)``: KS 0.084, ``E z^2`` 1.40;
* the auxiliary numbers drawn from the block's own generator (interleaved with the
  normals chunk by chunk in the fused path): the fused-draw test, for every chunking;
* the auxiliary seeds spawned before the block seeds, for every law: the documented
  stream of every law including ``gaussian`` (and ``tests/model/test_cell.py``);
* ``simulate_cell`` not passing the law to ``sample_table``: the direct computation and
  the both-routes test (non-Gaussian cell equal to the Gaussian one);
* the fused path drawing plain normals: the fused-draw and both-routes tests;
* no close-match hint: the three "did you mean" cases and ``simulate_cell``'s; ``nu >= 2``
  allowed: the ``nu = 2`` case; no theory for every non-Gaussian law: the moment/refusal
  table test.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.stats

from attnrmt.model import (
    TABLE_KINDS,
    positional_correlation,
    sample_signs,
    simulate_cell,
    table_moments,
    table_no_theory,
    validate_table,
)
from attnrmt.model.table import sample_table, sample_tokens
from tests.model.test_cell import ARRAY_FIELDS, assert_top_matches_full

SEED = 20260
D, V = 200, 2000  # 4 x 10^5 entries a law
N_ENTRIES = D * V
SIGMAS = 4.0
KS_CRITICAL = 1.95 / math.sqrt(N_ENTRIES)

LAWS: dict[str, Any] = {
    "gaussian": "gaussian",
    "rademacher": "rademacher",
    "uniform": "uniform",
    "student_t20": {"kind": "student_t", "nu": 20.0},
    "student_t3": {"kind": "student_t", "nu": 3.0},
    "sparse": {"kind": "sparse", "p": 0.2},
}


def raw_moment(name: str, k: int) -> float:
    """Exact ``E z^k`` of law ``name`` (unit variance) from scipy.stats / the definition."""
    law = validate_table(LAWS[name])
    if law["kind"] == "gaussian":
        return float(scipy.stats.norm.moment(k))
    if law["kind"] == "rademacher":
        return float(k % 2 == 0)
    if law["kind"] == "uniform":
        return float(scipy.stats.uniform(loc=-math.sqrt(3), scale=2 * math.sqrt(3)).moment(k))
    if law["kind"] == "student_t":  # E t^k = nu^(k/2) G((k+1)/2) G((nu-k)/2) / (sqrt(pi) G(nu/2))
        nu = law["nu"]
        if k % 2:
            return 0.0
        if k >= nu:
            return math.inf
        t_moment = math.exp(
            k / 2 * math.log(nu)
            + math.lgamma((k + 1) / 2)
            + math.lgamma((nu - k) / 2)
            - math.lgamma(nu / 2)
        ) / math.sqrt(math.pi)
        return t_moment * ((nu - 2) / nu) ** (k / 2)
    p = law["p"]  # sparse: p E[(g / sqrt p)^k]
    return p ** (1 - k / 2) * float(scipy.stats.norm.moment(k))


@functools.cache
def entries(name: str, seed: int) -> np.ndarray:
    """The ``n`` entries of one table of law ``name`` (snr = 0: pure noise)."""
    table = sample_table(D, V, 0.0, np.random.default_rng(seed), table=LAWS[name])
    return table.embeddings.ravel()


# --- law and moments ----------------------------------------------------------------------


def check_moments(name: str, seeds: tuple[int, ...]) -> None:
    z = entries(name, seeds[0])
    orders = [k for k in (1, 2, 4) if math.isfinite(raw_moment(name, 2 * k))]
    for k in orders:
        exact = raw_moment(name, k)
        standard_error = math.sqrt((raw_moment(name, 2 * k) - exact**2) / N_ENTRIES)
        measured = float(np.mean(z**k))
        assert abs(measured - exact) <= SIGMAS * standard_error, (name, k, measured, exact)


@pytest.mark.parametrize("name", list(LAWS))
def test_unit_variance_and_moments(name: str) -> None:
    """Mean 0, variance 1 and (where the eighth moment is finite) the fourth moment of
    every law, within 4 SE of the exact values; ``table_moments`` gives the exact
    ``(1, E z^4)``."""
    check_moments(name, (SEED,))
    variance, fourth = table_moments(LAWS[name])
    assert variance == 1.0
    assert fourth == pytest.approx(raw_moment(name, 4), rel=1e-12)


def _law_cdf(name: str) -> Callable[[np.ndarray], np.ndarray]:
    law = validate_table(LAWS[name])
    if law["kind"] == "gaussian":
        return scipy.stats.norm.cdf
    if law["kind"] == "uniform":
        return scipy.stats.uniform(loc=-math.sqrt(3), scale=2 * math.sqrt(3)).cdf
    nu = law["nu"]
    return scipy.stats.t(nu, scale=math.sqrt((nu - 2) / nu)).cdf


def check_distribution(name: str, seeds: tuple[int, ...]) -> None:
    z = entries(name, seeds[0])
    kind = validate_table(LAWS[name])["kind"]
    binomial_band = SIGMAS * 0.5 / math.sqrt(N_ENTRIES)  # 4 sqrt(q (1 - q) / n), q <= 1/2
    if kind == "rademacher":
        assert np.all(np.abs(z) == 1.0)
        assert abs(np.mean(z > 0) - 0.5) <= binomial_band
    elif kind == "sparse":
        p = LAWS[name]["p"]
        nonzero = z[z != 0]
        assert abs(nonzero.size / N_ENTRIES - p) <= binomial_band
        statistic = scipy.stats.kstest(nonzero * math.sqrt(p), scipy.stats.norm.cdf).statistic
        assert statistic < 1.95 / math.sqrt(nonzero.size), statistic
    else:
        statistic = scipy.stats.kstest(z, _law_cdf(name)).statistic
        assert statistic < KS_CRITICAL, (name, statistic)


@pytest.mark.parametrize("name", list(LAWS))
def test_entries_follow_the_exact_law(name: str) -> None:
    """KS distance of the entries to the exact cdf (Gaussian, uniform on [-sqrt 3,
    sqrt 3], scaled Student t) below 1.95/sqrt(n); Rademacher entries are exactly ±1, half
    of them +1; sparse entries are 0 with probability 1 - p and N(0, 1/p) otherwise."""
    check_distribution(name, (SEED,))


# --- random streams -----------------------------------------------------------------------


def documented_table(name: str, d: int, n_tokens: int, seed: int) -> np.ndarray:
    """The noise table (snr = 0) rebuilt from docs/model.md, "Table laws": four row blocks
    (two per class), block ``b`` fills standard normals from ``SFC64(child_b)`` with
    ``child_b`` the b-th of ``SeedSequence.spawn(4)`` of the table stream, and the
    auxiliary numbers from ``SFC64(child_b.spawn(1)[0])``; the transforms are written out
    here (scipy's normal cdf for the uniform, not erf)."""
    law = validate_table(LAWS[name])
    half = n_tokens // 2
    edges = np.linspace(0, half, 3).round().astype(int)
    bounds = list(itertools.pairwise(edges))
    bounds += [(a + half, b + half) for a, b in bounds]
    children = np.random.default_rng(seed).bit_generator.seed_seq.spawn(4)
    rows = []
    for (start, stop), child in zip(bounds, children, strict=True):
        g = np.random.Generator(np.random.SFC64(child)).standard_normal((stop - start, d))
        auxiliary = np.random.Generator(np.random.SFC64(child.spawn(1)[0]))
        if law["kind"] == "rademacher":
            g = np.where(g >= 0, 1.0, -1.0)
        elif law["kind"] == "uniform":
            g = math.sqrt(3) * (2 * scipy.stats.norm.cdf(g) - 1)
        elif law["kind"] == "student_t":
            nu = law["nu"]
            chi2 = 2 * auxiliary.standard_gamma(nu / 2, size=g.shape)
            g = g / np.sqrt(chi2 / nu) * math.sqrt((nu - 2) / nu)
        elif law["kind"] == "sparse":
            g = g * (auxiliary.random(g.shape) < law["p"]) / math.sqrt(law["p"])
        rows.append(g)
    return np.concatenate(rows)


@pytest.mark.parametrize("name", list(LAWS))
def test_each_law_draws_the_documented_stream(name: str) -> None:
    """The table equals its rebuild from the documented streams: bit for bit for the
    Gaussian (today's numbers) and Rademacher, to 1e-12 relative for the others (erf
    against the normal cdf, another order of the same operations), with the same zeros."""
    found = sample_table(30, 50, 0.0, np.random.default_rng(9), table=LAWS[name]).embeddings
    expected = documented_table(name, 30, 50, 9)
    if validate_table(LAWS[name])["kind"] in ("gaussian", "rademacher"):
        np.testing.assert_array_equal(found, expected)
    else:
        np.testing.assert_array_equal(found == 0, expected == 0)
        np.testing.assert_allclose(found, expected, rtol=1e-12, atol=0)


def test_sparse_with_p_one_is_the_gaussian_table_and_masks_are_nested() -> None:
    """``sparse`` multiplies the Gaussian table by a mask ``U < p``: ``p = 1`` is the
    Gaussian table bit for bit, and the zeros of ``p = 0.5`` contain those of ``p = 0.8``
    (common random numbers across ``p``)."""
    rng = functools.partial(np.random.default_rng, 4)
    gaussian = sample_table(40, 60, 1.0, rng()).embeddings
    dense = sample_table(40, 60, 1.0, rng(), table={"kind": "sparse", "p": 1}).embeddings
    np.testing.assert_array_equal(dense, gaussian)
    half = sample_table(40, 60, 0.0, rng(), table={"kind": "sparse", "p": 0.5}).embeddings
    most = sample_table(40, 60, 0.0, rng(), table={"kind": "sparse", "p": 0.8}).embeddings
    assert np.all(half[most == 0] == 0) and np.mean(half == 0) > np.mean(most == 0)


@pytest.mark.parametrize(("d", "n_tokens"), [(3000, 200), (300, 600), (10, 20)])
@pytest.mark.parametrize("name", ["uniform", "student_t3", "sparse"])
def test_fused_rough_copy_is_bit_identical_for_every_law(name: str, d: int, n_tokens: int) -> None:
    """The top route's fused draw (``rough_dtype``: chunks of 10 rows at d = 3000, 109 at
    d = 300, one a block at d = 10) gives the same table and class means as the plain draw,
    bit for bit, for laws with auxiliary numbers too."""
    plain = sample_table(d, n_tokens, 0.5, np.random.default_rng(7), table=LAWS[name])
    fused = sample_table(d, n_tokens, 0.5, np.random.default_rng(7), np.float32, table=LAWS[name])
    for field in ("embeddings", "table_mean", "class_mean_difference"):
        np.testing.assert_array_equal(getattr(fused, field), getattr(plain, field))
    np.testing.assert_array_equal(fused.rough_embeddings, plain.embeddings.astype(np.float32))
    assert fused.rough_max_abs == np.abs(plain.embeddings.astype(np.float32)).max()


def test_table_does_not_depend_on_the_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """One or two helper threads fill the blocks: the same table (student_t: both
    streams per block)."""
    tables = []
    for threads in ("1", "2"):
        for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            monkeypatch.setenv(variable, threads)
        tables.append(
            sample_table(50, 80, 1.0, np.random.default_rng(2), table=LAWS["student_t3"]).embeddings
        )
    np.testing.assert_array_equal(*tables)


# --- the cell -----------------------------------------------------------------------------

CELL = {
    "delta": 0.5,
    "gamma": 0.5,
    "T": 6,
    "positional": {"kind": "prefix", "L": 3},
    "snr": 1.5,
    "seed": 13,
}


def assert_cells_equal(found: Any, expected: Any) -> None:
    for field in (*ARRAY_FIELDS, "alpha", "kappa", "sigma", "V", "N", "downstream_accuracy"):
        a, b = np.asarray(getattr(found, field)), np.asarray(getattr(expected, field))
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), field


@pytest.mark.parametrize(
    ("d", "spectrum", "weights"),
    [
        (60, "full", "mean"),
        (400, "top", "mean"),
        (60, "full", {"kind": "causal_attention"}),
    ],
)
def test_gaussian_default_is_bit_identical(d: int, spectrum: str, weights: Any) -> None:
    """``table`` omitted, None, ``"gaussian"`` and ``{"kind": "gaussian"}`` give the same
    cell bit for bit, on both routes (d = 400 > DENSE_TOP_MAX_N: the fused float32 draw)
    and with real attention; the table is the documented Gaussian stream
    (:func:`test_each_law_draws_the_documented_stream`)."""
    reference = simulate_cell(d, weights=weights, spectrum=spectrum, **CELL)
    for table in (None, "gaussian", {"kind": "gaussian"}):
        assert_cells_equal(
            simulate_cell(d, weights=weights, spectrum=spectrum, table=table, **CELL), reference
        )


@pytest.mark.parametrize("name", [name for name in LAWS if name != "gaussian"])
def test_both_routes_agree_for_every_law(name: str) -> None:
    """Every law runs on both routes: at d = 400 the top route (block Lanczos with the
    fused float32 warm start) equals the full route within the contract (eigenvalues
    1e-10 relative, overlaps 5e-7), and at d = 60 (dense top route) too; the non-Gaussian
    cell differs from the Gaussian one of the same seed (same signs and tokens: same
    alpha, kappa, sigma)."""
    for d in (400, 60):
        cell = {**CELL, "d": d, "weights": "mean", "top_k": 3, "table": LAWS[name]}
        full = simulate_cell(**cell)
        assert_top_matches_full(simulate_cell(**cell, spectrum="top"), full, 3)
        gaussian = simulate_cell(**{**cell, "table": None})
        assert not np.array_equal(full.eigenvalues, gaussian.eigenvalues)
        assert (full.alpha, full.kappa, full.sigma) == (
            gaussian.alpha,
            gaussian.kappa,
            gaussian.sigma,
        )


@pytest.mark.parametrize("name", ["rademacher", "student_t3", "sparse"])
def test_cell_is_the_direct_computation_on_its_law(name: str) -> None:
    """simulate_cell with a law equals the cell computed naively from the documented
    streams (docs/model.md, "The generative model": SeedSequence(seed).spawn(4) -> table,
    signs, tokens, solver) on a table of that law: S = (1/N) sum (c_n - cbar)(c_n - cbar)^T
    and the population matrix formed densely, eigenvalues by eigh, to 1e-9 relative
    (exact float64 linear algebra on O(1) entries at d = 60)."""
    d, T, snr = 60, CELL["T"], CELL["snr"]
    law = LAWS[name]
    n_tokens, n_samples = 2 * round(d / (2 * CELL["delta"])), round(d / CELL["gamma"])
    table_rng, sign_rng, token_rng = (
        np.random.default_rng(child) for child in np.random.SeedSequence(CELL["seed"]).spawn(3)
    )
    table = sample_table(d, n_tokens, snr, table_rng, table=law)
    signs, _ = sample_signs(CELL["positional"], T, n_samples, sign_rng)
    tokens = sample_tokens(signs, n_tokens, token_rng)
    E = table.embeddings.T
    pooled = sum(E[:, tokens[:, t]] for t in range(T)) / T  # mean pooling, d x N
    centred = pooled - pooled.mean(axis=1, keepdims=True)
    R = positional_correlation(CELL["positional"], T)
    w = np.full(T, 1 / T)
    alpha, kappa = w @ R @ w, w @ w
    m_plus = E[:, : n_tokens // 2].mean(axis=1)
    m_minus = E[:, n_tokens // 2 :].mean(axis=1)
    mbar, dlt = (m_plus + m_minus) / 2, (m_plus - m_minus) / 2
    population = (
        kappa * E @ E.T / n_tokens
        - kappa * np.outer(mbar, mbar)
        + (alpha - kappa) * np.outer(dlt, dlt)
    )
    cell = simulate_cell(d, weights="mean", table=law, **CELL)
    np.testing.assert_allclose(
        cell.eigenvalues, np.linalg.eigvalsh(centred @ centred.T / n_samples), rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(
        cell.pop_top_eigenvalues, np.linalg.eigvalsh(population)[::-1][:3], rtol=1e-9
    )


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        (None, {"kind": "gaussian"}),
        ("rademacher", {"kind": "rademacher"}),
        ({"kind": "uniform"}, {"kind": "uniform"}),
        ({"nu": 3, "kind": "student_t"}, {"kind": "student_t", "nu": 3.0}),
        ({"kind": "sparse", "p": np.float32(0.5)}, {"kind": "sparse", "p": 0.5}),
        ({"kind": "sparse", "p": 1}, {"kind": "sparse", "p": 1.0}),
    ],
)
def test_validate_table_canonical(spec: Any, canonical: dict[str, Any]) -> None:
    """Canonical dicts: sorted keys, parameters as Python floats; None is gaussian."""
    found = validate_table(spec)
    assert found == canonical and list(found) == sorted(found)
    assert all(type(value) is float for key, value in found.items() if key != "kind")
    assert validate_table(found) == found  # idempotent
    assert found["kind"] in TABLE_KINDS


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ("rademachr", ["table.kind='rademachr'", "did you mean 'rademacher'"]),
        ({"kind": "student-t", "nu": 3}, ["table.kind='student-t'", "did you mean 'student_t'"]),
        ({"kind": "student_t", "nuu": 3}, ["'nuu'", "did you mean 'nu'"]),
        ({"kind": "sparse", "nu": 3}, ["unexpected parameter 'nu'", "allowed: ['p']"]),
        ({"kind": "cauchy"}, ["table.kind='cauchy'", "'gaussian'"]),
        ("student_t", ["table='student_t'", "needs 'nu'"]),
        ({"kind": "sparse"}, ["table={'kind': 'sparse'}", "needs 'p'"]),
        ({"kind": "student_t", "nu": 2}, ["table.nu=2", "> 2"]),
        ({"kind": "student_t", "nu": float("inf")}, ["table.nu=inf", "finite"]),
        ({"kind": "student_t", "nu": "3"}, ["table.nu='3'", "numeric"]),
        ({"kind": "student_t", "nu": [3, 4]}, ["table.nu=[3, 4]", "a number"]),
        ({"kind": "sparse", "p": 0}, ["table.p=0", "(0, 1]"]),
        ({"kind": "sparse", "p": 1.5}, ["table.p=1.5", "(0, 1]"]),
        ({"kind": "sparse", "p": True}, ["table.p=True", "numeric"]),
        ({"p": 0.5}, ["missing 'kind'"]),
        (3, ["table=3", "a name or a dict"]),
    ],
)
def test_validate_table_errors_name_the_key_and_value(spec: Any, fragments: list[str]) -> None:
    """ValueError naming the key and the value, with the closest known name."""
    with pytest.raises(ValueError) as error:
        validate_table(spec)
    for fragment in fragments:
        assert fragment in str(error.value), (fragment, str(error.value))


def test_simulate_cell_validates_the_table() -> None:
    with pytest.raises(ValueError, match=r"table\.kind='gausian'.*did you mean 'gaussian'"):
        simulate_cell(20, weights="mean", table="gausian", **CELL)
    with pytest.raises(ValueError, match=r"table\.p=2"):
        simulate_cell(20, weights="mean", table={"kind": "sparse", "p": 2}, **CELL)


@pytest.mark.parametrize(
    ("spec", "fourth"),
    [
        ("gaussian", 3.0),
        ("rademacher", 1.0),
        ("uniform", 1.8),
        ({"kind": "student_t", "nu": 6}, 6.0),
        ({"kind": "student_t", "nu": 4}, math.inf),
        ({"kind": "student_t", "nu": 2.5}, math.inf),
        ({"kind": "sparse", "p": 0.1}, 30.0),
    ],
)
def test_fourth_moments_and_when_the_theory_refuses(spec: Any, fourth: float) -> None:
    """``E z^4`` (hand-computed: ``3 (nu - 2)/(nu - 4)`` for the t, ``3/p`` for sparse);
    the theory is refused exactly when it is infinite, with a reason naming ``nu``."""
    assert table_moments(spec) == (1.0, pytest.approx(fourth, rel=1e-12))
    reason = table_no_theory(spec)
    if math.isfinite(fourth):
        assert reason is None
    else:
        assert reason is not None and f"nu={spec['nu']:g}" in reason
        assert "infinite fourth moment" in reason


# disjoint seeds: python -m benchmarks.seed_groups tests.model.test_table_laws --groups 100
SEED_GROUP_CHECKS: dict[str, tuple[Callable[[tuple[int, ...]], None], tuple[int, ...]]] = {
    **{f"moments[{name}]": (functools.partial(check_moments, name), (SEED,)) for name in LAWS},
    **{f"law[{name}]": (functools.partial(check_distribution, name), (SEED,)) for name in LAWS},
}
