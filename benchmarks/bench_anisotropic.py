"""Anisotropic tables: theory against simulated cells, and the theory's cost (docs/model.md,
"Anisotropic tables"; the table there is this benchmark's output).

For each law of :data:`LAWS` at ``delta = gamma = 0.5``, ``T = 8``, iid signs, mean pooling,
centred cells, at ``snr = 0`` (the noise's top eigenvalues) and at ``snr = 1.5`` times the
``finite_vocab`` sample threshold (at least 1): the seeds' mean and standard error of the top
population and sample eigenvalues and squared overlaps with ``u``, against the theory
(``attnrmt.theory.predict_point(..., table=law, d=d)``). ``main()`` returns the rows and
``bulk_seconds``: the median of :data:`REPEATS` of one anisotropic bulk (power spectrum,
``beta = 0.5``, ``u`` top: three critical-point scans) at each ``d`` of :data:`BULK_SIZES`
(target: :data:`BULK_SECONDS_TARGET` at ``d = 2000``), and the seconds of a theory grid
of 1000 points (50 snr x 10 ``alpha`` x centred or not, both variants) at ``d = 2000``
(bulk included). About 2 CPU-minutes
(``OMP_NUM_THREADS=1``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import xarray as xr

from attnrmt.model import simulate_cell
from attnrmt.model.table_laws import covariance_spectrum
from attnrmt.theory.anisotropic import anisotropic_bulk, signal_weights
from attnrmt.theory.predict import predict, predict_point
from benchmarks.bench_theory import median_seconds

LAWS: dict[str, dict[str, Any]] = {
    f"{name}-{signal}": {"kind": "anisotropic", **spec, "signal": signal}
    for name, spec in (
        ("two_level", {"spectrum": "two_level", "ratio": 4.0, "fraction": 0.25}),
        ("power0.25", {"spectrum": "power", "beta": 0.25}),
        ("power0.5", {"spectrum": "power", "beta": 0.5}),
    )
    for signal in ("top", "random", "bottom")
}
SIZES = ((400, 16), (800, 8))  # (d, seeds)
BULK_SIZES = (400, 800, 2000)
REPEATS = 3
#: The target: seconds of one anisotropic bulk at d = 2000.
BULK_SECONDS_TARGET = 3.0
MEASURED = {
    "pop_top_eigenvalue": lambda c: c.pop_top_eigenvalues[0],
    "sample_top_eigenvalue": lambda c: c.top_eigenvalues[0],
    "pop_overlap_signal": lambda c: c.pop_overlap_signal[0],
    "sample_overlap_signal": lambda c: c.overlap_signal[0],
}


def compare(law: dict[str, Any], d: int, seeds: int, snr: float) -> dict[str, Any]:
    """One point: measured mean, standard error and theory of every :data:`MEASURED`."""
    cells = [
        simulate_cell(d, 0.5, 0.5, 8, "iid", "mean", snr, True, 1, seed, "full", law)
        for seed in range(seeds)
    ]
    theory = predict_point(d / cells[0].V, d / cells[0].N, snr, 8, "iid", "mean", table=law, d=d)
    theory = theory.sel(variant="finite_vocab")
    row: dict[str, Any] = {"d": d, "snr": round(snr, 3)}
    for name, read in MEASURED.items():
        values = np.array([read(cell) for cell in cells])
        row[name] = [
            float(values.mean()),
            float(values.std(ddof=1) / np.sqrt(seeds)),
            float(theory[name]),
        ]
    row["threshold_snr_sample"] = float(theory["threshold_snr_sample"])
    return row


def main() -> dict[str, Any]:
    """Run the comparison and the timings, print and return them."""
    rows = []
    for name, law in LAWS.items():
        for d, seeds in SIZES:
            point = predict_point(0.5, 0.5, 1.0, 8, "iid", "mean", table=law, d=d)
            threshold = float(point["threshold_snr_sample"].sel(variant="finite_vocab"))
            for snr in (0.0, max(1.0, 1.5 * threshold)):
                rows.append({"law": name, **compare(law, d, seeds, snr)})
                print(json.dumps(rows[-1]), flush=True)
    law, seconds = LAWS["power0.5-top"], {}
    for d in BULK_SIZES:
        lam = covariance_spectrum(law, d)
        assert lam is not None
        seconds[f"d={d}"] = median_seconds(
            lambda lam=lam: anisotropic_bulk(lam, signal_weights(law, lam.size), 0.5, 0.5),
            REPEATS,
        )
    snr, alpha = xr.DataArray(np.linspace(0, 3, 50), dims="snr"), np.linspace(0.2, 1, 10)
    grid = median_seconds(  # 1000 points, both variants, centred and not
        lambda: predict(
            0.5,
            0.5,
            snr,
            xr.DataArray(alpha, dims="w"),
            0.2,
            1.0,
            xr.DataArray([True, False], dims="c"),
            table=law,
            d=2000,
        ),
        REPEATS,
    )
    ok = seconds["d=2000"] <= BULK_SECONDS_TARGET
    print(json.dumps({"bulk_seconds": seconds, "grid_1000_points_d2000_seconds": grid}))
    return {
        "rows": rows,
        "bulk_seconds": seconds,
        "bulk_ok": ok,
        "grid_1000_points_d2000_seconds": grid,
    }


if __name__ == "__main__":
    main()
