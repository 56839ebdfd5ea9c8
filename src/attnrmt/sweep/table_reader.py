"""Reader of the stores: the lazy dense view of a cell table, and :func:`open_results`.

:func:`open_cells` reads one ``manifest.json`` and the grid index (8 bytes per grid
point), then returns the ``cells.zarr`` dataset of the data contract
(``docs/data-contract.md``, "cells.zarr") with every variable a Dask array. Each Dask
chunk is one setting (a point of ``d .. weights``) with its whole ``snr`` curve(s), all
replicates and the whole ``k``/``eig``/``position`` axes (the ``snr`` axis is split when a
chunk would exceed :data:`~attnrmt.sweep.table_layout.DENSE_CHUNK_BYTES`); computing it
reads only the table chunks holding that setting's cells — O(1) chunks per segment — and
pads spectra to the largest ``d`` in memory only (nothing padded is stored or read).
Values are bit-identical to :func:`attnrmt.sweep.grid.cells_dataset` of the same records.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.contract import (
    ABSENT_INT,
    AXES,
    POOLING_FIELDS,
    PROVENANCE_ABSENT,
    PROVENANCE_FIELDS,
    SIZE_FIELDS,
    TOP_K_FIELDS,
    stored_eigenvalue_count,
)
from attnrmt.sweep.grid import (
    CELLS_VIEW_NOTES,
    axis_coordinates,
    cells_view,
    first_present,
    has_consolidated_metadata,
)
from attnrmt.sweep.table_layout import (
    CELL_TABLE_DIRNAME,
    DENSE_CHUNK_BYTES,
    MANIFEST_NAME,
    ROW_ARRAY,
    SEGMENTS_DIRNAME,
    STORE_FORMAT_VERSION,
    read_manifest,
)

STORE_NAMES = ("cells", "theory", "analysis")
#: Per-cell variables of the dense view that come from a ragged table field, with the
#: dense dimension they are padded along.
RAGGED_DIMS = {"eigenvalues": "eig", "effective_weights": "position"}
#: Scalar per-cell float variables (besides the pooling scalars).
CELL_SCALARS = ("compute_seconds", "downstream_accuracy")


# --------------------------------------------------------------------------- table access


@functools.lru_cache(maxsize=512)
def _array(segment_path: str, name: str) -> Any:
    """An open Zarr array of a segment (cached per process; segments are immutable)."""
    import zarr

    return zarr.open_array(str(Path(segment_path) / name), mode="r")


@functools.lru_cache(maxsize=512)
def _has_array(segment_path: str, name: str) -> bool:
    """Whether a segment has the array ``name`` (segments written before provenance lack
    its columns)."""
    return (Path(segment_path) / name / "zarr.json").is_file()


def segment_environments(segment_paths: Sequence[str]) -> dict[str, str]:
    """``environment_id -> environment JSON`` of the segments (their ``environments``
    attribute; empty for segments written before provenance). O(segments) small reads."""
    import zarr

    environments: dict[str, str] = {}
    for path in segment_paths:
        environments.update(zarr.open_group(path, mode="r").attrs.get("environments", {}))
    return environments


def _runs(starts: np.ndarray, ends: np.ndarray, gap: int) -> list[tuple[int, int, np.ndarray]]:
    """Group sorted ranges into runs whose gaps are below ``gap``: (lo, hi, members)."""
    order = np.argsort(starts, kind="stable")
    runs: list[tuple[int, int, np.ndarray]] = []
    lo = hi = None
    members: list[int] = []
    for index in order.tolist():
        start, end = int(starts[index]), int(ends[index])
        if lo is not None and start - hi <= gap:
            hi = max(hi, end)
            members.append(index)
            continue
        if lo is not None:
            runs.append((lo, hi, np.array(members)))
        lo, hi, members = start, end, [index]
    if lo is not None:
        runs.append((lo, hi, np.array(members)))
    return runs


def take_rows(
    segments: Sequence[str],
    offsets: np.ndarray,
    rows: np.ndarray,
    field: str,
    kind: str,
    width: int,
) -> np.ndarray:
    """Values of ``field`` for global ``rows`` of the table, in the order of ``rows``.

    ``kind``: ``scalar`` -> ``(n,)``; ``topk``/``ragged`` -> ``(n, width)`` NaN-padded;
    ``key`` -> ``(n,)`` hex strings. Reads only the chunks holding the rows (one slice
    per run of nearby rows). O(n x width).
    """
    segment_of = np.searchsorted(offsets, rows, side="right") - 1
    out: np.ndarray
    if kind == "key":
        out = np.empty(rows.size, dtype=object)
    elif kind == "scalar":
        out = None  # dtype from the first segment
    else:
        out = np.full((rows.size, width), np.nan)
    for segment in np.unique(segment_of).tolist():
        where = np.flatnonzero(segment_of == segment)
        local = rows[where] - offsets[segment]
        path = segments[segment]
        if kind == "ragged":
            starts = _array(path, f"{field}__start").oindex[local]
            lengths = _array(path, f"{field}__length").oindex[local]
            values = _array(path, f"{field}__values")
            for lo, hi, members in _runs(starts, starts + lengths, values.chunks[0]):
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
    if out is None:
        out = np.empty(0)
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
    """Dense block of ``field`` for a block of the grid index (``-1``: absent -> ``fill``)."""
    tail = () if kind in ("scalar", "key") else (width,)
    out = np.full((*rows_block.shape, *tail), fill, dtype=dtype)
    flat_rows = rows_block.reshape(-1)
    present = np.flatnonzero(flat_rows >= 0)
    if present.size:
        values = take_rows(segments, offsets, flat_rows[present], field, kind, width)
        out.reshape(-1, *tail)[present] = values
    return out


# --------------------------------------------------------------------------- dense view


def _dense_chunks(shape: tuple[int, ...], max_width: int) -> tuple[int, ...]:
    """One chunk per point of ``d .. weights``; ``snr`` split to stay under the budget."""
    n_snr, n_centered, n_replicates = shape[6], shape[7], shape[8]
    per_snr = max(1, n_centered * n_replicates * max(1, max_width) * 8)
    snr_chunk = int(max(1, min(n_snr, DENSE_CHUNK_BYTES // per_snr)))
    return (1, 1, 1, 1, 1, 1, snr_chunk, n_centered, n_replicates)


def _nanmean_last(block: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # mean of all-NaN: absent
        return np.nanmean(block, axis=-1)


def open_cell_table(table: str | os.PathLike[str], manifest: Mapping[str, Any]) -> Any:
    """The lazy dense ``cells.zarr`` dataset of one version (``manifest``) of a table."""
    import dask.array as da
    import zarr

    directory = Path(table)
    grid = zarr.open_group(str(directory / manifest["grid"]), mode="r")
    attrs = dict(grid.attrs)
    shape = tuple(int(n) for n in attrs["shape"])
    coords = axis_coordinates(attrs["axes"])
    top_k = int(attrs["top_k"])
    spectrum = attrs["dataset_attrs"].get("spectrum", "full")  # absent: written before top
    n_eig = stored_eigenvalue_count(spectrum, max(coords["d"]), top_k)
    max_t = int(max(coords["T"]))
    rows = np.asarray(grid[ROW_ARRAY][:]).reshape(shape)
    segments = tuple(
        str(directory / SEGMENTS_DIRNAME / segment["name"]) for segment in manifest["segments"]
    )
    offsets = np.concatenate([[0], np.cumsum([s["rows"] for s in manifest["segments"]])])
    row_grid = da.from_array(rows, chunks=_dense_chunks(shape, max(n_eig, max_t)), name=False)

    def lazy(field: str, kind: str, width: int, dtype: Any, fill: Any) -> Any:
        new_axis = [] if kind in ("scalar", "key") else [len(shape)]
        chunks = row_grid.chunks if not new_axis else (*row_grid.chunks, (width,))
        return row_grid.map_blocks(
            fill_block,
            segments,
            offsets,
            field,
            kind,
            width,
            dtype,
            fill,
            dtype=dtype,
            chunks=chunks,
            new_axis=new_axis or None,
            meta=np.empty((0,) * (len(shape) + len(new_axis)), dtype=dtype),
        )

    cell_dims = (*AXES, "replicate")
    data_vars: dict[str, tuple[tuple[str, ...], Any]] = {
        "eigenvalues": (
            (*cell_dims, "eig"),
            lazy("eigenvalues", "ragged", n_eig, np.float64, np.nan),
        ),
        **{
            name: ((*cell_dims, "k"), lazy(name, "topk", top_k, np.float64, np.nan))
            for name in TOP_K_FIELDS
        },
        **{name: (cell_dims, lazy(name, "scalar", 0, np.float64, np.nan)) for name in CELL_SCALARS},
        "effective_weights": (
            (*cell_dims, "position"),
            lazy("effective_weights", "ragged", max_t, np.float64, np.nan),
        ),
        "cell_key": (cell_dims, lazy("cell_key", "key", 0, object, "")),
        **{
            name: (cell_dims, lazy(name, "scalar", 0, np.int64, PROVENANCE_ABSENT[name]))
            for name in PROVENANCE_FIELDS
        },
    }
    for name in POOLING_FIELDS:
        per_replicate = lazy(name, "scalar", 0, np.float64, np.nan)
        data_vars[name] = (
            AXES,
            per_replicate.map_blocks(_nanmean_last, drop_axis=-1, dtype=np.float64),
        )
        data_vars[f"{name}_replicate"] = (cell_dims, per_replicate)
    for name in SIZE_FIELDS:
        per_replicate = lazy(name, "scalar", 0, np.int64, ABSENT_INT)
        data_vars[name] = (
            AXES,
            per_replicate.map_blocks(first_present, drop_axis=-1, dtype=np.int64),
        )
    replicates = int(attrs["replicates"])
    dataset = cells_view(
        data_vars,
        coords,
        replicates=replicates,
        top_k=top_k,
        n_eig=n_eig,
        max_t=max_t,
        attrs={
            **attrs["dataset_attrs"],
            "replicates": replicates,
            "top_k": top_k,
            **CELLS_VIEW_NOTES,
            "store_format_version": STORE_FORMAT_VERSION,
            "environments": json.dumps(segment_environments(segments), sort_keys=True),
            "spectrum_storage": (
                "eigenvalues stored ragged per cell (any length: full or top spectra, any "
                "d); NaN-padded to the longest stored spectrum only in this view"
            ),
        },
    )
    # cells_present / cells_total come last in the reference layout
    dataset.attrs["cells_present"] = int(attrs["dataset_attrs"]["cells_present"])
    dataset.attrs["cells_total"] = int(attrs["dataset_attrs"]["cells_total"])
    return dataset


def _resolve_table(path: Path) -> tuple[Path, dict[str, Any]] | None:
    """(table directory, manifest) of a sweep directory or a ``cells.zarr`` pointer.

    A ``cells.zarr`` opens the version its pointer names (what the DAG gathered) while
    that version is kept; a sweep directory opens ``cell_table/manifest.json``, the
    newest complete version (it exists even while Snakemake has removed ``cells.zarr``
    to rerun the gather). None when there is no format-2 table.
    """
    pointer = read_manifest(path / MANIFEST_NAME) if path.name == "cells.zarr" else None
    directory = (path.parent if pointer is not None else path) / CELL_TABLE_DIRNAME
    if pointer is not None and (directory / pointer["grid"]).is_dir():
        return directory, pointer
    manifest = read_manifest(directory / MANIFEST_NAME)
    return None if manifest is None else (directory, manifest)


def open_cells(path: str | os.PathLike[str]) -> Any:
    """Open a sweep's cells lazily: a sweep directory or its ``cells.zarr``.

    Format 2 (cell table) gives the lazy dense view (:func:`open_cell_table`); a format-1
    dense ``cells.zarr`` (written before the table existed, or a synthetic dataset) is
    opened with :func:`xarray.open_zarr`.
    """
    import xarray as xr

    location = Path(path)
    resolved = _resolve_table(location)
    if resolved is not None:
        return open_cell_table(*resolved)
    dense = location if location.name.endswith(".zarr") else location / "cells.zarr"
    if (dense / "zarr.json").is_file() or (dense / ".zmetadata").is_file():
        return xr.open_zarr(dense, consolidated=has_consolidated_metadata(dense))
    raise FileNotFoundError(f"{str(path)!r}: no cells store (cell_table/ or cells.zarr)")


def _has_store(directory: Path) -> bool:
    return (
        any((directory / f"{name}.zarr").is_dir() for name in STORE_NAMES)
        or (directory / CELL_TABLE_DIRNAME / MANIFEST_NAME).is_file()
    )


def open_results(run_dir: str | os.PathLike[str], squeeze: bool = False) -> Any:
    """Open ``results/<run>`` as an :class:`xarray.DataTree`, lazily (Dask arrays).

    One group per sweep with children ``cells`` (the table's newest complete version),
    ``theory`` and, when present, ``analysis``. Numeric coordinates are ascending.

    Parameters
    ----------
    run_dir : path
        ``results/<run>`` (the directory holding one directory per sweep).
    squeeze : bool
        Drop every dimension of length one (it stays as a scalar coordinate), so that
        ``tree["s/cells"].top_eigenvalues.sel(k=0).mean("replicate").plot.line(x="snr")``
        works on a sweep with one ``d``, one model, ... The default keeps the full
        contract's dimensions (``docs/data-contract.md``, "Dimensions").

    Raises
    ------
    FileNotFoundError
        ``run_dir`` does not exist.
    ValueError
        ``run_dir`` is a sweep directory (pass its parent) or holds no sweep results.
    """
    import xarray as xr

    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"run_dir={str(run_dir)!r}: no such directory")
    if _has_store(root) or (root / "fragments").is_dir():
        raise ValueError(
            f"run_dir={str(run_dir)!r} is the directory of one sweep, not of a run: pass "
            f"its parent, open_results({str(root.parent)!r}), and select "
            f"tree[{root.name!r}]"
        )
    groups: dict[str, Any] = {"/": xr.Dataset(attrs={"run_dir": str(root)})}
    for sweep_dir in sorted(path for path in root.iterdir() if path.is_dir()):
        if not _has_store(sweep_dir):
            continue
        with contextlib.suppress(FileNotFoundError):  # only theory stored yet
            groups[f"/{sweep_dir.name}/cells"] = open_cells(sweep_dir)
        for name in STORE_NAMES[1:]:
            path = sweep_dir / f"{name}.zarr"
            if path.is_dir():
                groups[f"/{sweep_dir.name}/{name}"] = xr.open_zarr(
                    path, consolidated=has_consolidated_metadata(path)
                )
    if len(groups) == 1:
        raise ValueError(
            f"run_dir={str(run_dir)!r} holds no sweep results (no <sweep>/cell_table, "
            f"cells.zarr or theory.zarr): is it results/<run> of a run that has started?"
        )
    if squeeze:
        groups = {name: _squeezed(dataset) for name, dataset in groups.items()}
    return xr.DataTree.from_dict(groups)


def _squeezed(dataset: Any) -> Any:
    single = [dim for dim, size in dataset.sizes.items() if size == 1]
    return dataset.squeeze(single) if single else dataset


__all__ = ["open_cell_table", "open_cells", "open_results"]
