"""Fixtures shared by the unit tests (tests/README.md): one definition instead of copies.

* ``tiny_config``: a factory of the config of one tiny sweep (``grid``: d = 12, T = 3,
  prefix(2) signs, mean pooling, snr 0 and 1, 2 replicates, top_k 2, blocks of 4);
  keyword arguments replace top-level keys, ``sweep={...}`` replaces axes of ``grid``.
* ``tiny_plan``: ``plan_run(load_config(tiny_config()))`` (4 cells in 1 block).
* ``small_synthetic``: a contract-shaped ``(cells, theory)`` pair from
  :func:`attnrmt.analysis.synthetic.make_synthetic` (d = 100, snr 0.5 and 2, 1 replicate);
  session-scoped, so tests must not modify it in place.

Everything here is O(1) in time and memory (a few dozen cells at most).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import xarray as xr

from attnrmt.sweep.spec.config import load_config
from attnrmt.sweep.spec.plan import RunPlan, plan_run
from tests.analysis.synthetic import make_synthetic

# The shared cell cache (attnrmt.sweep.store.cell_cache) is off for every test and the runs
# they start (inherited by subprocesses): a test computes its cells, whatever ran before.
# Tests of the cache point it at their own folder (monkeypatch.setenv).
os.environ["ATTNRMT_CELL_CACHE"] = "off"

_TINY_CONFIG: dict[str, Any] = {
    "run": "unit",
    "seed": 3,
    "positional_models": {"prefix2": {"kind": "prefix", "L": 2}},
    "sweeps": {
        "grid": {
            "d": [12],
            "delta": [0.5],
            "gamma": [0.5],
            "T": [3],
            "positional": ["prefix2"],
            "weights": ["mean"],
            "snr": [0.0, 1.0],
            "replicates": 2,
            "top_k": 2,
        }
    },
    "execution": {"block_size": 4},
}


def build_tiny_config(*, sweep: Mapping[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    """A fresh copy of the tiny config with ``top`` keys and ``sweep`` axes replaced."""
    config = copy.deepcopy(_TINY_CONFIG)
    config.update(copy.deepcopy(top))
    config["sweeps"]["grid"].update(copy.deepcopy(dict(sweep or {})))
    return config


@pytest.fixture(scope="session")
def tiny_config() -> Callable[..., dict[str, Any]]:
    """Factory: ``tiny_config(sweep={"d": [6]}, seed=5)`` -> config dict (a fresh copy)."""
    return build_tiny_config


@pytest.fixture(scope="session")
def tiny_plan() -> RunPlan:
    """The plan of the tiny config (validated by the schema like any run)."""
    return plan_run(load_config(build_tiny_config()))


@pytest.fixture(scope="session")
def small_synthetic() -> tuple[xr.Dataset, xr.Dataset]:
    """``(cells, theory)``: iid signs, mean pooling, d = 100, snr (0.5, 2), 1 replicate."""
    return make_synthetic(d=(100,), snr=(0.5, 2.0), replicates=1)
