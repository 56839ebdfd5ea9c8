"""Read-only access to a cell table of format 2, so results made before format 3 open as
they are until the next gather upgrades them (``docs/data-contract.md``, "cells.zarr").

Format 2: ``<sweep>/cell_table/manifest.json`` (the current version: segments and a grid
version), ``segments/<id>/`` Zarr v3 groups of rows (``cell_key`` ``(n, 32)`` uint8,
scalars, top-k fields ``(n, k)``, ragged fields as ``<name>__values`` / ``__start`` /
``__length``), ``grids/<id>/`` the grid index ``row`` of each version, and a copy of the
manifest in ``<sweep>/cells.zarr/manifest.json`` (the version the pipeline gathered).
:func:`open_legacy` builds the same lazy dense view as the format-3 reader
(:func:`attnrmt.sweep.store.cell_table.reader.dense_view`), reading O(1) chunks per
segment for each setting.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from attnrmt.contract import PROVENANCE_ABSENT, PROVENANCE_FIELDS
from attnrmt.sweep.store.cell_table.layout import (
    LEGACY_MANIFEST_NAME,
    LEGACY_TABLE_DIRNAME,
    ROW_ARRAY,
)

__all__ = ["open_legacy", "read_manifest", "resolve"]

#: ``format_version`` of a format-2 manifest.
FORMAT_2 = 2


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The format-2 manifest at ``path``, or None if absent or of another format."""
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return manifest if manifest.get("format_version") == FORMAT_2 else None


def resolve(path: Path) -> tuple[Path, dict[str, Any]] | None:
    """(``cell_table/`` directory, manifest) of a sweep directory or its ``cells.zarr``.

    A ``cells.zarr`` pointer opens the version it names while that version is kept; a
    sweep directory opens ``cell_table/manifest.json``, the newest complete version.
    None when there is no format-2 table.
    """
    pointer = read_manifest(path / LEGACY_MANIFEST_NAME) if path.name == "cells.zarr" else None
    directory = (path.parent if path.name == "cells.zarr" else path) / LEGACY_TABLE_DIRNAME
    if pointer is not None and (directory / pointer["grid"]).is_dir():
        return directory, pointer
    manifest = read_manifest(directory / LEGACY_MANIFEST_NAME)
    return None if manifest is None else (directory, manifest)


@functools.lru_cache(maxsize=512)
def _array(segment_path: str, name: str) -> Any:
    """An open Zarr array of a segment (cached per process; segments are immutable)."""
    import zarr

    return zarr.open_array(str(Path(segment_path) / name), mode="r")


@functools.lru_cache(maxsize=512)
def _has_array(segment_path: str, name: str) -> bool:
    return (Path(segment_path) / name / "zarr.json").is_file()


def take_rows(
    segments: Sequence[str],
    offsets: np.ndarray,
    rows: np.ndarray,
    field: str,
    kind: str,
    width: int,
) -> np.ndarray:
    """Values of ``field`` for global ``rows`` of a format-2 table, in the order of
    ``rows`` (kinds as :func:`attnrmt.sweep.store.cell_table.reader.take_rows`). Reads the
    chunks holding the rows, segment by segment. O(n x width)."""
    from attnrmt.sweep.store.cell_table.reader import contiguous_runs

    segment_of = np.searchsorted(offsets, rows, side="right") - 1
    out: Any = (
        np.empty(rows.size, dtype=object)
        if kind == "key"
        else None
        if kind == "scalar"
        else np.full((rows.size, width), np.nan)
    )
    for segment in np.unique(segment_of).tolist():
        where = np.flatnonzero(segment_of == segment)
        local = rows[where] - offsets[segment]
        path = segments[segment]
        if kind == "ragged":
            starts = _array(path, f"{field}__start").oindex[local]
            lengths = _array(path, f"{field}__length").oindex[local]
            values = _array(path, f"{field}__values")
            for lo, hi, members in contiguous_runs(starts, starts + lengths, values.chunks[0]):
                chunk = values[lo:hi]
                for member in members.tolist():
                    length = min(int(lengths[member]), width)
                    begin = int(starts[member]) - lo
                    out[where[member], :length] = chunk[begin : begin + length]
            continue
        if field in PROVENANCE_FIELDS and not _has_array(path, field):
            values = np.full(local.size, PROVENANCE_ABSENT[field], dtype=np.int64)
        else:
            array = _array(path, "cell_key" if kind == "key" else field)
            values = array.oindex[local] if array.ndim == 1 else array.oindex[local, :]
        if kind == "key":
            out[where] = [bytes(row).hex() for row in np.asarray(values, dtype=np.uint8)]
        elif kind == "scalar":
            if out is None:
                out = np.empty(rows.size, dtype=values.dtype)
            out[where] = values
        else:
            out[where, : min(width, values.shape[1])] = values[:, :width]
    return np.empty(0) if out is None else cast(np.ndarray, out)


def fill_block(
    rows_block: np.ndarray,
    segments: tuple[str, ...],
    offsets: np.ndarray,
    field: str,
    kind: str,
    width: int,
    dtype: Any,
    fill: Any,
) -> np.ndarray:
    """Dense block of ``field`` for a block of the grid index (``-1``: absent -> ``fill``)."""
    tail = () if kind in ("scalar", "key") else (width,)
    out = np.full((*rows_block.shape, *tail), fill, dtype=dtype)
    flat_rows = rows_block.reshape(-1)
    present = np.flatnonzero(flat_rows >= 0)
    if present.size:
        out.reshape(-1, *tail)[present] = take_rows(
            segments, offsets, flat_rows[present], field, kind, width
        )
    return out


def open_legacy(directory: Path, manifest: Mapping[str, Any]) -> Any:
    """The lazy dense ``cells`` dataset of one version (``manifest``) of a format-2 table."""
    import zarr

    from attnrmt.sweep.store.cell_table.reader import dense_view

    grid = zarr.open_group(str(directory / manifest["grid"]), mode="r")
    attrs: dict[str, Any] = dict(grid.attrs)
    rows = np.asarray(cast(Any, grid[ROW_ARRAY])[:])
    segments = tuple(
        str(directory / "segments" / segment["name"]) for segment in manifest["segments"]
    )
    offsets = np.concatenate([[0], np.cumsum([s["rows"] for s in manifest["segments"]])])
    environments: dict[str, str] = {}
    for path in segments:
        segment_attrs = zarr.open_group(path, mode="r").attrs
        environments.update(cast(Any, segment_attrs.get("environments", {})))
    return dense_view(
        attrs,
        rows,
        fill_block,
        (segments, offsets),
        {
            "store_format_version": FORMAT_2,
            "environments": json.dumps(environments, sort_keys=True),
            "spectrum_storage": (
                "eigenvalues stored ragged per cell (any length: full or top spectra, any "
                "d); NaN-padded to the longest stored spectrum only in this view"
            ),
        },
    )
