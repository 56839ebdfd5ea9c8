"""Shared helpers of the spec tests (config, plan, identity, snakemake_config): the small
test config and cells of known key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from attnrmt.sweep import Cell, load_config, plan_run

#: The test configs (tests/configs).
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


#: The small config of the spec tests.
SMALL = CONFIGS / "small.yaml"


def small_config() -> dict[str, Any]:
    """A fresh copy of tests/configs/small.yaml as a mapping (O(1))."""
    with SMALL.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


# The canonical JSON of KNOWN_CELL, spelled out: if this test fails, every cell key (and so
# every stored fragment) has changed; bump MODEL_VERSION on purpose, never by accident.
KNOWN_CELL_JSON = (
    '{"T":8,"centered":true,"d":400,"delta":0.5,"gamma":0.5,"model_version":1,'
    '"positional":{"L":4,"kind":"prefix"},"replicate":0,"snr":1,"top_k":3,'
    '"weights":{"kind":"mean"}}'
)


#: sha256 of KNOWN_CELL_JSON: the key of :func:`known_cell`.
KNOWN_CELL_KEY = "fbcff87a37bc40cbafde16bd03eb4e034b7dd1e84ba3afab54c78c75cbbd9591"


def known_cell(**changes: Any) -> Cell:
    """The cell of KNOWN_CELL_JSON (d = 400, T = 8, prefix(4), mean) with ``changes``."""
    fields = {
        "d": 400,
        "delta": 0.5,
        "gamma": 0.5,
        "T": 8,
        "positional": "prefix4",
        "weights": "mean",
        "snr": 1.0,
        "centered": True,
        "replicate": 0,
        "top_k": 3,
        "positional_spec": {"kind": "prefix", "L": 4},
        "weights_spec": {"kind": "mean"},
    }
    fields.update(changes)
    return Cell(**fields)


def sweep_config(**sweep: Any) -> dict[str, Any]:
    """A one-sweep config (``s``: d = 20, T = 4, prefix(2), mean and causal_limit) with the
    sweep's keys replaced by ``sweep``."""
    base = {
        "seed": 5,
        "positional_models": {"p2": {"kind": "prefix", "L": 2}},
        "weight_models": {"c1": {"kind": "causal_limit", "tau": 1.0}},
        "sweeps": {"s": {"d": [20], "T": [4], "positional": ["p2"], "weights": ["mean", "c1"]}},
        "execution": {"block_size": 4},
    }
    base["sweeps"]["s"].update(sweep)
    return base


def plan_of(config: dict[str, Any], sweep: str = "s") -> Any:
    """The plan of ``sweep`` in ``config`` (loaded and validated)."""
    return plan_run(load_config(config)).sweeps[sweep]
