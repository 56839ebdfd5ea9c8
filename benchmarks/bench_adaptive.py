"""Cells to reach one CI half-width on every threshold: rounds planned by the target
(:func:`attnrmt.sweep.spec.target.next_design`, what ``attnrmt run`` does between rounds)
against the shipped uniform grid and python-adaptive's ``AverageLearner1D`` (issue 36).

Settings: the finite-size study's three (``configs/finite-size.yaml``: iid/mean,
markov(0.5)/mean, label(0.3, 4)/optimal at delta = gamma = 0.5, T = 8) at ``d = D_ONE``,
every threshold at that ``d`` (markov's population threshold, -0.02 < 0, is a bound for
every design: sample only), and iid/mean over ``LADDER`` with its ``d -> inf`` limits.
One cell function for all three strategies: an independent cell (full spectrum, the
cheaper one at these d) -> ``theta_hat`` of both transitions (seed: setting, d, snr,
replicate). One estimator for all three (:func:`fit`): the pipeline's detection rule and
line crossing (docs/thresholds.md) with a parametric bootstrap of the point means, so that
points with unequal sample counts (python-adaptive's) are handled alike; the ladder's
limit is :func:`attnrmt.analysis.thresholds.finite_size_fit` of those crossings.

* uniform: the shipped hand-placed snr points, one replicate count for every setting and
  d, the smallest of ``UNIFORM_REPLICATES`` (steps of at most 1.5x) at which every
  threshold of every study meets the target (the grid a user sizes by rerunning with more
  replicates until the CIs are narrow enough);
* adaptive: the same hand-placed snr points and 2 replicates, then rounds of
  ``next_design`` per study (as configs/finite-size.yaml's targets do); the ladder's
  replicates spread over its d by ``replicates_per_d`` (each d priced by the cost model);
* python-adaptive: one ``AverageLearner1D`` per (setting, d) on the sample
  ``theta_hat`` over the hand grid's snr range, asked for ``BATCH`` points at a time
  until every threshold of its setting meets the target.

Cost: a few CPU minutes (d <= 200, one BLAS thread). The ratios are of cells and of the
measured CPU seconds of each strategy's cells (docs/architecture.md, "Rounds").
"""

from __future__ import annotations

import math
import sys
import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from attnrmt.analysis.thresholds import DEFAULT_MARGIN, finite_size_fit, finite_size_weights
from attnrmt.model import simulate_cell
from attnrmt.sweep.spec.cost import estimated_cell_seconds
from attnrmt.sweep.spec.target import Target, distance, next_design, replicates_per_d
from attnrmt.theory.spike import critical_theta, theta_from_population, theta_from_sample

HALFWIDTH = 0.2
D_ONE = 200
LADDER = (50, 100, 200)
UNIFORM_REPLICATES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
BATCH = 8
MAX_CELLS = 6_000
N_BOOT = 400
TARGET_RATIO_UNIFORM = 0.33
#: (positional, weights, hand snr points of configs/finite-size.yaml, transitions)
SETTINGS = {
    "iid/mean": (
        {"kind": "iid"},
        "mean",
        [0.55, 0.95, 1.1, 1.25, 1.4, 1.6, 1.8, 2.05, 2.2, 2.35, 2.5, 2.65, 2.8, 3.0],
        ("population", "sample"),
    ),
    "markov/mean": (
        {"kind": "markov", "r": 0.5},
        "mean",
        [0, 0.1, 0.18, 0.26, 0.34, 0.42, 0.52, 0.58, 0.64, 0.71, 0.78, 0.86, 0.94, 1.02, 1.1],
        ("sample",),
    ),
    "label/optimal": (
        {"kind": "label", "rho0": 0.3, "L": 4},
        "optimal",
        [0.3, 0.62, 0.72, 0.85, 0.98, 1.12, 1.28, 1.38, 1.48, 1.6, 1.72, 1.86, 2.0, 2.15, 2.3],
        ("population", "sample"),
    ),
}
#: study name -> (setting, d values); the ladder's thresholds are its d -> inf limits.
STUDIES = {f"{s} d={D_ONE}": (s, (D_ONE,)) for s in SETTINGS} | {
    "iid/mean ladder": ("iid/mean", LADDER)
}
BOTH = ("population", "sample")
#: The target of every study (max_growth: the schema's default, 2).
TARGET = Target(dict.fromkeys(BOTH, HALFWIDTH), dict.fromkeys(BOTH, False), 1.0, BOTH, 2.0)


class Cells:
    """Memoised cell function: (setting, d, snr, replicate) -> (theta_pop, theta_sample)."""

    def __init__(self) -> None:
        self.done: dict[tuple, tuple[float, float]] = {}
        self.cpu: dict[tuple, float] = {}
        self.seconds = 0.0

    def design_cpu(self, study: str, snr: Sequence[float], reps: int | dict) -> float:
        """Measured CPU seconds of a study's grid design (its cells computed)."""
        setting, ds = STUDIES[study]
        per_d = reps if isinstance(reps, dict) else dict.fromkeys(ds, reps)
        points = [round(float(x), 6) for x in snr]
        return sum(
            self.cpu[(setting, d, x, r)] for d in ds for x in points for r in range(per_d[d])
        )

    def __call__(self, setting: str, d: int, snr: float, rep: int) -> tuple[float, float]:
        key = (setting, d, round(float(snr), 6), rep)
        if key not in self.done:
            positional, weights = SETTINGS[setting][:2]
            seed = [list(SETTINGS).index(setting), d, int(key[2] * 1e6), rep]
            started = time.process_time()
            c = simulate_cell(d, 0.5, 0.5, 8, positional, weights, key[2], seed=seed)
            self.cpu[key] = time.process_time() - started
            self.seconds += self.cpu[key]
            delta, gamma = d / c.V, d / c.N
            self.done[key] = (
                float(theta_from_population(c.pop_top_eigenvalues[0], delta, c.kappa)),
                float(theta_from_sample(c.top_eigenvalues[0], delta, gamma, c.kappa)),
            )
        return self.done[key]


def fit(points: dict[float, list[float]], theta_c: float, rng: np.random.Generator) -> dict:
    """Crossing of one curve (snr -> theta_hat samples): detected points contiguous from
    the top above ``theta_c (1 + margin)``, a line weighted by sample counts, its crossing of
    ``theta_c``; CI from ``N_BOOT`` normal draws of the point means (pooled variance)."""
    s = np.array(sorted(points))
    samples = [np.asarray(points[x], dtype=float) for x in s]
    n = np.array([len(v) for v in samples], dtype=float)
    mean = np.array([v.mean() for v in samples])
    pairs = [(v.var(ddof=1), len(v) - 1) for v in samples if len(v) > 1]
    var = sum(a * b for a, b in pairs) / max(sum(b for _, b in pairs), 1) if pairs else np.nan
    above = mean > theta_c * (1 + DEFAULT_MARGIN)
    detected = np.zeros(s.size, bool)
    k = s.size
    while k > 0 and above[k - 1]:
        k -= 1
    detected[k:] = True
    out = {"n_detected": int(detected.sum()), "estimate": np.nan, "ci_low": np.nan}
    out |= {"ci_high": np.nan, "bound": "above", "boot": np.full(N_BOOT, np.nan)}
    if detected.sum() < 2 or not np.isfinite(var):
        return out
    x, w = s[detected], n[detected]
    draws = mean[detected] + rng.standard_normal((N_BOOT, x.size)) * np.sqrt(var / w)
    ys = np.vstack([mean[detected], draws])
    xm = (w * x).sum() / w.sum()
    slope = ((ys - (ys * w).sum(1, keepdims=True) / w.sum()) * w * (x - xm)).sum(1)
    slope = slope / (w * (x - xm) ** 2).sum()
    intercept = (ys * w).sum(1) / w.sum() - slope * xm
    crossing = np.where(slope > 0, (theta_c - intercept) / slope, np.nan)
    low, high = np.nanpercentile(crossing[1:], [2.5, 97.5])
    bound = "below" if detected[0] else "none"
    return (
        out
        | {"estimate": crossing[0], "ci_low": low, "ci_high": high, "bound": bound}
        | {"boot": crossing[1:]}
    )


def thresholds(study: str, data: dict[int, dict[float, list]], seed: int = 0) -> list[dict]:
    """The target's threshold rows of one study from its cells ``data[d][snr]``."""
    setting, ds = STUDIES[study]
    rng = np.random.default_rng(seed)
    rows = []
    for t, transition in enumerate(("population", "sample")):
        if transition not in SETTINGS[setting][3]:
            continue
        c = [float(critical_theta(0.5, 0.5, transition))] * len(ds)  # d / V = d / N = 0.5
        fits = [
            fit({x: [v[t] for v in vals] for x, vals in data[d].items()}, c[i], rng)
            for i, d in enumerate(ds)
        ]
        if len(ds) == 1:
            rows.append(fits[0] | {"transition": transition})
            continue
        boot = np.array([f["boot"] for f in fits])
        est = np.array([f["estimate"] for f in fits])
        if not np.all(np.isfinite(est)):
            rows.append(
                {"estimate": np.nan, "ci_low": np.nan, "ci_high": np.nan, "bound": "above"}
                | {"transition": transition}
            )
            continue
        x, w = np.array(ds, float), finite_size_weights(boot, len(ds))
        limit = finite_size_fit(x, est, boot, weights=w)
        # the limit's weight on each d (its derivative) squared times d's variance (1 / w)
        step = 1e-4 * np.eye(len(ds))
        slope = [(finite_size_fit(x, est + e, weights=w)["a"] - limit["a"]) / 1e-4 for e in step]
        share = list(np.square(slope) / w)
        rows.append({"transition": transition, "estimate": limit["a"], "share": share} | limit)
    return rows


def met(study: str, data: dict) -> bool:
    return all(distance(TARGET, row) <= 1 for row in thresholds(study, data))


def grid_data(cells: Cells, study: str, snr: Sequence[float], reps: int | dict) -> dict:
    """Cells of a design, ``reps`` replicates at every d or ``{d: replicates}``."""
    setting, ds = STUDIES[study]
    per_d = reps if isinstance(reps, dict) else dict.fromkeys(ds, reps)
    return {
        d: {float(x): [cells(setting, d, x, r) for r in range(per_d[d])] for x in snr} for d in ds
    }


def cell_seconds(setting: str, d: int) -> float:
    _positional, weights = SETTINGS[setting][:2]
    kw = {"d": d, "delta": 0.5, "gamma": 0.5, "T": 8, "weights": weights, "spectrum": "full"}
    return estimated_cell_seconds(kw)


def uniform(cells: Cells) -> dict:
    for reps in UNIFORM_REPLICATES:
        print("uniform", reps, round(cells.seconds), file=sys.stderr, flush=True)
        ok = [
            met(study, grid_data(cells, study, SETTINGS[s][2], reps))
            for study, (s, _) in STUDIES.items()
        ]
        if all(ok):
            n = sum(len(SETTINGS[s][2]) * len(ds) * reps for s, ds in STUDIES.values())
            cpu = sum(
                cells.design_cpu(study, SETTINGS[s][2], reps) for study, (s, _) in STUDIES.items()
            )
            return {"replicates": reps, "cells": n, "cpu_seconds": cpu, "reached": True}
    return {"replicates": reps, "cells": math.nan, "reached": False}


def adaptive(cells: Cells) -> dict:
    """Rounds of ``next_design`` per study from 2 replicates; a ladder whose unmet limits
    all have a finite CI spreads its replicates over d by ``replicates_per_d`` (each d's
    price: its cells' cost-model seconds), else grows every d alike."""
    total, rounds, reached, designs, cpu = 0, 0, [], {}, 0.0
    for study, (setting, ds) in STUDIES.items():
        reps, snr, spent = [2] * len(ds), SETTINGS[setting][2], 0.0
        cost = [cell_seconds(setting, d) for d in ds]

        def price(r: list[int], xs: Sequence[float], cost: list = cost) -> float:
            return len(xs) * float(np.dot(r, cost))

        while True:
            rows = thresholds(study, grid_data(cells, study, snr, dict(zip(ds, reps, strict=True))))
            per_d = None
            if len(ds) > 1 and all(math.isfinite(distance(TARGET, row)) for row in rows):
                wanted = [
                    replicates_per_d(
                        reps, row["share"], cost, distance(TARGET, row), TARGET.max_growth
                    )
                    for row in rows
                    if distance(TARGET, row) > 1
                ]
                per_d = np.max(wanted, axis=0).tolist() if wanted else None
            design = next_design(TARGET, reps, snr, rows, price, spent, per_d)
            if design is None:
                break
            spent += price(design[0], design[1]) - price(reps, snr)
            reps, snr = design
            rounds += 1
        total += sum(reps) * len(snr)
        per = dict(zip(ds, reps, strict=True))
        reached.append(met(study, grid_data(cells, study, snr, per)))
        designs[study] = {"replicates": {f"d={d}": r for d, r in per.items()}}
        designs[study] |= {"snr_points": len(snr)}
        cpu += cells.design_cpu(study, snr, per)
    out = {"cells": total, "cpu_seconds": cpu, "rounds": rounds, "reached": all(reached)}
    return out | {"designs": designs}


def python_adaptive(cells: Cells) -> dict:
    """One ``AverageLearner1D`` per (setting, d) (``min_samples = 2`` as the adaptive
    start, other parameters python-adaptive's defaults), ``BATCH`` points per ask, until
    every threshold of the study meets the target or ``MAX_CELLS`` are spent."""
    import adaptive as python_adaptive_package

    total, reached = 0, []
    for study, (setting, ds) in STUDIES.items():
        hand = SETTINGS[setting][2]
        data: dict[int, dict[float, list]] = {d: defaultdict(list) for d in ds}
        learners = {}
        for d in ds:

            def f(seed_x: tuple, d: int = d, data: dict = data, setting: str = setting) -> float:
                theta = cells(setting, d, seed_x[1], 10_000 + seed_x[0])
                data[d][float(seed_x[1])].append(theta)
                return theta[1]

            learners[d] = python_adaptive_package.AverageLearner1D(
                f, bounds=(hand[0], hand[-1]), min_samples=2
            )
        n = 0
        while not met(study, data) and n < MAX_CELLS:
            for learner in learners.values():
                points, _ = learner.ask(BATCH)
                for point in points:
                    learner.tell(point, learner.function(point))
                n += len(points)
        total += n
        reached.append(met(study, data))
        print("python-adaptive", study, n, round(cells.seconds), file=sys.stderr, flush=True)
    cpu = sum(seconds for key, seconds in cells.cpu.items() if key[3] >= 10_000)
    return {"cells": total, "cpu_seconds": cpu, "reached": all(reached)}


def main() -> dict:
    cells = Cells()
    result: dict = {"halfwidth": HALFWIDTH, "d": D_ONE, "ladder": list(LADDER)}
    for name, strategy in (("adaptive", adaptive), ("uniform", uniform)):
        result[name] = strategy(cells)
        print(name, result[name], round(cells.seconds), file=sys.stderr, flush=True)
    result["python_adaptive"] = python_adaptive(cells)
    cells_of = {k: result[k]["cells"] for k in ("uniform", "adaptive", "python_adaptive")}
    result["adaptive_cells_vs_uniform"] = round(cells_of["adaptive"] / cells_of["uniform"], 3)
    result["adaptive_cells_vs_python_adaptive"] = round(
        cells_of["adaptive"] / cells_of["python_adaptive"], 3
    )
    cpu_of = {k: result[k]["cpu_seconds"] for k in cells_of}
    result["adaptive_cpu_vs_uniform"] = round(cpu_of["adaptive"] / cpu_of["uniform"], 3)
    result["adaptive_cpu_vs_python_adaptive"] = round(
        cpu_of["adaptive"] / cpu_of["python_adaptive"], 3
    )
    result["all_reached"] = all(result[k]["reached"] for k in cells_of)
    result["cpu_seconds_of_cells"] = round(cells.seconds, 1)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(main(), indent=1, default=float))
