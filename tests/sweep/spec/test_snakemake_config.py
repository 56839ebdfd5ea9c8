"""How the Snakemake config becomes a valid config (attnrmt.sweep.spec.snakemake_config):
--config strings get their schema types back, quoted numbers in a file stay rejected."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from attnrmt.sweep import ConfigError
from attnrmt.sweep.spec.schema import load_schema
from attnrmt.sweep.spec.snakemake_config import snakemake_config
from tests.sweep.spec.conftest import small_config


def test_command_line_strings_get_their_schema_types_back() -> None:
    from attnrmt.sweep.spec.snakemake_config import restore_scalar_types

    # what Snakemake makes of a profile's `config: {dask: {...}}` (YAML BaseLoader)
    config = {
        "run": "2026",  # a string in the schema: stays a string
        "dask": {
            "mode": "slurm",
            "n_workers": "null",
            "dashboard": "false",
            "jobqueue": {"cores": "4", "memory": "16GB", "walltime": "02:00:00", "queue": "null"},
        },
        "positional_models": {"m": {"kind": "markov", "r": "0.5"}},
        "sweeps": {"a": {"d": ["20", "40"], "centered": ["true"], "replicates": "2"}},
    }
    same_object = config["dask"]
    restored = restore_scalar_types(config, load_schema())
    assert restored is config and config["dask"] is same_object  # updated in place
    assert config["run"] == "2026"
    assert config["dask"]["n_workers"] is None and config["dask"]["dashboard"] is False
    assert config["dask"]["jobqueue"] == {
        "cores": 4,
        "memory": "16GB",
        "walltime": "02:00:00",
        "queue": None,
    }
    assert config["positional_models"]["m"]["r"] == 0.5
    assert config["sweeps"]["a"] == {"d": [20, 40], "centered": [True], "replicates": 2}


def test_snakemake_config_restores_command_line_strings_only(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(small_config()), encoding="utf-8")
    merged = small_config()  # as Snakemake hands it over: files, then --config strings
    merged["seed"] = "7"
    merged["dask"] = {"jobqueue": {"cores": "4"}, "dashboard": "false"}
    valid = snakemake_config(merged, [path])
    assert merged is not valid.config and merged == valid.config  # replaced in place
    assert merged["seed"] == 7 and merged["dask"]["jobqueue"]["cores"] == 4
    assert merged["dask"]["dashboard"] is False
    quoted = small_config()
    quoted["sweeps"]["transition"]["snr"] = "1.5"  # quoted in the FILE: text, rejected
    path.write_text(yaml.safe_dump(quoted), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"sweeps\.transition\.snr='1\.5'.*without quotes"):
        snakemake_config(copy.deepcopy(quoted), [path])
    del quoted["run"]
    quoted["sweeps"]["transition"]["snr"] = 1.5
    path.write_text(yaml.safe_dump(quoted), encoding="utf-8")
    assert snakemake_config(copy.deepcopy(quoted), [path]).config["run"] == "exp"
