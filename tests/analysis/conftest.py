"""Shared fixtures of the analysis tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xarray as xr

from attnrmt.analysis._common import setting_rng
from attnrmt.analysis.pipeline import ci_settings
from attnrmt.contract import CURVE_AXES, TABLE_AXIS
from attnrmt.sweep.spec.schema import with_defaults


@pytest.fixture(scope="session")
def ci() -> dict[str, Any]:
    """``level``, ``n_boot``, ``seed`` of every replicate CI at the schema's defaults."""
    return ci_settings(with_defaults(None, "analysis"))


def curve_rng(seed: int, curve: xr.Dataset, transition: str) -> np.random.Generator:
    """The bootstrap generator ``estimate_thresholds`` gives a one-``d`` curve (its
    coordinates, ``transition``; docs/data-contract.md, "Seeds of the analysis")."""
    setting = {axis: curve[axis].item() for axis in CURVE_AXES if axis in curve.coords}
    setting.pop(TABLE_AXIS, None)
    return setting_rng(seed, {**setting, "transition": transition})
