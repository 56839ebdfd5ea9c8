"""Sizing: cores, workers and threads, walltimes (run/cluster/sizing.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from attnrmt.sweep.compute.cluster import (
    allocation_cores,
    parse_walltime,
    usable_cores,
    worker_layout,
    worker_lifetime,
)


@pytest.mark.parametrize(
    ("cores", "n_workers", "threads", "expected"),
    [
        (2, None, 1, (2, 1, 1)),
        (2, 1, 1, (1, 1, 2)),
        (8, None, 2, (4, 2, 1)),
        (8, 2, 1, (2, 1, 4)),
        (1, 4, 1, (4, 1, 1)),
    ],
)
def test_worker_layout_never_oversubscribes(cores, n_workers, threads, expected) -> None:
    layout = worker_layout(cores, n_workers, threads)
    assert (layout.n_workers, layout.threads_per_worker, layout.blas_threads) == expected
    if layout.n_workers * layout.threads_per_worker <= cores:
        assert layout.n_workers * layout.threads_per_worker * layout.blas_threads <= cores


def test_allocation_cores_prefers_slurm() -> None:
    assert allocation_cores({"SLURM_CPUS_PER_TASK": "6"}) == 6
    assert allocation_cores({}) == usable_cores()


@pytest.mark.parametrize(
    ("walltime", "seconds"),
    [("30", 1800), ("10:00", 600), ("01:00:00", 3600), ("1-02", 93600), ("2-00:30:00", 174600)],
)
def test_parse_walltime(walltime: str, seconds: int) -> None:
    assert parse_walltime(walltime) == seconds


@pytest.mark.parametrize("walltime", [600, 3600, 86400])
def test_worker_lifetime_ends_before_the_walltime(walltime: int) -> None:
    lifetime, stagger = worker_lifetime(walltime)
    assert 0 < lifetime and lifetime + stagger < walltime


@pytest.fixture
def dask_config() -> Iterator[None]:
    """Dask's configuration as installed (defaults, files, environment) for the test, the
    session's restored after it (configure_worker_environment writes to it, and so did
    any run cluster an earlier test started)."""
    import copy

    import dask

    saved = copy.deepcopy(dask.config.config)
    dask.config.refresh()
    try:
        yield
    finally:
        dask.config.config.clear()
        dask.config.config.update(saved)


def test_housekeeping_defaults_are_changed_and_a_users_value_is_kept(dask_config: None) -> None:
    """configure_worker_environment: every HOUSEKEEPING key at Dask's default takes ours;
    a key the user set (the tick here) keeps the user's value; BLAS threads land in the
    nanny's pre-spawn environment."""
    import dask

    from attnrmt.sweep.compute.cluster.sizing import HOUSEKEEPING, configure_worker_environment

    for key, (default, _) in HOUSEKEEPING.items():
        assert dask.config.get(key) == default, f"{key}: Dask's default changed"
    dask.config.set({"distributed.admin.tick.interval": "50ms"})
    configure_worker_environment(3)
    for key, (_, ours) in HOUSEKEEPING.items():
        expected = "50ms" if key == "distributed.admin.tick.interval" else ours
        assert dask.config.get(key) == expected, key
    assert dask.config.get("distributed.nanny.pre-spawn-environ")["OPENBLAS_NUM_THREADS"] == "3"
