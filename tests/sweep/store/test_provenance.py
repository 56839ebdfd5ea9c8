"""Provenance per cell in the store (attnrmt.sweep.store.provenance): fragments and the cell
table carry it, old fragments without it still gather, and it never changes a cell's key
or a number."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

from attnrmt.contract import PROVENANCE_ABSENT, PROVENANCE_FIELDS
from attnrmt.sweep.compute import blocks
from attnrmt.sweep.report import provenance as report_provenance
from attnrmt.sweep.store import fragments, provenance
from tests.sweep.conftest import (
    CLEAN_ENVIRONMENT,
    DIRTY_ENVIRONMENT,
    encode_with_provenance,
    environment_json,
    gather_and_open,
    results_only,
    store_plan,
    synthetic_record,
    without_provenance,
)
from tests.sweep.oracles import decode_fragment


def test_fragment_carries_provenance_with_each_environment_stored_once() -> None:
    plan = store_plan()
    cells = list(plan.sweeps["grid"].cells)
    arrays = encode_with_provenance(plan, cells, [CLEAN_ENVIRONMENT, DIRTY_ENVIRONMENT])
    assert len(cells) == 16
    assert arrays[provenance.ENVIRONMENTS_MEMBER].shape == (2,)  # not one string per cell
    assert arrays["environment_id"].dtype == np.int64
    fragment = decode_fragment(arrays)
    for i, record in enumerate(fragment.records):
        assert (
            json.loads(record[provenance.ENVIRONMENT_KEY])
            == [CLEAN_ENVIRONMENT, DIRTY_ENVIRONMENT][i % 2]
        )
        assert record["peak_memory_bytes"] == (100 + i) * 2**20
        assert record["attempt"] == 1 + i % 2
        expected = synthetic_record(cells[i])
        for name, value in expected.items():
            np.testing.assert_array_equal(record[name], value, strict=True)


def test_reencoding_keeps_provenance_and_old_records_stay_unknown() -> None:
    """A block copies reused records into its fragment: provenance travels with them, and
    records from old fragments (none) mixed with new ones get the absent values."""
    plan = store_plan()
    cells = list(plan.sweeps["grid"].cells)[:4]
    old = decode_fragment(without_provenance(encode_with_provenance(plan, cells[:2], None)))
    new = decode_fragment(encode_with_provenance(plan, cells[2:], [DIRTY_ENVIRONMENT]))
    mixed = fragments.encode_fragment(
        old.cell_keys + new.cell_keys,
        old.cell_seeds + new.cell_seeds,
        [False] * 4,
        old.records + new.records,
    )
    assert mixed["environment_id"][:2].tolist() == [PROVENANCE_ABSENT["environment_id"]] * 2
    assert mixed["peak_memory_bytes"][:2].tolist() == [-1, -1]
    assert mixed["attempt"][:2].tolist() == [0, 0]
    assert (
        mixed["environment_id"][2:].tolist()
        == [provenance.environment_id(environment_json(DIRTY_ENVIRONMENT))] * 2
    )
    again = decode_fragment(mixed).records
    assert set(again[0]) == set(synthetic_record(cells[0]))  # unknown stays absent
    assert again[2][provenance.ENVIRONMENT_KEY] == environment_json(DIRTY_ENVIRONMENT)


def test_store_carries_provenance_and_numbers_are_bit_identical(tmp_path: Path) -> None:
    plan = store_plan()
    cells = list(plan.sweeps["grid"].cells)
    with_prov = gather_and_open(
        plan,
        tmp_path / "a" / "grid",
        [encode_with_provenance(plan, cells, [CLEAN_ENVIRONMENT, DIRTY_ENVIRONMENT])],
    )
    plain = gather_and_open(
        plan,
        tmp_path / "b" / "grid",
        [without_provenance(encode_with_provenance(plan, cells, None))],
    )
    # every number and every cell key identical; only provenance differs
    xr.testing.assert_identical(results_only(with_prov), results_only(plain))
    environments = json.loads(with_prov.attrs["environments"])
    ids = with_prov["environment_id"].values.ravel()
    assert {json.loads(environments[str(env)])["host"] for env in ids} == {"node1", "node2"}
    assert (with_prov["attempt"].values >= 1).all()
    assert (with_prov["peak_memory_bytes"].values >= 100 * 2**20).all()
    assert with_prov["peak_memory_bytes"].attrs["units"] == "byte"
    # the store written from old fragments says "unknown", never a made-up value
    for name in PROVENANCE_FIELDS:
        assert (plain[name].values == PROVENANCE_ABSENT[name]).all(), name
    assert json.loads(plain.attrs["environments"]) == {}


def test_old_fragments_and_new_ones_gather_into_one_table(tmp_path: Path) -> None:
    plan = store_plan()
    cells = list(plan.sweeps["grid"].cells)
    half = len(cells) // 2
    old = without_provenance(encode_with_provenance(plan, cells[:half], None))
    mixed = gather_and_open(
        plan,
        tmp_path / "m" / "grid",
        [old, encode_with_provenance(plan, cells[half:], [CLEAN_ENVIRONMENT])],
    )
    reference = gather_and_open(
        plan,
        tmp_path / "r" / "grid",
        [without_provenance(encode_with_provenance(plan, cells, None))],
    )
    xr.testing.assert_identical(results_only(mixed), results_only(reference))
    attempts = mixed["attempt"].values
    assert np.count_nonzero(attempts == 0) == half  # old cells: unknown
    assert np.count_nonzero(attempts >= 1) == len(cells) - half
    summary = report_provenance.run_provenance(tmp_path / "m")
    assert summary["cells"] == len(cells)
    assert summary["commits"] == {"aaaaaaaaaaaa": len(cells) - half, "unknown": half}


def test_cell_keys_do_not_depend_on_provenance(tmp_path: Path) -> None:
    """Reuse matches ``(cell_key, cell_seed)``: a cell with provenance is found under the
    same id as without, and the table's keys are the plan's."""
    plan = store_plan()
    cells = list(plan.sweeps["grid"].cells)
    sweep = tmp_path / "grid"
    fragments.write_fragment(
        sweep / "fragments" / "new.npz", encode_with_provenance(plan, cells, [CLEAN_ENVIRONMENT])
    )
    fragments.write_fragment(
        sweep / "cache" / "old.npz", without_provenance(encode_with_provenance(plan, cells, None))
    )
    ids_new = fragments.read_fragment_cell_ids(sweep / "fragments" / "new.npz")
    ids_old = fragments.read_fragment_cell_ids(sweep / "cache" / "old.npz")
    assert ids_new == ids_old
    assert [key for key, _ in ids_new] == [cell.key for cell in cells]
    assert [
        blocks.BlockCell.from_params(p).cell_id
        for p in plan.sweeps["grid"].cells.block_params(plan.seed)
    ] == ids_new
