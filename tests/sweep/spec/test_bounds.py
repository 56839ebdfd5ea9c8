"""Inputs bounded before they allocate (attnrmt.sweep.spec.bounds; docs/getting-started.md,
"Size limits"): each refused within a second by ``attnrmt validate``, naming the key,
with the memory of the process bounded; ``--force`` plans it anyway."""

from __future__ import annotations

import resource
from pathlib import Path
from typing import Any

import pytest
import yaml

from attnrmt import cli
from tests.e2e.helpers import tiny_config


def config_file(tmp_path: Path, **sweep: Any) -> str:
    config = tiny_config(run="bounded")
    config["sweeps"]["grid"].update(sweep)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.mark.parametrize(
    ("sweep", "named"),
    [
        ({"d": [1_000_000_000]}, "sweeps.grid.d: a cell at d = 1000000000"),
        ({"d": [20, 30_000]}, "sweeps.grid.d: a cell at d = 30000"),
        ({"T": [100_000_000]}, "sweeps.grid.T: a cell at d = 20, T = 100000000"),
        ({"replicates": 1_000_000_000}, "sweeps.grid: 6,000,000,000 cells"),
        ({"snr": {"start": 0, "stop": 1, "num": 800_000}, "replicates": 20}, "32,000,000 cells"),
        ({"snr": [0.001 * i for i in range(100_000)]}, "bytes; at most 1,048,576"),
        ({"d": [10_000], "replicates": 200_000}, "about 13,891 one-core days"),
    ],
)
def test_a_sweep_beyond_the_limits_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sweep: dict[str, Any], named: str
) -> None:
    path = config_file(tmp_path, **sweep)
    capsys.readouterr()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert cli.main(["validate", path]) == cli.EXIT_USAGE
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 2**20  # KiB: < 1 GiB
    err = capsys.readouterr().err
    assert named in err, err
    assert "--force" in err or "start, stop, num" in err, err


def test_force_plans_a_sweep_beyond_the_memory_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_file(tmp_path, d=[20, 30_000])
    assert cli.main(["validate", path, "--force"]) == cli.EXIT_OK
    assert "valid" in capsys.readouterr().out


def test_the_ceilings_are_the_configs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``execution.max_cells`` / ``max_core_days`` set the limits (defaults in the schema):
    the tiny sweep's 12 cells pass a ceiling of 12 and are refused under one of 11."""
    config = tiny_config(run="bounded")
    path = tmp_path / "c.yaml"
    for ceiling, code in ((12, cli.EXIT_OK), (11, cli.EXIT_USAGE)):
        config["execution"] = {**config.get("execution", {}), "max_cells": ceiling}
        path.write_text(yaml.safe_dump(config))
        assert cli.main(["validate", str(path)]) == code
    assert "execution.max_cells" in capsys.readouterr().err
    config["execution"] = {**config["execution"], "max_cells": 12, "max_core_days": 1e-9}
    path.write_text(yaml.safe_dump(config))
    assert cli.main(["validate", str(path)]) == cli.EXIT_USAGE
    assert "execution.max_core_days" in capsys.readouterr().err


def test_a_sweep_with_replicates_per_d_counts_each_d_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``replicates: {d: count}``: 2 weights x 3 snr x (4 + 1) replicates = 30 cells, not
    the 48 of the largest count at every ``d``; a ceiling of 30 passes, 29 is refused."""
    config = tiny_config(run="bounded")
    config["sweeps"]["grid"].update(d=[20, 24], replicates={20: 4, 24: 1})
    path = tmp_path / "c.yaml"
    for ceiling, code in ((30, cli.EXIT_OK), (29, cli.EXIT_USAGE)):
        config["execution"] = {**config.get("execution", {}), "max_cells": ceiling}
        path.write_text(yaml.safe_dump(config))
        assert cli.main(["validate", str(path)]) == code
    assert "30 cells (2 d x 2 weights x 3 snr x 1-4 replicates)" in capsys.readouterr().err
