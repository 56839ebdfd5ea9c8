"""Zipped axes (config key ``zip``; docs/getting-started.md, "Zipped axes"): the cells of
a zipped sweep are the product's cells at the paired values (same keys, seeds, blocks'
members), in grid order; a bad ``zip`` is named with its key and value."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from attnrmt.sweep import ConfigError, plan_run
from attnrmt.sweep.spec.config import validate_config

DELTA, GAMMA, T = [0.25, 0.5, 1.0], [0.5, 1.0, 2.0], [3, 4, 6]


def config(zip_groups: Any = None) -> dict[str, Any]:
    sweep: dict[str, Any] = {
        "d": [20, 30],
        "delta": DELTA,
        "gamma": GAMMA,
        "T": T,
        "snr": [0.0, 1.0],
        "replicates": 2,
    }
    if zip_groups is not None:
        sweep["zip"] = zip_groups
    return {"run": "z", "sweeps": {"s": sweep}, "execution": {"block_size": 3}}


def planned(zip_groups: Any = None) -> Any:
    valid = validate_config(config(zip_groups))
    return plan_run(valid.config, valid.sweeps).sweeps["s"]


@pytest.mark.parametrize("groups", [[["delta", "gamma"]], [["delta", "gamma", "T"]]])
def test_zipped_cells_are_the_products_paired_cells(groups: list[list[str]]) -> None:
    zipped, product = planned(groups), planned()
    paired = {
        tuple(values)
        for values in zip(*(dict(delta=DELTA, gamma=GAMMA, T=T)[a] for a in groups[0]), strict=True)
    }
    expected = [
        cell for cell in product.cells if tuple(getattr(cell, axis) for axis in groups[0]) in paired
    ]
    assert (
        zipped.n_cells
        == len(expected)
        == product.n_cells * len(DELTA) // len(DELTA) ** len(groups[0])
    )
    assert [cell.key for cell in zipped.cells] == [cell.key for cell in expected]  # grid order
    assert zipped.cell_keys() == [cell.key for cell in expected]
    members = [key for block in zipped.blocks for key in block.cell_keys]
    assert sorted(members) == sorted(zipped.cell_keys())  # every cell in one block, once
    assert {block.key for block in zipped.blocks} <= {block.key for block in product.blocks}
    assert zipped.config_sha256 != product.config_sha256
    words = zipped.cells[5].seed_words(2026)
    assert words == next(c for c in product.cells if c.key == zipped.cells[5].key).seed_words(2026)
    assert np.unique(zipped.grid.keys[zipped.grid.present], axis=0).shape[0] == zipped.n_cells


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ([["delta", "gamma"], ["gamma", "T"]], "sweeps.s.zip[1][0]='gamma': already zipped"),
        ([["delta", "d"]], "sweeps.s.zip[0]=['delta', 'd']: zipped axes need as many values"),
        ([["delta", "snr"]], "sweeps.s.zip[0][1]='snr': must be one of"),
        ([["delta"]], "sweeps.s.zip[0]=['delta']: must have at least 2 entries"),
    ],
)
def test_bad_zip_names_key_and_value(groups: Any, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        validate_config(config(groups))
    assert message in str(error.value)
