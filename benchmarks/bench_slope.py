"""Small-``d`` slope bias of the sample ``theta_hat`` line on real cells (issue 33, item 2;
docs/thresholds.md, "Slope bias on real cells").

The default run's ``transition_iid`` design (iid signs, mean pooling, ``delta = gamma =
0.5``, ``T = 8``, the ``SNRS`` of config.yaml, ``REPLICATES`` independent cells per point)
is drawn ``SWEEPS[d]`` times at each ``d`` of ``D`` (:func:`attnrmt.model.simulate_cell`,
disjoint seeds). Per sweep, the free per-``d`` slope and crossing of the sample line are
fitted three ways on the same outliers:

* ``shipped``: :func:`attnrmt.analysis.thresholds.fit_threshold` with the outliers: each
  point's ``theta`` is ``g^(-1)`` of the replicate mean of ``lambda / kappa``, and the line
  is fitted on each half of the replicates over the points the other half detects, the two
  averaged;
* ``inverted_mean``: the same point values, detection and fit on all replicates;
* ``mean_of_inverted``: the replicate mean of ``theta_hat = g^(-1)(lambda)``, detection and
  fit on all replicates (the estimator before issue 33).

``alpha/kappa = 1``, so an unbiased line has slope 1; the target of issue 33 is 2% at every
``d``. Also recorded: the median crossing and its sd over sweeps. Cost: ~15 CPU minutes
(one BLAS thread).
"""

from __future__ import annotations

import time

import numpy as np

from attnrmt.analysis.thresholds import _contiguous_from_top, _masked_line, fit_threshold
from attnrmt.model import simulate_cell
from attnrmt.theory.spike import critical_theta, theta_from_sample

DELTA, GAMMA, T = 0.5, 0.5, 8
SNRS = np.array([0.4, 0.9, 1.2, 1.5, 1.7, 1.9, 2.1, 2.3, 2.5, 2.7, 2.9, 3.1, 3.3, 3.5, 3.7, 3.9])
REPLICATES = 16
D = (100, 200, 400, 600)
SWEEPS = {100: 200, 200: 80, 400: 30, 600: 12}
#: Largest tolerated |slope - alpha/kappa| (issue 33, item 2).
SLOPE_TOLERANCE = 0.02


def outliers(d: int, sweeps: int) -> np.ndarray:
    """``lambda / kappa`` of the sample outlier, (sweeps, snr, replicate). O(cells)."""
    x = np.empty((sweeps, SNRS.size, REPLICATES))
    for s in range(sweeps):
        for j, snr in enumerate(SNRS):
            for r in range(REPLICATES):
                cell = simulate_cell(
                    d, DELTA, GAMMA, T, "iid", "mean", float(snr), seed=[d, s, j, r]
                )
                x[s, j, r] = cell.top_eigenvalues[0] / cell.kappa
    return x


def plain_line(y: np.ndarray, theta_c: float) -> tuple[float, float]:
    """Slope and crossing of one line through the points whose value exceeds the level."""
    a, b, _ = _masked_line(SNRS, y, _contiguous_from_top(y > theta_c * 1.1))
    return float(b), float((theta_c - a) / b)


def fits(x: np.ndarray, theta_c: float) -> dict[str, np.ndarray]:
    """(slope, crossing) per sweep of the three estimators. O(sweeps x snr x reps)."""
    theta = theta_from_sample(x, DELTA, GAMMA, 1.0)
    inverted = theta_from_sample(x.mean(-1), DELTA, GAMMA, 1.0)
    out: dict[str, list] = {"shipped": [], "inverted_mean": [], "mean_of_inverted": []}
    for xs, ys, zs in zip(x, theta, inverted, strict=True):
        fit = fit_threshold(SNRS, ys, theta_c, n_boot=10, outliers=xs)
        out["shipped"].append((fit["slope"], fit["extrapolated"]))
        out["inverted_mean"].append(plain_line(zs, theta_c))
        out["mean_of_inverted"].append(plain_line(ys.mean(-1), theta_c))
    return {rule: np.array(values) for rule, values in out.items()}


def main() -> dict:
    started = time.process_time()
    theta_c = float(critical_theta(DELTA, GAMMA, "sample"))
    result: dict = {"snrs": SNRS.tolist(), "replicates": REPLICATES, "sweeps": dict(SWEEPS)}
    worst = dict.fromkeys(("shipped", "inverted_mean", "mean_of_inverted"), 0.0)
    for d in D:
        entry = {}
        for rule, values in fits(outliers(d, SWEEPS[d]), theta_c).items():
            b, c = values[np.isfinite(values).all(1)].T
            entry[rule] = {
                "slope": round(float(b.mean()), 4),
                "slope_sem": round(float(b.std(ddof=1) / np.sqrt(b.size)), 4),
                "crossing_median": round(float(np.median(c)), 3),
                "crossing_sd": round(float(c.std(ddof=1)), 3),
            }
            worst[rule] = max(worst[rule], abs(entry[rule]["slope"] - 1.0))
        result[f"d={d}"] = entry
    result["worst_slope_error"] = {rule: round(value, 4) for rule, value in worst.items()}
    result["slope_ok"] = worst["shipped"] <= SLOPE_TOLERANCE
    result["cpu_seconds"] = round(time.process_time() - started, 1)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(main(), indent=1))
