"""Thresholds of shared-noise curves: bias, CI coverage and width of the whole-curve
bootstrap, on real curves (docs/thresholds.md, "Shared-noise curves").

At each ``(d, sweeps)`` of ``SIZES``, that many sweeps of ``REPLICATES`` replicate curves
each (:func:`attnrmt.model.simulate_cell` of an snr list, iid/mean, delta = gamma = 0.5, T = 8,
``SNRS``), every curve its own seed. Per
sweep and transition, :func:`attnrmt.analysis.thresholds.fit_threshold` gives the
threshold and its 95% CI from

- the outlier (``theta_from_population`` / ``theta_from_sample`` of the signal eigenvalue,
  the pipeline's estimator), resampling whole curves (``curves=True``) or, for contrast,
  each snr point on its own (the independent-cell bootstrap, wrong for shared noise);
- the overlap (sample transition only): the ``theta`` at which the theory's sample overlap
  ``[1 - (delta+gamma+delta gamma) u^2 - 2 delta gamma u^3]/(1 + gamma u)``, ``u = 1/(theta -
  delta)`` (docs/model.md, "Spikes"), equals the measured squared overlap of the top
  eigenvector with the class-mean difference, whole curves resampled.

The reference of each estimator is the same estimator on all ``sweeps x REPLICATES``
curves pooled (its finite-``d`` value; the pooled estimate's own sd is ``1/sqrt(sweeps)``
of one sweep's), so coverage measures the CI, not the finite-size shift. Reported:
coverage of the reference (binomial sd ``sqrt(0.95 x 0.05 / sweeps)``: 0.028 at 60),
median CI half-width, sd of the sweep estimates, mean bias against the reference.
Cost: ``sweeps x REPLICATES`` curves (~0.04 s each at d = 200, ~0.17 s at d = 400, one BLAS
thread) plus the fits (~2 ms each): ~2.5 minutes in all.
"""

from __future__ import annotations

import time

import numpy as np

from attnrmt.analysis.thresholds import fit_threshold
from attnrmt.model import simulate_cell
from attnrmt.theory import critical_u
from attnrmt.theory.spike import critical_theta, theta_from_population, theta_from_sample

#: (d, sweeps) measured: 60 sweeps at d = 200, 30 at d = 400 (a curve costs ~4x more).
SIZES = ((200, 60), (400, 30))
SNRS = np.linspace(0.25, 3.0, 12)
REPLICATES = 16
N_BOOT = 200
#: Bisection steps of the overlap inversion (u in (0, u*): 2^-60 of u* is below rounding).
BISECTION_STEPS = 60


def theta_from_overlap(overlap: np.ndarray, delta: float, gamma: float) -> np.ndarray:
    """The ``theta`` whose theoretical sample overlap equals ``overlap`` (module docstring):
    ``theta = delta + 1/u`` with ``u`` in ``(0, u*)`` the root of the decreasing overlap
    curve, by bisection; an overlap at or below 0 gives ``theta_c`` (``u = u*``).
    O(size x BISECTION_STEPS)."""
    c = delta + gamma + delta * gamma
    u_star = float(critical_u(delta, gamma))
    q = np.clip(np.asarray(overlap, dtype=float), 0.0, 1.0 - 1e-12)
    low, high = np.zeros_like(q), np.full_like(q, u_star)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (low + high)
        value = (1 - c * mid**2 - 2 * delta * gamma * mid**3) / (1 + gamma * mid)
        above = value > q  # overlap decreases in u: the root is at larger u
        low, high = np.where(above, mid, low), np.where(above, high, mid)
    return delta + 1.0 / (0.5 * (low + high))


def curve_thetas(d: int, seed: list[int]) -> dict[str, np.ndarray]:
    """theta estimates along one replicate curve (per snr) for every estimator."""
    results = simulate_cell(d, 0.5, 0.5, 8, "iid", "mean", SNRS, seed=seed)
    first = results[0]
    delta, gamma, kappa = d / first.V, d / first.N, float(first.kappa)
    pop = np.array([r.pop_top_eigenvalues[0] for r in results])
    sam = np.array([r.top_eigenvalues[0] for r in results])
    overlap = np.array([r.overlap_class_mean[0] for r in results])
    return {
        "population": np.asarray(theta_from_population(pop, delta, kappa), dtype=float),
        "sample": np.asarray(theta_from_sample(sam, delta, gamma, kappa), dtype=float),
        "sample_overlap": theta_from_overlap(overlap, delta, gamma),
        "ratios": np.array([delta, gamma]),
    }


def main() -> dict:
    return {
        "snrs": [round(float(s), 4) for s in SNRS],
        "replicates": REPLICATES,
        **{f"d={d}": measure(d, trials) for d, trials in SIZES},
    }


def measure(d: int, trials: int) -> dict:
    """Every estimator's reference, coverage, width, spread and bias at one ``d`` over
    ``trials`` sweeps (module docstring). O(trials x REPLICATES) curves."""
    started = time.perf_counter()
    thetas = [
        [curve_thetas(d, [trial, replicate, 25]) for replicate in range(REPLICATES)]
        for trial in range(trials)
    ]
    delta, gamma = thetas[0][0]["ratios"]
    critical = {
        "population": float(critical_theta(delta, gamma, "population")),
        "sample": float(critical_theta(delta, gamma, "sample")),
        "sample_overlap": float(critical_theta(delta, gamma, "sample")),
    }
    simulate_seconds = time.perf_counter() - started
    rows: dict[str, dict] = {}
    for name, theta_c in critical.items():
        data = np.array([[rep[name] for rep in trial] for trial in thetas])  # (M, R, S)
        pooled = fit_threshold(
            SNRS, data.reshape(-1, SNRS.size).T, theta_c, n_boot=10, curves=True
        )["estimate"]
        for curves in (True, False) if name != "sample_overlap" else (True,):
            fits = [
                fit_threshold(
                    SNRS,
                    data[trial].T,
                    theta_c,
                    n_boot=N_BOOT,
                    rng=np.random.default_rng([trial, 26]),
                    curves=curves,
                )
                for trial in range(trials)
            ]
            estimate = np.array([fit["estimate"] for fit in fits])
            low = np.array([fit["ci_low"] for fit in fits])
            high = np.array([fit["ci_high"] for fit in fits])
            rows[f"{name}, {'whole curves' if curves else 'points'}"] = {
                "reference": round(float(pooled), 4),
                "coverage": round(float(np.mean((low <= pooled) & (pooled <= high))), 3),
                "median_half_width": round(float(np.nanmedian((high - low) / 2)), 4),
                "sd_estimate": round(float(np.nanstd(estimate, ddof=1)), 4),
                "mean_bias": round(float(np.nanmean(estimate) - pooled), 4),
                "finite": int(np.isfinite(estimate).sum()),
            }
    return {
        "trials": trials,
        "simulate_seconds": round(simulate_seconds, 1),
        "estimators": rows,
    }


if __name__ == "__main__":
    import json

    print(json.dumps(main(), indent=1))
