"""Every stored byte verifiable (attnrmt.sweep.store.integrity; docs/data-contract.md,
"Integrity"): each fault of issue 34's table on a gathered sweep (synthetic cells written
by the real fragment writer) is named by ``open_results`` or the full check, and one
heal (what ``attnrmt run`` does before Snakemake) plus the rule that rebuilds it ends
bit-identical to a clean store.

Shown to bite (scratch edits, each restored): without the ``crc32c`` codec 3 tests fail
(a flipped chunk is read without a checksum error); without the quick check in
``open_results`` 3 fail (a deleted chunk reads as NaN, a deleted ``zarr.json`` opens as a
tree without the sweep's cells).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from attnrmt.sweep import store
from attnrmt.sweep.store import fragments, integrity
from attnrmt.sweep.store.theory import write_theory
from tests.sweep.conftest import store_plan, write_block_fragments
from tests.sweep.store.cell_table.conftest import assert_bit_identical, reference


def flip(path: Path, offset: int = 12) -> None:
    """Flip 4 bytes of ``path`` in place (same size, same inode)."""
    data = bytearray(path.read_bytes())
    for index in range(offset, min(offset + 4, len(data))):
        data[index] ^= 0xFF
    path.write_bytes(bytes(data))


def chunk_of(store_dir: Path, variable: str) -> Path:
    """The first chunk file of ``variable`` (a column of the table or a store's array)."""
    return sorted(path for path in (store_dir / variable / "c").rglob("*") if path.is_file())[0]


@pytest.fixture
def run(tmp_path: Path) -> tuple[Any, Path]:
    """A run folder with one gathered sweep ``grid`` and its theory.zarr."""
    plan = store_plan()
    sweep_dir = tmp_path / "run" / "grid"
    paths = write_block_fragments(plan, sweep_dir)
    store.gather_cells(plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", plan.seed)
    write_theory(plan.sweeps["grid"], sweep_dir / "theory.zarr", plan.seed)
    return plan, sweep_dir


def regather(plan: Any, sweep_dir: Path) -> None:
    """The rules a rerun runs for what the heal removed: gather (from the fragments on
    disk), theory."""
    paths = fragments.fragment_paths(sweep_dir)
    if not (sweep_dir / "cells.zarr").exists():
        store.gather_cells(plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", plan.seed)
    if not (sweep_dir / "theory.zarr").exists():
        write_theory(plan.sweeps["grid"], sweep_dir / "theory.zarr", plan.seed)


def heal_and_check(plan: Any, sweep_dir: Path, damaged: str) -> None:
    """One heal names ``damaged``, the rebuild is bit-identical and verifies clean."""
    theory = xr.open_zarr(sweep_dir / "theory.zarr").load() if damaged != "theory.zarr" else None
    lines = integrity.heal_run(sweep_dir.parent, ["grid"])
    assert len(lines) == 1 and f"grid/{damaged} damaged" in lines[0], lines
    regather(plan, sweep_dir)
    assert integrity.sweep_damage(sweep_dir, full=True) == {}
    assert integrity.heal_run(sweep_dir.parent, ["grid"]) == []
    assert_bit_identical(store.open_cells(sweep_dir), reference(plan))
    if theory is not None:
        xr.testing.assert_identical(xr.open_zarr(sweep_dir / "theory.zarr").load(), theory)


def test_a_clean_run_verifies_and_every_array_carries_the_crc32c_codec(
    run: tuple[Any, Path],
) -> None:
    _, sweep_dir = run
    assert integrity.sweep_damage(sweep_dir, full=True) == {}
    for name in ("cell_table.zarr", "cells.zarr", "theory.zarr"):
        documents = [json.loads(p.read_text()) for p in (sweep_dir / name).rglob("zarr.json")]
        arrays = [doc for doc in documents if doc["node_type"] == "array"]
        assert arrays
        for array in arrays:
            assert {"name": "crc32c"} in array["codecs"], array


@pytest.mark.parametrize("where", ["cells.zarr", "cell_table.zarr"])
def test_a_flipped_cell_chunk_fails_its_read_and_one_heal_rebuilds_it(
    run: tuple[Any, Path], where: str
) -> None:
    """4 bytes of a top_eigenvalues chunk flipped (in the snapshot or the table: the same
    hard-linked file): reading it fails (the codec), the full check names it, the heal
    removes table and snapshot and the gather rebuilds both from the fragments."""
    plan, sweep_dir = run
    flip(chunk_of(sweep_dir / where, "top_eigenvalues"))
    with pytest.raises(ValueError, match="checksum"):
        store.open_cells(sweep_dir).top_eigenvalues.load()
    assert "top_eigenvalues" in str(integrity.sweep_damage(sweep_dir, full=True))
    heal_and_check(plan, sweep_dir, "cells.zarr")


@pytest.mark.parametrize(
    "fault", ["chunk deleted", "chunk truncated", "zarr.json deleted", "grid chunk flipped"]
)
def test_damaged_cells_are_named_by_open_results_and_healed(
    run: tuple[Any, Path], fault: str
) -> None:
    plan, sweep_dir = run
    table, snapshot = sweep_dir / "cell_table.zarr", sweep_dir / "cells.zarr"
    if fault == "chunk deleted":
        chunk_of(snapshot, "eigenvalues").unlink()
    elif fault == "chunk truncated":
        path = chunk_of(table, "top_eigenvalues")
        path.write_bytes(path.read_bytes()[:-3])
    elif fault == "zarr.json deleted":
        (table / "zarr.json").unlink()
        (snapshot / "zarr.json").unlink()
    else:
        grid = next(path for path in (table / "grid").rglob("*") if path.parent.name == "c")
        flip(grid)
    full = integrity.sweep_damage(sweep_dir, full=True)
    assert list(full) == ["cells.zarr"]
    if fault != "grid chunk flipped":  # the quick check sees sizes and metadata
        with pytest.raises(integrity.DamagedStore, match="attnrmt run") as raised:
            store.open_results(sweep_dir.parent)
        assert str(sweep_dir) in str(raised.value)
    heal_and_check(plan, sweep_dir, "cells.zarr")


def test_a_flipped_theory_chunk_is_recomputed(run: tuple[Any, Path]) -> None:
    plan, sweep_dir = run
    clean = xr.open_zarr(sweep_dir / "theory.zarr").load()
    flip(chunk_of(sweep_dir / "theory.zarr", "sample_outlier"))
    assert list(integrity.sweep_damage(sweep_dir, full=True)) == ["theory.zarr"]
    heal_and_check(plan, sweep_dir, "theory.zarr")
    xr.testing.assert_identical(xr.open_zarr(sweep_dir / "theory.zarr").load(), clean)


def test_a_store_without_its_record_is_rebuilt(run: tuple[Any, Path]) -> None:
    """A store whose writer died before its record (or written before records existed)
    is unverified: the heal rebuilds it."""
    plan, sweep_dir = run
    integrity.digest_path(sweep_dir / "theory.zarr").unlink()
    heal_and_check(plan, sweep_dir, "theory.zarr")


def test_a_changed_product_is_named_and_removed_for_its_rule(run: tuple[Any, Path]) -> None:
    """A CSV in the run's products record with one byte changed: the heal names it and
    removes it (Snakemake rewrites a missing output); untouched products stay."""
    _, sweep_dir = run
    run_dir = sweep_dir.parent
    tables = [run_dir / "thresholds.csv", run_dir / "pooling.csv"]
    for table in tables:
        table.write_text("a,b\n1,2\n")
    integrity.record_products(run_dir, tables)
    assert integrity.products_damage(run_dir) == []
    tables[0].write_text("a,b\n1,3\n")
    lines = integrity.heal_run(run_dir, ["grid"])
    assert lines == [
        f"attnrmt run: damaged product {tables[0]}: checksum differs from the record: "
        "rewritten by this run"
    ]
    assert not tables[0].exists() and tables[1].exists()


def test_the_snapshot_stays_a_hard_link_of_the_table(run: tuple[Any, Path]) -> None:
    """The record does not copy anything: the snapshot's chunk is the table's file."""
    _, sweep_dir = run
    snap = chunk_of(sweep_dir / "cells.zarr", "top_eigenvalues")
    table = sweep_dir / "cell_table.zarr" / snap.relative_to(sweep_dir / "cells.zarr")
    assert snap.stat().st_ino == table.stat().st_ino
    shutil.rmtree(sweep_dir / "theory.zarr")
    assert list(integrity.sweep_damage(sweep_dir)) == ["theory.zarr"]  # missing: named
    assert np.isfinite(store.open_cells(sweep_dir).top_eigenvalues.values).any()


def test_stores_of_another_config_are_removed_for_rebuild_and_the_table_grows(
    run: tuple[Any, Path],
) -> None:
    """Without Snakemake's metadata: the stores say which config of the sweep they hold
    (``config_sha256``); a plan with one more snr value finds the snapshot and theory of
    the old one, removes them (the cell table stays), and the rebuild holds the plan's
    cells bit-identically."""
    _, sweep_dir = run
    grown = store_plan(snr=[0.0, 1.0, 2.0])
    sha = grown.sweeps["grid"].config_sha256
    lines = integrity.outdated_run(sweep_dir.parent, {"grid": sha})
    assert [line.split(" holds")[0] for line in lines] == [
        "attnrmt run: grid/cells.zarr",
        "attnrmt run: grid/theory.zarr",
    ]
    assert (sweep_dir / "cell_table.zarr").is_dir()
    write_block_fragments(grown, sweep_dir)
    regather(grown, sweep_dir)
    assert_bit_identical(store.open_cells(sweep_dir), reference(grown))
    assert integrity.outdated_run(sweep_dir.parent, {"grid": sha}) == []
    assert integrity.sweep_damage(sweep_dir, full=True) == {}


def test_attnrmt_verify_checks_every_byte(
    run: tuple[Any, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``attnrmt verify`` (the full check): a same-size flip in a data chunk, which the
    quick check of ``open_results`` does not read, is named with the healing command."""
    from attnrmt import cli

    _, sweep_dir = run
    assert cli.main(["verify", str(sweep_dir.parent)]) == cli.EXIT_OK
    chunk = chunk_of(sweep_dir / "cells.zarr", "eigenvalues")
    flip(chunk)
    assert integrity.sweep_damage(sweep_dir) == {}  # quick: sizes and metadata only
    capsys.readouterr()
    assert cli.main(["verify", str(sweep_dir.parent)]) == cli.EXIT_REFUSED
    out = capsys.readouterr().out
    assert f"grid/cells.zarr: DAMAGED: {chunk}: checksum" in out and "attnrmt run" in out


def test_an_analysis_of_other_settings_is_removed_for_rebuild(run: tuple[Any, Path]) -> None:
    """``analysis.zarr`` keeps the digest of the analysis settings it was made with; other
    settings (here another bootstrap count) remove it before the rerun, the same keep it."""
    from attnrmt.analysis.pipeline import settings_sha256

    plan, sweep_dir = run
    sha = plan.sweeps["grid"].config_sha256
    attrs = {"config_sha256": sha, "analysis_settings_sha256": settings_sha256({})}
    store.write_zarr_atomically(xr.Dataset(attrs=attrs), sweep_dir / "analysis.zarr")
    assert integrity.outdated_run(sweep_dir.parent, {"grid": sha}, settings_sha256({})) == []
    lines = integrity.outdated_run(
        sweep_dir.parent, {"grid": sha}, settings_sha256({"bootstrap": 7})
    )
    assert len(lines) == 1 and "grid/analysis.zarr holds another analysis settings" in lines[0]
    assert not (sweep_dir / "analysis.zarr").exists()
    assert (sweep_dir / "cells.zarr").exists() and (sweep_dir / "theory.zarr").exists()
