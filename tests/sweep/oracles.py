"""Test oracles: object-per-cell versions of what the plan and the store do with arrays,
kept only to check the array code against (no production caller builds them)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.contract import (
    ABSENT_INT,
    POOLING_FIELDS,
    PROVENANCE_ABSENT,
    PROVENANCE_FIELDS,
    SIZE_FIELDS,
    TOP_K_FIELDS,
    stored_eigenvalue_count,
)
from attnrmt.sweep.spec.cost import estimated_cell_seconds, estimated_curve_seconds
from attnrmt.sweep.spec.identity import block_key, seed_token
from attnrmt.sweep.spec.plan import Block, Cell, line_block_size
from attnrmt.sweep.store import fragments
from attnrmt.sweep.store.grid import (
    CELLS_VIEW_NOTES,
    axis_coordinates,
    cells_view,
    dataset_attrs,
    first_present,
)
from attnrmt.sweep.store.provenance import (
    ENVIRONMENT_KEY,
    ENVIRONMENTS_MEMBER,
    PROVENANCE_KEYS,
    environments_of,
)

__all__ = [
    "Fragment",
    "cell_block_params",
    "cells_dataset",
    "decode_fragment",
    "make_blocks",
    "read_fragment",
]


@dataclass(frozen=True)
class Fragment:
    """Decoded fragment: ``cell_keys``, ``cell_seeds`` (seed words as JSON), ``computed`` (by
    the job that wrote it, else reused) and one ``CellResult.to_dict()``-like record per cell."""

    cell_keys: list[str]
    cell_seeds: list[str]
    computed: np.ndarray
    records: list[dict[str, Any]]


def decode_fragment(arrays: Mapping[str, np.ndarray]) -> Fragment:
    """Inverse of :func:`attnrmt.sweep.store.fragments.encode_fragment` (provenance values
    unknown to a cell left out of its record, so a record without provenance round-trips)."""
    keys = [str(key) for key in arrays["cell_key"]]
    n_cells = len(keys)
    records: list[dict[str, Any]] = [{} for _ in range(n_cells)]
    environments = environments_of(arrays)
    for name in PROVENANCE_FIELDS:
        for index, value in enumerate(np.asarray(arrays.get(name, [])).tolist()):
            if value == PROVENANCE_ABSENT[name]:
                continue
            if name == "environment_id":
                records[index][ENVIRONMENT_KEY] = environments.get(value, "")
            else:
                records[index][name] = int(value)
    meta = ("format_version", "cell_key", "cell_seed", "computed", ENVIRONMENTS_MEMBER)
    for name in arrays:
        if name in (*meta, *PROVENANCE_KEYS) or name.endswith("__offsets"):
            continue
        if name.endswith("__values"):
            field = name[: -len("__values")]
            flat = np.asarray(arrays[name])
            offsets = np.asarray(arrays[f"{field}__offsets"])
            for index in range(n_cells):
                records[index][field] = flat[offsets[index] : offsets[index + 1]].copy()
        else:
            column = np.asarray(arrays[name])
            for index in range(n_cells):
                records[index][name] = column[index].item()
    return Fragment(
        cell_keys=keys,
        cell_seeds=[str(seed) for seed in arrays["cell_seed"]],
        computed=np.asarray(arrays["computed"], dtype=bool),
        records=records,
    )


def read_fragment(path: str | os.PathLike[str]) -> Fragment:
    """A fragment read and verified as the store reads it (a damaged file moved aside and
    its twin used; ``FragmentDamaged`` without one), decoded."""
    return decode_fragment(fragments._recovered(Path(path), fragments.load_verified))


def make_blocks(
    cells: Sequence[Cell], root_seed: int, block_size: int | str, block_seconds: float = 0.0
) -> list[Block]:
    """Group cells by line, sort each line by ``(snr, replicate)``, chunk by block size.

    ``block_size``: cells per block, or ``"auto"``: per line,
    :func:`attnrmt.sweep.spec.cost.cells_per_block` of the line's estimated cell cost
    (:func:`attnrmt.sweep.spec.cost.estimated_cell_seconds`, fixed constants) and
    ``block_seconds``. Blocks never mix lines; lines appear in order of first appearance
    in ``cells``. O(cells log line length) with one object per cell; the plan's
    :func:`attnrmt.sweep.spec.plan.grid_blocks` must give the same blocks from arrays.
    """
    lines: dict[tuple, list[Cell]] = {}
    for cell in cells:
        lines.setdefault(cell.line, []).append(cell)
    blocks = []
    for line_cells in lines.values():
        line_cells.sort(key=lambda cell: (cell.snr, cell.replicate))
        size = line_block_size(line_cells[0], len(line_cells), block_size, block_seconds)
        for start in range(0, len(line_cells), size):
            chunk = tuple(line_cells[start : start + size])
            blocks.append(Block(block_key(root_seed, [cell.key for cell in chunk]), chunk))
    return blocks


def cell_block_params(cells: Sequence[Cell], root_seed: int) -> list[dict[str, Any]]:
    """Block params built cell by cell (key, seed words, simulate kwargs; ``"curve": True``
    with shared noise; seed token, estimated seconds): what
    :meth:`attnrmt.sweep.spec.plan.CellGrid.block_params` must give from arrays."""
    params = [
        {"key": cell.key, "seed": cell.seed_words(root_seed), "kwargs": cell.simulate_kwargs()}
        for cell in cells
    ]
    for entry, cell in zip(params, cells, strict=True):
        if cell.noise == "shared":
            entry["curve"] = True
        entry["id"] = seed_token(entry["seed"])
        kwargs, n_snr = entry["kwargs"], cell.curve_length
        entry["seconds"] = (
            estimated_curve_seconds(kwargs, n_snr) / n_snr
            if cell.noise == "shared"
            else estimated_cell_seconds(kwargs)
        )
    return params


def cells_dataset(
    sweep_plan: Any,
    records: Mapping[str, Mapping[str, Any]],
    root_seed: int,
) -> Any:
    """Assemble a sweep's cell results into the ``cells.zarr`` dataset (data contract), in
    memory, one record at a time: the reference the lazy cell-table reader
    (:mod:`attnrmt.sweep.store.cell_table.reader`) reproduces bit for bit. O(grid x max d)
    memory.

    Parameters
    ----------
    sweep_plan : SweepPlan
        ``.name``, ``.axes``, ``.replicates``, ``.top_k``, ``.cells`` (with ``.key`` and the
        axis attributes), ``.config_sha256``.
    records : mapping
        ``cell_key -> CellResult.to_dict()``-like record; cells without a record are absent
        (NaN, ``-1`` for ``V``/``N``, ``''`` for ``cell_key``).
    root_seed : int
        The run's root seed (dataset attribute).

    Returns
    -------
    xarray.Dataset
        Dims ``d, delta, gamma, T, positional, weights, [table,] snr, centered, replicate,
        k, eig, position`` (``table`` where the sweep sets it). ``alpha``, ``kappa``,
        ``sigma``, ``V``, ``N`` are over the axes only
        (``alpha``/``kappa``/``sigma`` = mean over replicates, exact for deterministic
        weights); ``alpha_replicate`` etc. keep the per-replicate values (they vary only for
        ``causal_attention``).
    """

    coords = axis_coordinates(sweep_plan.axes)
    lookups = {
        axis: {v: i for i, v in enumerate(values.tolist())} for axis, values in coords.items()
    }
    n_replicates = int(sweep_plan.replicates)
    top_k = int(sweep_plan.top_k)
    grid_shape = tuple(len(values) for values in coords.values())
    cell_shape = (*grid_shape, n_replicates)
    n_eig = stored_eigenvalue_count(sweep_plan.spectrum, max(coords["d"]), top_k)
    max_t = int(max(coords["T"]))

    def nan_array(*tail: int) -> np.ndarray:
        return np.full((*cell_shape, *tail), np.nan)

    per_k = {name: nan_array(top_k) for name in TOP_K_FIELDS}
    eigenvalues = nan_array(n_eig)
    weights = nan_array(max_t)
    per_cell = {
        name: nan_array() for name in (*POOLING_FIELDS, "compute_seconds", "downstream_accuracy")
    }
    sizes = {name: np.full(cell_shape, ABSENT_INT, dtype=np.int64) for name in SIZE_FIELDS}
    cell_keys = np.full(cell_shape, "", dtype=object)

    for cell in sweep_plan.cells:
        index = (*(lookups[axis][getattr(cell, axis)] for axis in lookups), int(cell.replicate))
        record = records.get(cell.key)
        if record is None:
            continue
        cell_keys[index] = cell.key
        for name in TOP_K_FIELDS:
            values = np.asarray(record[name], dtype=np.float64)
            per_k[name][index][: values.size] = values
        spectrum = np.asarray(record["eigenvalues"], dtype=np.float64)
        eigenvalues[index][: spectrum.size] = spectrum
        effective = np.asarray(record["effective_weights"], dtype=np.float64)
        weights[index][: effective.size] = effective
        for name in per_cell:
            per_cell[name][index] = float(record[name])
        for name in SIZE_FIELDS:
            sizes[name][index] = int(record[name])

    axis_dims = tuple(coords)
    cell_dims = (*axis_dims, "replicate")
    data_vars: dict[str, tuple[tuple[str, ...], np.ndarray]] = {
        "eigenvalues": ((*cell_dims, "eig"), eigenvalues),
        **{name: ((*cell_dims, "k"), per_k[name]) for name in TOP_K_FIELDS},
        "compute_seconds": (cell_dims, per_cell["compute_seconds"]),
        "downstream_accuracy": (cell_dims, per_cell["downstream_accuracy"]),
        "effective_weights": ((*cell_dims, "position"), weights),
        "cell_key": (cell_dims, cell_keys),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # mean of all-NaN: absent
        for name in POOLING_FIELDS:
            data_vars[name] = (axis_dims, np.nanmean(per_cell[name], axis=-1))
            data_vars[f"{name}_replicate"] = (cell_dims, per_cell[name])
    for name in SIZE_FIELDS:
        data_vars[name] = (axis_dims, first_present(sizes[name]))

    return cells_view(
        data_vars,
        coords,
        replicates=n_replicates,
        top_k=top_k,
        n_eig=n_eig,
        max_t=max_t,
        attrs={
            **dataset_attrs(sweep_plan, root_seed, "attnrmt simulated cells"),
            "replicates": n_replicates,
            "top_k": top_k,
            **CELLS_VIEW_NOTES,
            "cells_present": int(np.count_nonzero(cell_keys != "")),
            "cells_total": int(cell_keys.size),
        },
    )
