"""The shared cell cache end to end (attnrmt.sweep.store.cell_cache; docs/architecture.md,
"Cells shared across runs"): a copy of a config under another run name computes no cell
and stores what the original stored, byte for byte; a damaged cached cell is recomputed,
not read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnrmt.sweep.store.cell_cache import ENVIRONMENT_VARIABLE
from tests.e2e.helpers import Workdir, tiny_config

pytestmark = pytest.mark.e2e

CELLS = 12  # tiny_config: 2 weights x 3 snr x 2 replicates


def store_bytes(workdir: Workdir, sweep: str = "grid") -> dict[str, bytes]:
    """Every file of a sweep's published store (cells.zarr), by path inside it, with the
    identity of the publish itself (its version id, time and random suffix, and the
    ``written`` time; docs/data-contract.md, "cells.zarr") replaced by placeholders: the
    one thing two publishes of the same cells never share."""
    root = workdir.sweep_dir(sweep) / "cells.zarr"
    attributes = json.loads((root / "zarr.json").read_text())["attributes"]
    publish = {
        attributes["table_version_id"].encode(): b"<version>",
        attributes["written"].encode(): b"<written>",
    }

    def anonymous(data: bytes) -> bytes:
        for value, placeholder in publish.items():
            data = data.replace(value, placeholder)
        return data

    return {
        anonymous(str(path.relative_to(root)).encode()).decode(): anonymous(path.read_bytes())
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def cache_entries(cache: Path) -> list[Path]:
    return sorted(path for path in cache.glob("*/*.npz") if not path.name.startswith("."))


def test_copy_under_another_run_name_computes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(cache))
    original = Workdir.create(tmp_path / "original", tiny_config(run="original"))
    first = original.run()
    assert (first.computed, first.reused) == (CELLS, 0)
    assert len(cache_entries(cache)) == CELLS

    copy = Workdir.create(tmp_path / "copy", tiny_config(run="copy"))
    second = copy.run()
    assert (second.computed, second.reused) == (0, CELLS)
    assert store_bytes(copy) == store_bytes(original)

    # a damaged cached cell is recomputed, not read (and its entry written again)
    damaged = cache_entries(cache)[0]
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    again = Workdir.create(tmp_path / "again", tiny_config(run="again"))
    third = again.run()
    assert (third.computed, third.reused) == (1, CELLS - 1)
    assert "damaged cell cache entry" in third.output
    assert len(cache_entries(cache)) == CELLS and damaged.read_bytes() != bytes(data)
    recomputed = store_bytes(again)
    assert recomputed.keys() == store_bytes(original).keys()
