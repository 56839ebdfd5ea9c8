"""The dense grid view of a sweep, shared by the cell table's writer and reader and
``theory.zarr``: names and attributes of every stored variable (:data:`CELL_ATTRS`),
axis coordinates, chunking, Zarr writing (``docs/data-contract.md``, "cells.zarr")."""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.contract import ABSENT_INT, SIZE_FIELDS, TABLE_AXIS, VARIABLE_ATTRS, sweep_axes
from attnrmt.sweep.store.atomic import atomic_path
from attnrmt.sweep.store.integrity import write_digest

#: Attributes of every variable of the cells view: the contract's one table
#: (``docs/data-contract.md``, "Units"), plus the fill value of the integer sizes.
CELL_ATTRS: dict[str, dict[str, str]] = {
    name: {**attrs, **({"absent_value": str(ABSENT_INT)} if name in SIZE_FIELDS else {})}
    for name, attrs in VARIABLE_ATTRS.items()
}


def coordinate_values(axis: str, values: Sequence[Any], sort: bool = True) -> np.ndarray:
    """Config values of ``axis`` as its coordinate array: names and ``centered`` as given,
    numbers ascending unless not ``sort``. O(values log values)."""
    if axis in ("positional", "weights", TABLE_AXIS):
        return np.asarray([str(value) for value in values], dtype=object)
    if axis == "centered":
        return np.asarray([bool(value) for value in values], dtype=bool)
    kind = np.int64 if axis in ("d", "T") else np.float64
    numbers = np.asarray([kind(value) for value in values], dtype=kind)
    return np.sort(numbers) if sort else numbers


def axis_coordinates(axes: Mapping[str, Sequence[Any]]) -> dict[str, np.ndarray]:
    """Coordinate arrays of the sweep axes in the contract's order (``table`` only where
    ``axes`` has it): numeric axes ascending, names and ``centered`` in the config's order
    (``docs/data-contract.md``, "Dimensions"). O(axis values)."""
    return {axis: coordinate_values(axis, axes[axis]) for axis in sweep_axes(axes)}


def dataset_attrs(sweep_plan: Any, root_seed: int, title: str) -> dict[str, Any]:
    """The dataset attributes of a sweep's stores (``docs/data-contract.md``,
    "Attributes"): ``classes`` (JSON of ``{K, means, means_name, spikes}``) only for a
    K-class sweep and ``noise`` only when shared, so other sweeps' attributes are unchanged.
    O(models)."""
    from attnrmt import __version__

    classes, noise = sweep_plan.classes, str(sweep_plan.noise)
    return {
        "title": title,
        "sweep": str(sweep_plan.name),
        "attnrmt_version": str(__version__),
        "config_sha256": str(sweep_plan.config_sha256),
        "root_seed": int(root_seed),
        "model_summary": json.dumps(model_summary(sweep_plan), sort_keys=True, default=str),
        "spectrum": str(sweep_plan.spectrum),
        "Conventions": "CF-1.10 (attributes only)",
        **({"classes": json.dumps(classes, sort_keys=True, default=str)} if classes else {}),
        **({} if noise == "independent" else {"noise": noise}),
    }


def _table_coordinate(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar coordinate ``table`` (the law's name) of a store written when a sweep had
    one law and named it in the attribute ``table_name`` (docs/data-contract.md, "Table
    laws": stores of today have the ``table`` dimension instead), ``{}`` otherwise. O(1)."""
    if "table_name" not in attrs:
        return {}
    name = np.asarray(str(attrs["table_name"]), dtype=object)  # text as object, as the axes
    return {"table": ((), name, CELL_ATTRS["table"])}


def model_summary(sweep_plan: Any) -> dict[str, dict[str, Any]]:
    """Canonical specs of the named models a sweep uses: ``{positional: {...}, weights:
    {...}[, table: {...}]}``. O(models)."""
    return {kind: dict(specs) for kind, specs in sweep_plan.models.items()}


#: Bytes a chunk of a dense store (``theory.zarr``, ``analysis.zarr``) holds at most, unless
#: one point of its slow axes alone is larger.
STORE_CHUNK_BYTES = 8 * 2**20


def _chunks_for(dims: Sequence[str], sizes: Mapping[str, int], itemsize: int) -> tuple[int, ...]:
    """Whole along the fast axes (``snr``, ``centered``, ``replicate``, ...); the slow axes
    (``d .. weights``, ``table``), innermost first, as many points per chunk as keep it
    under :data:`STORE_CHUNK_BYTES` (at least one point): a few chunk files per variable,
    not one per setting. O(dims)."""
    slow = {"d", "delta", "gamma", "T", "positional", "weights", TABLE_AXIS}
    chunks = [max(1, sizes[dim]) for dim in dims]
    fast = [size for size, dim in zip(chunks, dims, strict=True) if dim not in slow]
    chunk_bytes = max(1, itemsize) * int(np.prod(fast))
    for index in reversed([i for i, dim in enumerate(dims) if dim in slow]):
        chunks[index] = int(min(chunks[index], max(1, STORE_CHUNK_BYTES // chunk_bytes)))
        chunk_bytes *= chunks[index]
    return tuple(chunks)


#: Dataset attributes of every cells view that explain its conventions
#: (``docs/data-contract.md``, "cells.zarr").
CELLS_VIEW_NOTES: dict[str, str] = {
    "pooling_scalars": (
        "alpha, kappa, sigma are over the axes only: the mean over replicates of "
        "alpha_replicate, kappa_replicate, sigma_replicate (identical across "
        "replicates except for causal_attention, whose weights are measured)"
    ),
    "absent_cells": "grid points without a result: NaN (floats), -1 (V, N), '' (cell_key)",
}


def cells_view(
    data_vars: Mapping[str, tuple[tuple[str, ...], Any]],
    coords: Mapping[str, Any],
    *,
    replicates: int,
    top_k: int,
    n_eig: int,
    max_t: int,
    attrs: Mapping[str, Any],
) -> Any:
    """The cells dataset of the data contract from its variables (numpy or dask arrays):
    contract attributes on every variable (:data:`CELL_ATTRS`), the axis coordinates plus
    ``replicate``, ``k``, ``eig`` (``n_eig``: :func:`attnrmt.contract.stored_eigenvalue_count`
    at the largest ``d``) and ``position``. O(number of variables); no data copied.
    What the lazy reader returns."""
    import xarray as xr

    return xr.Dataset(
        data_vars={
            name: xr.Variable(dims, values, attrs=CELL_ATTRS.get(name, {}))
            for name, (dims, values) in data_vars.items()
        },
        coords={
            **{axis: (axis, values, CELL_ATTRS[axis]) for axis, values in coords.items()},
            "replicate": ("replicate", np.arange(replicates), CELL_ATTRS["replicate"]),
            "k": ("k", np.arange(top_k), CELL_ATTRS["k"]),
            "eig": ("eig", np.arange(n_eig), CELL_ATTRS["eig"]),
            "position": ("position", np.arange(max_t), CELL_ATTRS["position"]),
            **_table_coordinate(attrs),
        },
        attrs=dict(attrs),
    )


def first_present(values: np.ndarray) -> np.ndarray:
    """Collapse the replicate axis of an int array, ignoring ``ABSENT_INT`` entries."""
    present = np.where(values == ABSENT_INT, np.iinfo(np.int64).min, values)
    collapsed = present.max(axis=-1)
    return np.where(collapsed == np.iinfo(np.int64).min, ABSENT_INT, collapsed)


def dataset_encoding(dataset: Any) -> dict[str, dict[str, Any]]:
    """Explicit Zarr encodings: NaN fill for floats, chunks of :func:`_chunks_for`, the
    checksummed codecs of every store
    (:func:`attnrmt.sweep.store.cell_table.layout.compressors`)."""
    from attnrmt.sweep.store.cell_table.layout import compressors

    sizes = dict(dataset.sizes)
    encoding: dict[str, dict[str, Any]] = {}
    for name, variable in dataset.variables.items():
        dims = variable.dims
        chunks = (
            _chunks_for(dims, sizes, variable.dtype.itemsize)
            if name not in dataset.dims
            else (sizes[name],)
        )
        encoding[name] = {"chunks": chunks, "compressors": compressors()}
        if np.issubdtype(variable.dtype, np.floating):
            encoding[name]["_FillValue"] = np.nan
    return encoding


def write_zarr_atomically(dataset: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``dataset`` as Zarr v3 to a temporary sibling, consolidate once, rename to ``path``.

    Any existing store at ``path`` is replaced (only the owning rule writes it).
    """
    import zarr

    with atomic_path(path, replace_tree=True) as tmp:
        dataset.to_zarr(
            tmp, mode="w", zarr_format=3, consolidated=False, encoding=dataset_encoding(dataset)
        )
        with warnings.catch_warnings():
            # Zarr 3 warns that consolidated metadata is not yet in the v3 spec; we write it
            # deliberately (one read of the metadata for every open) and xarray reads it.
            warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
            zarr.consolidate_metadata(str(tmp))
    write_digest(path)
    return Path(path)


def log_line(log_path: str | os.PathLike[str] | None, line: str) -> None:
    if log_path is None:
        return
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as handle:
        handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


def has_consolidated_metadata(path: str | os.PathLike[str]) -> bool:
    """Whether a Zarr store (v3 ``zarr.json`` or v2 ``.zmetadata``) has consolidated metadata."""
    root = Path(path)
    if (root / ".zmetadata").is_file():
        return True
    try:
        metadata = json.loads((root / "zarr.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(metadata.get("consolidated_metadata"))
