"""Calibration of the cost model: seconds per unit of
:func:`attnrmt.sweep.spec.cost.cell_work` on this machine, measured once per host and
package version. Cost: about one core-second."""

from __future__ import annotations

from pathlib import Path

from attnrmt.sweep.spec.cost import CELL_OVERHEAD_SECONDS, DEFAULT_SECONDS_PER_WORK, cell_work


def calibrate_seconds_per_work(
    d: int = 256, budget_seconds: float = 1.0, min_repeats: int = 5
) -> float:
    """Seconds per unit of :func:`cell_work`: the median CPU time of a ``d = 256`` cell (after a
    warm-up, for ``budget_seconds`` and at least ``min_repeats`` calls) over its work."""
    import statistics
    import time

    from threadpoolctl import threadpool_limits

    from attnrmt.model import simulate_cell

    kwargs = {
        "d": d,
        "delta": 0.5,
        "gamma": 0.5,
        "T": 8,
        "positional": {"kind": "iid"},
        "weights": {"kind": "mean"},
        "snr": 1.0,
        "centered": True,
        "top_k": 3,
    }
    timings: list[float] = []
    with threadpool_limits(1):  # one core's work, as the estimate states
        simulate_cell(**kwargs, seed=0)
        while len(timings) < min_repeats or sum(timings) < budget_seconds:
            start = time.process_time()
            simulate_cell(**kwargs, seed=len(timings))
            timings.append(time.process_time() - start)
            if len(timings) >= 50 * min_repeats:
                break
    work = cell_work(d, 0.5, 0.5, 8, "mean")
    return max(statistics.median(timings) - CELL_OVERHEAD_SECONDS, 0.0) / work or (
        DEFAULT_SECONDS_PER_WORK
    )


def cached_seconds_per_work(cache_path: str | Path) -> float:
    """:func:`calibrate_seconds_per_work`, kept in ``cache_path`` (JSON) and re-measured when
    the host or the package version changes."""
    import json
    import platform

    from attnrmt import __version__

    path = Path(cache_path)
    identity = {"host": platform.node(), "attnrmt": __version__}
    try:
        cached = json.loads(path.read_text())
        if cached.get("identity") == identity:
            return float(cached["seconds_per_work"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    measured = calibrate_seconds_per_work()
    from attnrmt.sweep.store.atomic import write_json_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomically(path, {"identity": identity, "seconds_per_work": measured})
    return measured
