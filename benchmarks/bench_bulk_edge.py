"""The largest noise eigenvalue at ``snr = 0`` against the bulk edge, over ``N T / V``.

Measures where the ``MP_delta ⊠ MP_gamma`` bulk is accurate (docs/model.md, "Where the
large-T bulk holds"): iid signs, mean weights, centred ``S``, ``snr = 0``, at two ``d``.
Two families put ``N T / V = T delta / gamma`` from 1 to 16: ``delta = gamma = 0.5`` with
``T`` from 1 to 16 (so ``N T / V = T``), and ``T = 8``, ``delta = 0.5`` with ``gamma`` from 4
to 0.25 (so ``N T / V`` moves at fixed ``T``).  For each setting it records the mean (and
its standard error) over replicates of the top eigenvalue in units of kappa, the large-T edge
``f(u*)`` at the realised ``d/V``, ``d/N``, their relative offset (and its standard error),
and quantiles of the pooled nonzero spectrum (for a finite-T theory to be compared with).

``python -m benchmarks bench_bulk_edge`` (about 5 CPU-minutes; run it niced).
"""

from __future__ import annotations

import json
import os

import numpy as np

from attnrmt.model import simulate_cell
from attnrmt.theory import bulk_edges
from attnrmt.theory.finite_t import FINITE_T_BOUND, large_t_bulk_holds

#: (delta, gamma, T) settings; N T / V = T delta / gamma.
SETTINGS = tuple((0.5, 0.5, t) for t in (1, 2, 3, 4, 6, 8, 12, 16)) + tuple(
    (0.5, g, 8) for g in (4.0, 1.6, 1.0, 0.25)
)
#: d and the number of replicate cells at that d.
LADDER = ((400, 24), (1600, 6))
#: probabilities at which the nonzero spectrum's quantiles are compared with the theory.
QUANTILES = (0.5, 0.9, 0.99)


def simulate_setting(
    delta: float, gamma: float, T: int, d: int, reps: int
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Top eigenvalues / kappa, the pooled nonzero spectra / kappa, ``V`` and ``N`` of ``reps``
    cells at one point; O(reps (N d^2 + d^3))."""
    tops, spectra = [], []
    V = N = 0
    for rep in range(reps):
        cell = simulate_cell(
            d=d, delta=delta, gamma=gamma, T=T, positional="iid", weights="mean",
            snr=0.0, seed=[37, T, d, int(1000 * gamma), rep], top_k=1,
        )  # fmt: skip
        values = cell.eigenvalues / cell.kappa
        tops.append(values[-1])
        spectra.append(values[-min(d, cell.V, cell.N) :])
        V, N = cell.V, cell.N
    return np.asarray(tops), np.concatenate(spectra), V, N


def measure_setting(delta: float, gamma: float, T: int, d: int, reps: int) -> dict:
    """One row: the simulation of :func:`simulate_setting` against both theories."""
    top, spectrum, V, N = simulate_setting(delta, gamma, T, d, reps)
    mp_edge = float(bulk_edges(d / V, d / N)[1])
    row = {
        "d": d, "delta": delta, "gamma": gamma, "T": T, "V": V, "N": N, "reps": reps,
        "tokens_per_vocab": N * T / V,
        "top_mean": round(float(top.mean()), 4),
        "top_se": round(float(top.std(ddof=1) / np.sqrt(reps)), 4),
        "mp_edge": round(mp_edge, 4),
        "offset_vs_mp_edge": round(float(top.mean()) / mp_edge - 1.0, 4),
        "offset_se": round(float(top.std(ddof=1) / np.sqrt(reps)) / mp_edge, 4),
        "large_t_bulk_holds": bool(large_t_bulk_holds(delta, gamma, T)),
    }  # fmt: skip
    for p in QUANTILES:
        row[f"q{p}"] = round(float(np.quantile(spectrum, p)), 4)
    return row


def main() -> dict:
    """Every setting at every ``d``; prints each row as it is measured."""
    rows = []
    for d, reps in LADDER:
        for delta, gamma, T in SETTINGS:
            row = measure_setting(delta, gamma, T, d, reps)
            print(json.dumps(row), flush=True)
            rows.append(row)
    return {"finite_t_bound": FINITE_T_BOUND, "rows": rows}


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(json.dumps(main(), indent=1))
