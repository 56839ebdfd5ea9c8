"""The shared cell cache (attnrmt.sweep.store.cell_cache): entries round-trip bit for bit,
the environment overrides the config, eviction removes the least recently used first, a
damaged entry is removed and not read. Synthetic cell results (no simulation)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from attnrmt.sweep.store import cell_cache, fragments
from tests.sweep.conftest import store_plan, synthetic_record


def block_columns(n: int = 3) -> tuple[dict[str, np.ndarray], list[tuple[str, str]]]:
    """Fragment columns of ``n`` synthetic cells and their ids."""
    cells = store_plan().sweeps["grid"].cells[:n]
    ids = [(cell.key, f"[{i}]") for i, cell in enumerate(cells)]
    arrays = fragments.encode_fragment(
        [key for key, _ in ids],
        [seed for _, seed in ids],
        [True] * n,
        [synthetic_record(cell) for cell in cells],
    )
    return arrays, ids


def test_entries_round_trip_bit_for_bit(tmp_path: Path) -> None:
    arrays, ids = block_columns()
    where = {cell_id: (0, row) for row, cell_id in enumerate(ids)}
    assert cell_cache.write_cells(tmp_path, [arrays], where, ids) == 3
    assert cell_cache.write_cells(tmp_path, [arrays], where, ids) == 0  # never rewritten
    sources, found = cell_cache.read_cells(tmp_path, [*ids, ("f" * 64, "[9]")])
    assert list(found) == ids
    taken = fragments.take_cells(sources, [found[cell_id] for cell_id in ids])
    for name, column in arrays.items():
        np.testing.assert_array_equal(taken[name], column, strict=True)


def test_damaged_entry_is_removed_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arrays, ids = block_columns(1)
    cell_cache.write_cells(tmp_path, [arrays], {ids[0]: (0, 0)}, ids)
    path = cell_cache.entry_path(tmp_path, ids[0])
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    assert cell_cache.read_cells(tmp_path, ids) == ([], {})
    assert not path.exists() and "damaged cell cache entry" in capsys.readouterr().err


def test_prune_evicts_least_recently_used(tmp_path: Path) -> None:
    arrays, ids = block_columns(3)
    cell_cache.write_cells(tmp_path, [arrays], {i: (0, r) for r, i in enumerate(ids)}, ids)
    paths = [cell_cache.entry_path(tmp_path, cell_id) for cell_id in ids]
    for age, path in enumerate(paths):  # last used: ids[2] first, ids[0] last
        os.utime(path, ns=(10**18 - age * 10**9, 10**18 - age * 10**9))
    cell_cache.read_cells(tmp_path, [ids[2]])  # a read makes it the most recently used
    sizes = [path.stat().st_size for path in paths]
    removed, freed = cell_cache.prune(tmp_path, sizes[0] + sizes[2])
    assert (removed, freed) == (1, sizes[1])
    assert [path.exists() for path in paths] == [True, False, True]
    assert cell_cache.cache_bytes(tmp_path) == sizes[0] + sizes[2]


def test_environment_overrides_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = {"cell_cache": {"enabled": True, "path": str(tmp_path / "c"), "max_gb": 1}}
    monkeypatch.delenv(cell_cache.ENVIRONMENT_VARIABLE, raising=False)
    assert cell_cache.cache_root(config) == tmp_path / "c"
    assert cell_cache.cache_root({"cell_cache": {**config["cell_cache"], "enabled": False}}) is None
    monkeypatch.setenv(cell_cache.ENVIRONMENT_VARIABLE, "off")
    assert cell_cache.cache_root(config) is None
    monkeypatch.setenv(cell_cache.ENVIRONMENT_VARIABLE, str(tmp_path / "site"))
    assert cell_cache.cache_root(config) == tmp_path / "site"
    assert cell_cache.max_bytes(config) == 10**9
