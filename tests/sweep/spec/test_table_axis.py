"""The sweep axis ``table`` (docs/data-contract.md, "Table laws"): a name or a list of
table laws, each validated with key path and suggestion; the plan's gaussian cells are
those of the sweep without ``table`` (keys, seeds, blocks, kwargs) and every other law's
cells those of a one-law sweep; the cell table's dense view and ``theory.zarr`` have a
``table`` dimension after ``weights``, ``theory.zarr`` Gaussian for a law with finite
fourth moment, NaN with its reason in ``no_theory`` for one without.

Shown to bite (scratch edits, restored): dropping the table axis from the line of a cell
(``_line_point`` returning ``table=None``) gave every law the Gaussian keys and
``test_gaussian_half_has_the_keys_of_the_sweep_without_table`` failed on the rademacher
keys; writing every law's predictions unmasked (``.where(has_theory)`` removed) failed
``test_theory_per_law_and_no_theory_per_law`` on t3's finite ``sample_outlier``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from attnrmt.sweep import store
from attnrmt.sweep.spec.config import ConfigError, load_valid_config
from attnrmt.sweep.spec.plan import plan_run
from tests.sweep.conftest import store_config, synthetic_record, write_block_fragments
from tests.sweep.oracles import cells_dataset
from tests.sweep.store.cell_table.conftest import assert_bit_identical

T3 = {"t3": {"kind": "student_t", "nu": 3.0}}
AXES_WITH_TABLE = ("d", "delta", "gamma", "T", "positional", "weights", "table", "snr", "centered")


def _plan(table: Any = None, table_models: dict | None = None) -> Any:
    """The run plan of the store variant of the tiny config, with ``table`` when given."""
    config = store_config(**({} if table is None else {"table": table}))
    if table_models is not None:
        config["table_models"] = table_models
    valid = load_valid_config(config)
    return plan_run(valid.config, valid.sweeps)


def _error(table: Any, table_models: dict | None = None) -> ConfigError:
    config = store_config(table=table)
    config["table_models"] = {**T3, **(table_models or {})}
    with pytest.raises(ConfigError) as raised:
        load_valid_config(config)
    return raised.value


def _cells_by_law(sweep: Any) -> dict[str, list[Any]]:
    laws: dict[str, list[Any]] = {}
    for cell in sweep.cells:
        laws.setdefault(cell.table, []).append(cell)
    return laws


# --------------------------------------------------------------------------- validation


def test_every_misspelt_law_of_a_list_is_named_with_its_index_and_a_suggestion() -> None:
    error = _error(["gaussian", "t33", "radmacher"])
    assert error.problems == (
        "sweeps.grid.table[1]='t33': no table law named 't33' (did you mean 't3'?) "
        "(known: gaussian, rademacher, uniform, t3)",
        "sweeps.grid.table[2]='radmacher': no table law named 'radmacher' "
        "(did you mean 'rademacher'?) (known: gaussian, rademacher, uniform, t3)",
    )
    # a single name keeps the key path it always had
    assert str(_error("unifrom")).startswith("sweeps.grid.table='unifrom': no table law")


def test_a_repeated_law_and_a_bad_entry_are_refused() -> None:
    message = str(_error(["gaussian", "t3", "gaussian"]))
    assert "sweeps.grid.table[2]='gaussian': duplicate of sweeps.grid.table[0]" in message
    message = str(_error(["gaussian", "bad"], {"bad": {"kind": "student_t", "nu": 2}}))
    assert "table_models.bad.nu=2" in message and "must be > 2" in message
    assert str(_error([])) == "sweeps.grid.table=[]: must have at least 1 entry"  # the schema


# --------------------------------------------------------------------------- plan


def test_gaussian_half_has_the_keys_of_the_sweep_without_table() -> None:
    plain = _plan().sweeps["grid"]
    signs = _plan("rademacher").sweeps["grid"]
    both = _plan(["gaussian", "rademacher"]).sweeps["grid"]
    laws = _cells_by_law(both)
    assert list(laws) == ["gaussian", "rademacher"] and both.table == ("gaussian", "rademacher")
    assert [c.key for c in laws["gaussian"]] == plain.cell_keys()  # same keys, same order
    assert [c.key for c in laws["rademacher"]] == signs.cell_keys()
    assert both.n_cells == 2 * plain.n_cells
    # seeds: of the cell's own key, as in a one-law sweep (no law shares another's seed)
    seeds = {law: [c.seed_words(5) for c in cells] for law, cells in laws.items()}
    assert seeds["gaussian"] == [c.seed_words(5) for c in plain.cells]
    assert seeds["rademacher"] == [c.seed_words(5) for c in signs.cells]
    # blocks: each law's lines are the one-law sweep's, with the same keys and params
    blocks = {block.key: block for block in both.blocks}
    assert set(blocks) == {b.key for b in plain.blocks} | {b.key for b in signs.blocks}
    for block in (*plain.blocks, *signs.blocks):
        assert blocks[block.key].cells.block_params(5) == block.cells.block_params(5)
    assert "table" not in plain.blocks[0].cells.block_params(5)[0]["kwargs"]
    assert signs.blocks[0].cells.block_params(5)[0]["kwargs"]["table"] == {"kind": "rademacher"}
    # the axis, after weights; the models; the sweep without table has none of them
    assert tuple(both.axes) == AXES_WITH_TABLE and both.axes["table"] == ["gaussian", "rademacher"]
    assert both.models["table"] == {
        "gaussian": {"kind": "gaussian"},
        "rademacher": {"kind": "rademacher"},
    }
    assert "table" not in plain.axes and "table" not in plain.models and plain.table is None
    assert laws["rademacher"][0].coords["table"] == "rademacher"
    assert "table" not in plain.cells[0].coords


def test_one_law_keeps_its_config_hash_and_several_laws_hash_their_order() -> None:
    """A one-law sweep hashes as it did before the axis (its ``table`` payload); the order
    of several laws is the grid's order, so it enters the hash."""
    one = _plan("rademacher").sweeps["grid"]
    ab = _plan(["gaussian", "rademacher"]).sweeps["grid"]
    ba = _plan(["rademacher", "gaussian"]).sweeps["grid"]
    assert one.config_sha256 == _plan(["rademacher"]).sweeps["grid"].config_sha256
    assert len({one.config_sha256, ab.config_sha256, ba.config_sha256}) == 3
    assert sorted(ab.cell_keys()) == sorted(ba.cell_keys())


# --------------------------------------------------------------------------- stores


@pytest.fixture(scope="module")
def laws_plan() -> Any:
    return _plan(["gaussian", "rademacher", "t3"], T3)


def _reference(plan: Any) -> xr.Dataset:
    sweep = plan.sweeps["grid"]
    records = {cell.key: synthetic_record(cell) for cell in sweep.cells}
    return cells_dataset(sweep, records, plan.seed)


def test_dense_view_has_the_table_dimension_with_each_laws_cells(
    laws_plan: Any, tmp_path: Path
) -> None:
    sweep_dir = tmp_path / "grid"
    paths = write_block_fragments(laws_plan, sweep_dir)
    store.gather_cells(laws_plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", laws_plan.seed)
    view = store.open_cells(sweep_dir)
    assert tuple(view["top_eigenvalues"].dims) == (*AXES_WITH_TABLE, "replicate", "k")
    assert tuple(view["alpha"].dims) == AXES_WITH_TABLE
    assert view["table"].values.tolist() == ["gaussian", "rademacher", "t3"]
    assert not {"table_name", "table_law"} & set(view.attrs)
    assert_bit_identical(view, _reference(laws_plan))
    # the gaussian slice is the sweep without table: its keys at its grid points
    plain = _reference(_plan())
    gaussian = view.sel(table="gaussian").load()
    xr.testing.assert_equal(gaussian["cell_key"].drop_vars("table"), plain["cell_key"])
    xr.testing.assert_equal(
        gaussian["top_eigenvalues"].drop_vars("table"), plain["top_eigenvalues"]
    )
    # every cell stored once, at its law
    laws = _cells_by_law(laws_plan.sweeps["grid"])
    for law, cells in laws.items():
        stored = set(view["cell_key"].sel(table=law).values.ravel().tolist())
        assert stored == {cell.key for cell in cells}, law
    # the cell table names the axis among each column's coordinates
    table = xr.open_zarr(sweep_dir / "cell_table.zarr")
    assert "table" in table.coords and "table" in table["alpha"].encoding["coordinates"]
    assert sorted(set(table["table"].values.tolist())) == ["gaussian", "rademacher", "t3"]


def test_adding_the_table_axis_to_a_stored_sweep_keeps_its_cells(tmp_path: Path) -> None:
    """A sweep stored without ``table`` and then run with ``table: [gaussian, rademacher]``:
    its gaussian cells are the stored ones (same keys, same fragments), the rademacher
    cells new, and the view is the reference (the cell table's rows placed anew)."""
    sweep_dir = tmp_path / "grid"
    before = _plan()
    paths = write_block_fragments(before, sweep_dir)
    store.gather_cells(before.sweeps["grid"], paths, sweep_dir / "cells.zarr", before.seed)
    after = _plan(["gaussian", "rademacher"])
    reused = {path.name for path in paths}
    paths = write_block_fragments(after, sweep_dir)
    assert reused < {path.name for path in paths}  # the gaussian blocks' files, reused
    store.gather_cells(after.sweeps["grid"], paths, sweep_dir / "cells.zarr", after.seed)
    assert_bit_identical(store.open_cells(sweep_dir), _reference(after))


def test_theory_per_law_and_no_theory_per_law(laws_plan: Any, tmp_path: Path) -> None:
    path = store.write_theory(laws_plan.sweeps["grid"], tmp_path / "theory.zarr", laws_plan.seed)
    theory = xr.open_zarr(path).load()
    plain = xr.open_zarr(
        store.write_theory(_plan().sweeps["grid"], tmp_path / "plain.zarr", 5)
    ).load()
    assert tuple(theory["sample_outlier"].dims) == (*AXES_WITH_TABLE, "variant")
    assert tuple(theory["alpha"].dims) == ("T", "positional", "weights")  # no law in it
    reasons = dict(
        zip(theory["table"].values.tolist(), theory["no_theory"].values.tolist(), strict=True)
    )
    assert reasons["gaussian"] == reasons["rademacher"] == ""
    assert "infinite fourth moment" in reasons["t3"]
    assert theory["no_theory"].attrs["long_name"] == "why no theory"
    assert "no_theory" not in theory.attrs and "no_theory" not in plain
    for name in ("sample_outlier", "pop_top_eigenvalue", "bulk_upper_edge", "threshold_snr_sample"):
        for law in ("gaussian", "rademacher"):  # finite E z^4: the Gaussian predictions
            np.testing.assert_array_equal(
                theory[name].sel(table=law).values, plain[name].values, err_msg=name
            )
        assert theory[name].sel(table="t3").isnull().all(), name


def test_end_summary_counts_threshold_curves_per_law() -> None:
    """The end summary's threshold lines (attnrmt.sweep.report.summary): one per law of a
    table sweep (``sweep/law``), one per sweep without the axis, as before."""
    import pandas as pd

    from attnrmt.sweep.report.summary import threshold_lines

    def rows(sweep: str, table: Any, consistent: list[bool]) -> list[dict[str, Any]]:
        return [
            {"sweep": sweep, "transition": "sample", "finite_size": "none", "table": table,
             "consistent_paper": False, "consistent_finite_vocab": ok, "bound": "lower",
             "estimate": np.nan, "d": 100 * (i + 1)}
            for i, ok in enumerate(consistent)
        ]  # fmt: skip

    frame = pd.DataFrame(
        rows("laws", "gaussian", [True, True])
        + rows("laws", "t3", [False, True])
        + rows("plain", np.nan, [True, False])
    )
    names = [line.split()[0] for line in threshold_lines(frame)]
    assert names == ["laws/gaussian", "laws/t3", "plain"]
    counts = [line.split("finite_vocab ")[1].split()[0] for line in threshold_lines(frame)]
    assert counts == ["2/2", "1/2", "1/2"]
    assert [line.split()[0] for line in threshold_lines(frame.drop(columns="table"))] == [
        "laws",
        "plain",
    ]
