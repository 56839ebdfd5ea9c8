"""attnrmt's bulk densities against the public ``freealg`` package (docs/model.md, "A general
bulk by subordination": compared with it where it works), with a Monte-Carlo spectrum as the
referee where the two disagree.

Laws: ``MP_1 ⊠ MP_1`` (freealg's Fuss–Catalan ``p = 2``; attnrmt's closed form
``bulk_density`` and its subordination engine ``free_density``) and three ``MP_c ⊠ nu`` with a
discrete ``nu`` (freealg's ``DeformedMarchenkoPastur``; attnrmt's ``free_density``), one of
them with a gap in the support. Each law is evaluated at :data:`POINTS` points inside each
component of its support (2% from the edges and from 0). A point *agrees* when the two
densities differ by at most :data:`AGREE` relative and is a *glitch* (a wrong branch) when
they differ by more than :data:`GLITCH`; at a glitch the density of one sampled spectrum
(``d`` = :data:`MC_D`, a window of +-:data:`WINDOW` relative) says which is right. The
supports: attnrmt's components, freealg's ``support()`` and the sampled eigenvalues that fall
in attnrmt's gaps.

``main()`` returns per law the points, the agreeing ones with their median and largest
relative difference, the glitches with the side the Monte-Carlo density takes, and the
supports; the target: no glitch at which the Monte-Carlo density sides with freealg. ``python -m
benchmarks bench_freealg`` records it. O(laws x (POINTS x atoms + MC_D^3)).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from attnrmt.theory import bulk_density
from attnrmt.theory.free import DiscreteLaw, FreeProduct, MarchenkoPastur, free_density, free_edges

POINTS = 400
AGREE = 0.01
GLITCH = 0.1
MC_D = 2000
WINDOW = 0.02
#: The target: glitches (> GLITCH) at which the Monte-Carlo density sides with freealg.
FREEALG_RIGHT_TARGET = 0

#: ``(name, ratio c, atoms, weights)`` of the ``MP_c ⊠ nu`` laws; ``atoms`` None: ``MP_1``.
LAWS: tuple[tuple[str, float, list[float] | None, list[float] | None], ...] = (
    ("MP_1 ⊠ MP_1 (Fuss-Catalan p=2)", 1.0, None, None),
    ("MP_0.5 ⊠ two-level (0.5, 2)", 0.5, [0.5, 2.0], [0.5, 0.5]),
    ("MP_0.3 ⊠ three atoms (gap)", 0.3, [0.2, 1.0, 3.0], [0.3, 0.5, 0.2]),
    ("MP_1.5 ⊠ spike-like (1, 4)", 1.5, [1.0, 4.0], [0.9, 0.1]),
)


def _sampled(c: float, atoms: list[float] | None, weights: list[float] | None) -> np.ndarray:
    """Eigenvalues of one ``MC_D x MC_D`` matrix of the law (seed 0): ``W W^T`` for two
    Ginibre factors ``W = G1 G2 / MC_D`` (Fuss–Catalan), ``Sigma^(1/2) X X^T Sigma^(1/2) / n``
    with ``MC_D / n = c`` otherwise."""
    rng = np.random.default_rng(0)
    if atoms is None:
        w = rng.standard_normal((MC_D, MC_D)) @ rng.standard_normal((MC_D, MC_D)) / MC_D
        return np.linalg.eigvalsh(w @ w.T)
    counts = np.round(np.asarray(weights) * MC_D).astype(int)
    counts[-1] = MC_D - counts[:-1].sum()
    root = np.sqrt(np.repeat(atoms, counts))
    n = round(MC_D / c)
    x = rng.standard_normal((MC_D, n)) * root[:, None]
    return np.linalg.eigvalsh(x @ x.T / n)


def _window_density(eigenvalues: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Share of ``eigenvalues`` within ``x (1 +- WINDOW)`` over the window's width."""
    low, high = x * (1 - WINDOW), x * (1 + WINDOW)
    counts = np.searchsorted(np.sort(eigenvalues), high) - np.searchsorted(
        np.sort(eigenvalues), low
    )
    return counts / eigenvalues.size / (high - low)


def compare(freealg_density: Callable[[np.ndarray], np.ndarray], law: FreeProduct) -> dict:
    """The comparison of one law (module docstring), without the Monte-Carlo referee."""
    edges = free_edges(law)
    inside = [np.linspace(lo + 0.02 * (hi - lo), hi - 0.02 * (hi - lo), POINTS) for lo, hi in edges]
    x = np.concatenate(inside)
    x = x[x > 0.02 * edges[-1, 1]]
    ours = free_density(law, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = np.asarray(freealg_density(x), dtype=float)
    relative = np.abs(theirs - ours) / ours
    return {"x": x, "ours": ours, "theirs": theirs, "relative": relative}


def main() -> dict[str, Any]:
    """Run the comparison, print and return the results."""
    from freealg import distributions

    results: dict[str, Any] = {"laws": {}}
    freealg_right = 0
    for name, c, atoms, weights in LAWS:
        if atoms is None:
            law = FreeProduct((c,), MarchenkoPastur(1.0))
            reference, support = (
                distributions.FussCatalan(p=2).density,
                distributions.FussCatalan(p=2).support,
            )
        else:
            law = FreeProduct((c,), DiscreteLaw.of(atoms, weights))
            known = distributions.DeformedMarchenkoPastur(t=atoms, w=weights, c=c)
            reference, support = known.density, known.support
        found = compare(reference, law)
        agree, glitch = found["relative"] <= AGREE, found["relative"] > GLITCH
        eigenvalues = _sampled(c, atoms, weights)
        sampled = _window_density(eigenvalues, found["x"][glitch])
        ours_off = np.abs(sampled - found["ours"][glitch])
        sides_freealg = int(np.sum(np.abs(sampled - found["theirs"][glitch]) < ours_off))
        freealg_right += sides_freealg
        components = free_edges(law)
        gaps = zip(components[:-1, 1], components[1:, 0], strict=True)
        entry = {
            "points": int(found["x"].size),
            "agree": int(agree.sum()),
            "median_relative_difference": float(np.median(found["relative"][agree])),
            "max_relative_difference_where_agree": float(found["relative"][agree].max()),
            "between": int(np.sum(~agree & ~glitch)),
            "glitches": int(glitch.sum()),
            "glitches_monte_carlo_sides_attnrmt": int(glitch.sum()) - sides_freealg,
            "glitches_monte_carlo_sides_freealg": sides_freealg,
            "support_attnrmt": components.round(4).tolist(),
            "support_freealg": np.round(np.asarray(support(), dtype=float), 4).tolist(),
            "sampled_range": [float(eigenvalues.min()), float(eigenvalues.max())],
            "sampled_eigenvalues_in_attnrmt_gaps": int(
                sum(np.sum((eigenvalues > lo) & (eigenvalues < hi)) for lo, hi in gaps)
            ),
        }
        if atoms is None:  # the closed form, for the engine's own agreement
            closed = bulk_density(found["x"], 1.0, 1.0)
            entry["engine_vs_closed_form_max_relative"] = float(
                np.max(np.abs(found["ours"] - closed) / closed)
            )
        if glitch.any():
            worst = int(np.argmax(found["relative"]))
            entry["worst"] = {
                "x": float(found["x"][worst]),
                "attnrmt": float(found["ours"][worst]),
                "freealg": float(found["theirs"][worst]),
            }
        results["laws"][name] = entry
    results["monte_carlo_sides_freealg"] = freealg_right
    results["monte_carlo_sides_freealg_ok"] = freealg_right <= FREEALG_RIGHT_TARGET
    print(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
