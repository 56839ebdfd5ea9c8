"""A table sweep end to end (docs/data-contract.md, "Table laws"): the tiny config's sweep
beside a copy with ``table: [gaussian, rademacher, t3]``, through Snakemake (the whole
pipeline: stores, analysis, tables, report) to the stores, ``open_results`` and
``universality.csv``. The sweep without ``table`` stores exactly what it stored before
the key existed (same keys, no dimension, no attribute); the table sweep has a ``table``
dimension whose gaussian cells are the plain sweep's; a law without theory has NaN
predictions with its reason in ``no_theory``; the universality table compares each law
with its own sweep's gaussian cells."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnrmt.sweep.spec.config import load_valid_config
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.sweep.store import open_results
from tests.e2e.helpers import Workdir, tiny_config

pytestmark = pytest.mark.e2e

LAWS = ["gaussian", "rademacher", "t3"]


def _config() -> dict:
    config = tiny_config(run="tables", table_models={"t3": {"kind": "student_t", "nu": 3.0}})
    config["sweeps"]["laws"] = {**config["sweeps"]["grid"], "table": LAWS}
    return config


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory):
    """The results of :func:`_config` through Snakemake (the whole pipeline)."""
    workdir = Workdir.create(tmp_path_factory.mktemp("tables"), _config())
    try:
        workdir.run(targets=())
    finally:
        workdir.close()
    return workdir.run_dir


@pytest.fixture(scope="module")
def tree(run_dir):
    return open_results(run_dir)


def test_sweep_without_table_is_unchanged(tree) -> None:
    cells = tree["grid/cells"].to_dataset()
    theory = tree["grid/theory"].to_dataset()
    assert "table" not in cells.coords and "table" not in theory.coords
    assert "no_theory" not in theory and "table" not in tree["grid/analysis"].dims
    assert not {"table_name", "table_law", "no_theory"} & (set(cells.attrs) | set(theory.attrs))
    # the keys it stores are those of the config without any table sweep
    alone = tiny_config(run="tables")
    valid = load_valid_config(alone)
    expected = plan_run(valid.config, valid.sweeps).sweeps["grid"].cell_keys()
    stored = cells["cell_key"].values.ravel().tolist()
    assert sorted(stored) == sorted(expected)
    assert cells.attrs["config_sha256"] == plan_run(valid.config).sweeps["grid"].config_sha256


def test_the_table_dimension_holds_each_laws_cells(tree) -> None:
    laws = tree["laws/cells"].to_dataset()
    grid = tree["grid/cells"].to_dataset()
    assert laws["table"].values.tolist() == LAWS
    assert laws["top_eigenvalues"].dims.index("table") == 6  # after weights
    assert {k: v for k, v in laws.sizes.items() if k != "table"} == dict(grid.sizes)
    gaussian = laws.sel(table="gaussian", drop=True)
    # the gaussian cells are the plain sweep's: same keys and numbers at every point
    np.testing.assert_array_equal(gaussian["cell_key"].values, grid["cell_key"].values)
    np.testing.assert_array_equal(
        gaussian["top_eigenvalues"].values, grid["top_eigenvalues"].values
    )
    signs = laws.sel(table="rademacher", drop=True)
    assert not set(signs["cell_key"].values.ravel()) & set(grid["cell_key"].values.ravel())
    # different cells (other table entries), same realised sizes
    assert not np.allclose(signs["top_eigenvalues"].values, grid["top_eigenvalues"].values)
    np.testing.assert_array_equal(signs["V"].values, grid["V"].values)
    assert np.isfinite(laws["top_eigenvalues"].sel(table="t3").values).all()  # computed


def test_theory_per_law_with_no_theory_per_law(tree) -> None:
    theory = tree["laws/theory"].to_dataset()
    gaussian = tree["grid/theory"].to_dataset()
    reasons = dict(zip(LAWS, theory["no_theory"].values.tolist(), strict=True))
    assert reasons["gaussian"] == reasons["rademacher"] == ""
    assert "infinite fourth moment" in reasons["t3"]
    for name in ("sample_outlier", "pop_top_eigenvalue", "bulk_upper_edge", "threshold_snr_sample"):
        for law in ("gaussian", "rademacher"):  # finite fourth moment: universality
            np.testing.assert_array_equal(
                theory[name].sel(table=law).values, gaussian[name].values, err_msg=name
            )
        assert theory[name].sel(table="t3").isnull().all(), name


def test_the_analysis_compares_each_law_along_the_dimension(run_dir, tree) -> None:
    """The analysis groups by the axis (analysis.zarr, comparison.csv) and the universality
    table pairs each law with its sweep's gaussian cells (the verdicts themselves:
    tests/analysis/test_universality.py and the universality study)."""
    from attnrmt.analysis.pipeline import open_store
    from attnrmt.analysis.universality import sweep_laws

    assert "table" in tree["laws/analysis"]["bulk_ks"].dims
    laws = sweep_laws(open_store(run_dir / "laws" / "cells.zarr").attrs)
    assert laws == {
        "gaussian": {"kind": "gaussian"},
        "rademacher": {"kind": "rademacher"},
        "t3": {"kind": "student_t", "nu": 3.0},
    }
    assert sweep_laws(open_store(run_dir / "grid" / "cells.zarr").attrs) == {
        "gaussian": {"kind": "gaussian"}
    }
    comparison = pd.read_csv(run_dir / "comparison.csv")
    assert set(comparison.loc[comparison["sweep"] == "laws", "table"]) == set(LAWS)
    assert comparison.loc[comparison["sweep"] == "grid", "table"].isna().all()
    universality = pd.read_csv(run_dir / "universality.csv")
    assert set(universality["law"]) == {"rademacher", "t3"}
    assert set(universality["sweep"]) == {"laws"}
    verdict = pd.read_csv(run_dir / "universality_verdict.csv")
    assert verdict["law"].tolist() == ["rademacher", "t3"]
