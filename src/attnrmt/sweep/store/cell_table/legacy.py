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
from collections.abc import Collection, Mapping, Sequence
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
    from attnrmt.sweep.store.cell_table.reader import hex_keys, padded, read_ragged

    segment_of = np.searchsorted(offsets, rows, side="right") - 1
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    for segment in np.unique(segment_of).tolist():
        where = np.flatnonzero(segment_of == segment)
        local = rows[where] - offsets[segment]
        path = segments[segment]
        if kind == "ragged":
            values = read_ragged(
                _array(path, f"{field}__start").oindex[local],
                _array(path, f"{field}__length").oindex[local],
                _array(path, f"{field}__values"),
                width,
            )
        elif field in PROVENANCE_FIELDS and not _has_array(path, field):
            values = np.full(local.size, PROVENANCE_ABSENT[field], dtype=np.int64)
        else:
            array = _array(path, "cell_key" if kind == "key" else field)
            values = array.oindex[local] if array.ndim == 1 else array.oindex[local, :]
            if kind == "key":
                values = hex_keys(values)
            elif kind != "scalar":
                values = padded(values, width)
        parts.append((where, np.asarray(values)))
    if not parts:
        return np.empty(0)
    out = np.empty((rows.size, *parts[0][1].shape[1:]), dtype=parts[0][1].dtype)
    for where, values in parts:
        out[where] = values
    return out


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
    """Dense block of ``field`` for a block of the grid index of a format-2 table."""
    from attnrmt.sweep.store.cell_table.reader import dense_block

    return dense_block(
        rows_block,
        kind,
        width,
        dtype,
        fill,
        lambda present: take_rows(segments, offsets, present, field, kind, width),
    )


def open_legacy(
    directory: Path, manifest: Mapping[str, Any], per_setting: Collection[str] | None = None
) -> Any:
    """The lazy dense ``cells`` dataset of one version (``manifest``) of a format-2 table;
    ``per_setting`` as in :func:`attnrmt.sweep.store.cell_table.reader.dense_view`."""
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
        per_setting,
    )
