"""Fixtures of the cluster tests."""

from __future__ import annotations

import signal

import pytest


@pytest.fixture(scope="module", autouse=True)
def jobqueue_defaults() -> None:
    """dask-jobqueue's configuration registered before any dask.config.set of it (its
    import also sets a SIGINT handler: undone)."""
    before = signal.getsignal(signal.SIGINT)
    import dask_jobqueue  # noqa: F401

    signal.signal(signal.SIGINT, before)
