"""Reader of the stores (``docs/data-contract.md``, "cells.zarr", "Opening the results"):
:func:`open_cells`, the lazy dense view of a cell table (a Dask chunk reads O(1) chunks
of each column; spectra padded in memory only), and :func:`open_results`."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from attnrmt.contract import (
    ABSENT_INT,
    POOLING_FIELDS,
    PROVENANCE_ABSENT,
    PROVENANCE_FIELDS,
    SIZE_FIELDS,
    SPIKE_FIELDS,
    TOP_K_FIELDS,
    stored_eigenvalue_count,
    with_variable_attrs,
)
from attnrmt.sweep.store.cell_table.layout import (
    CELL_KEY,
    CELLS_STORE_NAME,
    DENSE_CHUNK_BYTES,
    LEGACY_MANIFEST_NAME,
    LEGACY_TABLE_DIRNAME,
    NEVER_SUPERSEDED,
    ROW_ARRAY,
    ROW_CHUNK,
    STORE_FORMAT_VERSION,
    SUPERSEDED,
    TableState,
    ragged_names,
    read_state,
    store_dir,
    table_store,
)
from attnrmt.sweep.store.grid import (
    CELL_ATTRS,
    CELLS_VIEW_NOTES,
    axis_coordinates,
    cells_view,
    first_present,
    has_consolidated_metadata,
)
from attnrmt.sweep.store.integrity import require_intact

STORE_NAMES = ("cells", "theory", "analysis")
#: Scalar per-cell float variables (besides the pooling scalars).
CELL_SCALARS = ("compute_seconds", "downstream_accuracy")


# --------------------------------------------------------------------------- table access


@functools.lru_cache(maxsize=64)
def version_arrays(store: str, version_id: str) -> dict[str, Any]:
    """The columns of a table version from its root's consolidated metadata (cached: a
    version's rows never change)."""
    import zarr

    group = zarr.open_group(store, mode="r", use_consolidated=True)
    return dict(group.arrays())


def _absent(name: str, size: int) -> np.ndarray:
    """What a row reads as in a column the table lacks (provenance: unknown; else NaN)."""
    return np.full(size, PROVENANCE_ABSENT.get(name, np.nan))


def _contiguous_runs(
    starts: np.ndarray, ends: np.ndarray, gap: int
) -> list[tuple[int, int, np.ndarray]]:
    """Group ranges into runs whose gaps are below ``gap``: (lo, hi, members), members in
    order of their start. O(n log n), vectorised."""
    order = np.argsort(starts, kind="stable")
    if order.size == 0:
        return []
    sorted_starts = starts[order].astype(np.int64)
    reach = np.maximum.accumulate(ends[order].astype(np.int64))  # the end of the run so far
    breaks = np.flatnonzero(sorted_starts[1:] - reach[:-1] > gap) + 1
    bounds = np.concatenate(([0], breaks, [order.size]))
    return [
        (int(sorted_starts[first]), int(reach[last - 1]), order[first:last])
        for first, last in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    ]


def read_ragged(starts: Any, counts: Any, values: Any, width: int) -> np.ndarray:
    """Rows (first sample ``starts``, ``counts`` samples) of the CF contiguous ragged Zarr
    array ``values``, NaN-padded to ``(n, width)``: one slice read per run of nearby rows.
    O(n x width) values, O(runs) reads."""
    starts = np.asarray(starts, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    out = np.full((starts.size, width), np.nan)
    positions = np.arange(width)
    for lo, hi, members in _contiguous_runs(starts, starts + counts, values.chunks[0]):
        chunk = np.asarray(values[lo:hi])
        rows, columns = np.nonzero(positions < np.minimum(counts[members], width)[:, None])
        out[members[rows], columns] = chunk[starts[members[rows]] - lo + columns]
    return out


def _take_rows(
    columns: Mapping[str, Any], rows: np.ndarray, field: str, kind: str, width: int
) -> np.ndarray:
    """Values of ``field`` at ``rows``, in that order: ``scalar`` ``(n,)``, ``topk``/``ragged``
    ``(n, width)`` NaN-padded, ``key`` hex strings (object). Reads only the chunks holding
    the rows. O(n x width)."""
    if kind == "ragged":
        names = ragged_names(field)
        if field not in columns:
            return np.full((rows.size, width), np.nan)
        return read_ragged(
            columns[names.start].oindex[rows],
            columns[names.count].oindex[rows],
            columns[field],
            width,
        )
    name = CELL_KEY if kind == "key" else field
    if name not in columns:
        absent = _absent(name, rows.size)
        return absent if kind == "scalar" else np.full((rows.size, width), np.nan)
    array = columns[name]
    values = array.oindex[rows] if array.ndim == 1 else array.oindex[rows, :]
    if kind == "key":
        keys = np.empty(len(values), dtype=object)
        keys[:] = [bytes(row).hex() for row in np.asarray(values, dtype=np.uint8)]
        return keys
    if kind == "scalar":
        return np.asarray(values)
    out = np.full((len(values), width), np.nan)
    out[:, : min(width, values.shape[1])] = values[:, :width]
    return out


def _fill_block(
    rows_block: np.ndarray,
    store: str,
    version_id: str,
    field: str,
    kind: str,
    width: int,
    dtype: Any,
    fill: Any,
) -> np.ndarray:
    """Dense block of ``field`` for a block of the grid index (``-1``: absent -> ``fill``).
    O(block x width)."""
    tail = () if kind in ("scalar", "key") else (width,)
    out = np.full((*rows_block.shape, *tail), fill, dtype=dtype)
    flat_rows = rows_block.reshape(-1)
    present = np.flatnonzero(flat_rows >= 0)
    if present.size:
        columns = version_arrays(store, version_id)
        out.reshape(-1, *tail)[present] = _take_rows(
            columns, flat_rows[present], field, kind, width
        )
    return out


def table_environments(path: str | os.PathLike[str]) -> dict[int, str]:
    """``environment_id -> environment JSON`` of a sweep's table (empty without one)."""
    state = read_state(table_store(path))
    return {} if state is None else state.environments


def iter_current_rows(
    path: str | os.PathLike[str], names: Sequence[str], chunk_rows: int = ROW_CHUNK
) -> Iterator[dict[str, np.ndarray]]:
    """The current rows of a sweep's table (a sweep directory or its ``cells.zarr``),
    ``chunk_rows`` at a time: ``{name: values}`` of the per-cell columns ``names`` (absent
    values where the table lacks one). Memory O(chunk); time O(rows x columns)."""
    store = table_store(path)
    state = read_state(store)
    if state is None:
        return
    columns = version_arrays(str(store), state.version_id)
    for lo in range(0, state.rows, chunk_rows):
        hi = min(lo + chunk_rows, state.rows)
        superseded = (
            np.asarray(columns[SUPERSEDED][lo:hi])
            if SUPERSEDED in columns
            else np.full(hi - lo, NEVER_SUPERSEDED)
        )
        take = np.flatnonzero(superseded > state.version)
        if take.size:
            yield {
                name: (
                    np.asarray(columns[name][lo:hi])[take]
                    if name in columns
                    else _absent(name, take.size)
                )
                for name in names
            }


# --------------------------------------------------------------------------- dense view


def _dense_chunks(shape: tuple[int, ...], snr_axis: int, max_width: int) -> tuple[int, ...]:
    """One chunk per point of the axes before ``snr``, whole along the rest; ``snr`` split
    to stay under :data:`DENSE_CHUNK_BYTES`."""
    n_snr, tail = shape[snr_axis], shape[snr_axis + 1 :]
    per_snr = max(1, int(np.prod(tail)) * max(1, max_width) * 8)
    snr_chunk = int(max(1, min(n_snr, DENSE_CHUNK_BYTES // per_snr)))
    return (*(1,) * snr_axis, snr_chunk, *tail)


def _nanmean_last(block: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # mean of all-NaN: absent
        return np.nanmean(block, axis=-1)


def _open_cell_table(
    store: str | os.PathLike[str], state: TableState, per_setting: Collection[str] | None = None
) -> Any:
    """The lazy dense ``cells`` dataset of one published version ``state`` of a table (or
    its snapshot): one Dask chunk per setting for the fields in ``per_setting`` (None:
    all), one chunk for the others (each column read once), each computed by
    :func:`_fill_block`. O(grid points) for the index, O(variables) to build."""
    import dask.array as da
    import zarr

    grid = zarr.open_group(str(Path(store) / state.grid), mode="r")
    attrs: dict[str, Any] = dict(grid.attrs)
    rows = np.asarray(cast(Any, grid[ROW_ARRAY])[:])

    shape = tuple(int(n) for n in attrs["shape"])
    coords = axis_coordinates(attrs["axes"])
    top_k = int(attrs["top_k"])
    spectrum = attrs["dataset_attrs"].get("spectrum", "full")  # absent: written before top
    n_eig = stored_eigenvalue_count(spectrum, max(coords["d"]), top_k)
    max_t = int(max(coords["T"]))
    axis_dims = tuple(coords)
    by_setting = da.from_array(
        rows.reshape(shape),
        chunks=_dense_chunks(shape, axis_dims.index("snr"), max(n_eig, max_t)),
        name=False,
    )
    in_one = da.from_array(rows.reshape(shape), chunks=shape, name=False)

    def lazy(field: str, kind: str, width: int, dtype: Any, fill_value: Any) -> Any:
        row_grid = by_setting if per_setting is None or field in per_setting else in_one
        new_axis = [] if kind in ("scalar", "key") else [len(shape)]
        chunks = row_grid.chunks if not new_axis else (*row_grid.chunks, (width,))
        return row_grid.map_blocks(
            _fill_block,
            str(Path(store)),
            state.version_id,
            field,
            kind,
            width,
            dtype,
            fill_value,
            dtype=dtype,
            chunks=chunks,
            new_axis=new_axis or None,
            meta=np.empty((0,) * (len(shape) + len(new_axis)), dtype=dtype),
        )

    cell_dims = (*axis_dims, "replicate")
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
            axis_dims,
            per_replicate.map_blocks(_nanmean_last, drop_axis=-1, dtype=np.float64),
        )
        data_vars[f"{name}_replicate"] = (cell_dims, per_replicate)
    for name in SIZE_FIELDS:
        per_replicate = lazy(name, "scalar", 0, np.int64, ABSENT_INT)
        data_vars[name] = (
            axis_dims,
            per_replicate.map_blocks(first_present, drop_axis=-1, dtype=np.int64),
        )
    classes = attrs["dataset_attrs"].get("classes")  # K classes: the spike dimension
    spikes = int(json.loads(classes)["spikes"]) if classes else 0
    for name in SPIKE_FIELDS if spikes else ():
        data_vars[name] = ((*cell_dims, "spike"), lazy(name, "ragged", spikes, np.float64, np.nan))
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
            "environments": str(state.attrs.get("environments", "{}")),
            "spectrum_storage": (
                "eigenvalues stored as a CF contiguous ragged array (any length per cell: "
                "full or top spectra, any d); NaN-padded to the longest stored spectrum "
                "only in this view"
            ),
        },
    )
    if spikes:
        dataset = dataset.assign_coords(spike=("spike", np.arange(spikes), CELL_ATTRS["spike"]))
    # cells_present / cells_total come last in the reference layout
    dataset.attrs["cells_present"] = int(attrs["dataset_attrs"]["cells_present"])
    dataset.attrs["cells_total"] = int(attrs["dataset_attrs"]["cells_total"])
    return dataset


def open_cells(path: str | os.PathLike[str], per_setting: Collection[str] | None = None) -> Any:
    """A sweep's cells, lazily, from a sweep directory (its table's newest version), its
    ``cells.zarr`` or a table; ``per_setting``: the fields chunked one setting per Dask
    chunk (None: all). A format-2 table is refused with the command that rebuilds it.
    O(grid points)."""
    import xarray as xr

    location = Path(path)
    candidates = (
        [location]
        if location.name.endswith(".zarr")
        else [store_dir(location), location / CELLS_STORE_NAME]
    )
    for store in candidates:
        state = read_state(store)
        if state is not None:
            return _open_cell_table(store, state, per_setting)
    sweep_dir = location.parent if location.name.endswith(".zarr") else location
    if (sweep_dir / LEGACY_TABLE_DIRNAME / LEGACY_MANIFEST_NAME).is_file():
        raise ValueError(
            f"{str(sweep_dir)!r}: a cell table of format 2 (attnrmt 0.1), not read by this "
            f"version: remove {str(sweep_dir / CELLS_STORE_NAME)!r} and rerun "
            "`attnrmt run CONFIG`, which rebuilds the table from the sweep's fragments"
        )
    dense = candidates[-1]
    if (dense / "zarr.json").is_file() or (dense / ".zmetadata").is_file():
        return xr.open_zarr(dense, consolidated=has_consolidated_metadata(dense))
    raise FileNotFoundError(f"{str(path)!r}: no cells store (cell_table.zarr, cells.zarr)")


def _has_store(directory: Path) -> bool:
    return (
        any((directory / f"{name}.zarr").is_dir() for name in (*STORE_NAMES, "cell_table"))
        or (directory / LEGACY_TABLE_DIRNAME / LEGACY_MANIFEST_NAME).is_file()
    )


def open_results(run_dir: str | os.PathLike[str], squeeze: bool = False) -> Any:
    """Open ``results/<run>`` as an :class:`xarray.DataTree` of Dask arrays: per sweep
    ``cells``, ``theory`` and, when present, ``analysis``, ascending numeric coordinates, the
    contract's ``long_name``, ``comment`` and ``units`` on every variable
    (``docs/data-contract.md``, "Opening the results"). ``squeeze`` drops every dimension
    of length one (kept as a scalar coordinate). Raises FileNotFoundError (no such
    folder), ValueError (a sweep folder, or no results) and
    :class:`~attnrmt.sweep.store.integrity.DamagedStore` (the quick check fails)."""
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
        require_intact(sweep_dir)  # docs/data-contract.md, "Integrity": the quick check
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
    # the contract's labels (docs/data-contract.md, "Units"), also on stores written by an
    # older version; names the contract does not know keep their stored attributes
    groups = {
        name: with_variable_attrs(dataset, missing="keep") for name, dataset in groups.items()
    }
    if squeeze:
        groups = {
            name: dataset.squeeze([dim for dim, size in dataset.sizes.items() if size == 1])
            for name, dataset in groups.items()
        }
    return xr.DataTree.from_dict(groups)
