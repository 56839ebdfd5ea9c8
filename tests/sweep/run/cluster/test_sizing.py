"""Sizing: cores, workers and threads, walltimes (run/cluster/sizing.py)."""

from __future__ import annotations

import pytest

from attnrmt.sweep.run.cluster import (
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
