"""Storage: block fragments (npz), ``cells.zarr``, ``theory.zarr`` and :func:`open_results`.

Fragments
---------
``results/<run>/<sweep>/fragments/<block>.npz`` holds the results of one block's cells,
written atomically (temporary file in the same directory, then :func:`os.replace`), never
pickled. Per cell: ``cell_key`` (sha256 of the canonical parameters), ``cell_seed`` (the
seed words as JSON), ``computed`` (True when computed by the job that wrote the fragment,
False when copied from an earlier fragment), and every :class:`attnrmt.model.CellResult`
field: scalars as ``(n,)`` arrays, arrays ragged as ``<field>__values`` (concatenated) and
``<field>__offsets`` (``(n+1,)``). A block whose cells partly failed leaves its finished
cells in ``<sweep>/salvage/<block>.npz`` (same format; never a Snakemake output) so that a
rerun reuses them, and what failed in ``<sweep>/failures/<block>.json`` (cell key, seed,
parameters, error; removed when the block later succeeds), which ``attnrmt plan`` lists.

Snakemake deletes a job's output before rerunning it (forced rerun, changed rule code),
so every fragment also gets a hard link (a copy where links are unsupported) in
``<sweep>/cache/``, which no rule owns: finished cells survive any rerun and are reused
bit for bit. Remove a sweep's directory to recompute it from scratch.

Stores
------
``cells.zarr`` and ``theory.zarr`` follow the data contract of ``pipeline.md`` (Zarr v3,
explicit encodings and chunks, NaN fill for floats, consolidated metadata written once at
the end); each is written to a temporary directory beside the target and renamed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
import uuid
import warnings
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.contract import (
    ABSENT_INT,
    AXES,
    POOLING_FIELDS,
    SIZE_FIELDS,
    TOP_K_FIELDS,
    VARIANTS,
)

FRAGMENT_FORMAT_VERSION = 1
FRAGMENTS_DIRNAME = "fragments"
SALVAGE_DIRNAME = "salvage"
CACHE_DIRNAME = "cache"
FAILURES_DIRNAME = "failures"
FRAGMENT_SUFFIX = ".npz"

"""Value of integer variables (``V``, ``N``) at grid points whose cell is absent."""

CELL_ATTRS: dict[str, dict[str, str]] = {
    "d": {"long_name": "dimension d", "units": "1"},
    "delta": {"long_name": "nominal ratio delta = d/V", "units": "1"},
    "gamma": {"long_name": "nominal ratio gamma = d/N", "units": "1"},
    "T": {"long_name": "sequence length T", "units": "1"},
    "positional": {"long_name": "positional sign model (named in the config)"},
    "weights": {"long_name": "pooling weights (named in the config or built-in)"},
    "snr": {"long_name": "signal strength ||mu||^2", "units": "1"},
    "centered": {"long_name": "pooled vectors centred before forming S"},
    "replicate": {"long_name": "replicate index"},
    "k": {"long_name": "top-k index (0 = largest)"},
    "eig": {"long_name": "eigenvalue index (ascending; NaN-padded beyond d)"},
    "position": {"long_name": "sequence position t (0-based; NaN-padded beyond T)"},
    "variant": {"long_name": "theory variant of the spike strength theta"},
    "eigenvalues": {"long_name": "eigenvalues of S, ascending", "units": "S"},
    "top_eigenvalues": {"long_name": "largest k eigenvalues of S, descending", "units": "S"},
    "overlap_signal": {"long_name": "squared overlap of eigenvector k of S with mu/||mu||"},
    "overlap_class_mean": {
        "long_name": "squared overlap of eigenvector k of S with the class-mean difference"
    },
    "overlap_table_mean": {
        "long_name": "squared overlap of eigenvector k of S with the table mean"
    },
    "pop_top_eigenvalues": {
        "long_name": "largest k eigenvalues of Sigma_E (population given the table)",
        "units": "S",
    },
    "pop_overlap_signal": {
        "long_name": "squared overlap of eigenvector k of Sigma_E with mu/||mu||"
    },
    "alpha": {"long_name": "alpha = w^T R w (mean over replicates)", "units": "1"},
    "kappa": {"long_name": "kappa = ||w||^2 (mean over replicates)", "units": "1"},
    "sigma": {"long_name": "sigma = sum_t w_t (mean over replicates)", "units": "1"},
    "alpha_replicate": {"long_name": "alpha = w^T R w of each replicate", "units": "1"},
    "kappa_replicate": {"long_name": "kappa = ||w||^2 of each replicate", "units": "1"},
    "sigma_replicate": {"long_name": "sigma = sum_t w_t of each replicate", "units": "1"},
    "V": {"long_name": "realised vocabulary size", "units": "1", "absent_value": "-1"},
    "N": {"long_name": "realised number of samples", "units": "1", "absent_value": "-1"},
    "compute_seconds": {"long_name": "wall time of the cell", "units": "s"},
    "effective_weights": {
        "long_name": "pooling weights used (measured mean for causal_attention)",
        "units": "1",
    },
    "downstream_accuracy": {
        "long_name": "test accuracy of the ridge readout of the label y (NaN if no label)",
        "units": "1",
    },
    "cell_key": {"long_name": "sha256 content key of the cell ('' if absent)"},
}


# =========================================================================== fragments


@dataclass(frozen=True)
class Fragment:
    """Decoded content of one fragment file.

    Attributes
    ----------
    cell_keys : list of str
    cell_seeds : list of str
        Seed words of each cell as JSON (``"[w0, w1, ...]"``).
    computed : ndarray of bool
        Whether each cell was computed by the job that wrote the fragment (else reused).
    records : list of dict
        One ``CellResult.to_dict()``-like dict per cell (arrays as float64 ndarrays).
    """

    cell_keys: list[str]
    cell_seeds: list[str]
    computed: np.ndarray
    records: list[dict[str, Any]]


def seed_token(seed_words: Sequence[int]) -> str:
    """Canonical text of a cell's seed words (used to match reusable results)."""
    return json.dumps([int(word) for word in seed_words], separators=(",", ":"))


def encode_fragment(
    cell_keys: Sequence[str],
    cell_seeds: Sequence[str],
    computed: Sequence[bool],
    records: Sequence[Mapping[str, Any]],
) -> dict[str, np.ndarray]:
    """Arrays of a fragment (see the module docstring) from per-cell records."""
    n_cells = len(cell_keys)
    if not (len(cell_seeds) == len(computed) == len(records) == n_cells):
        raise ValueError("cell_keys, cell_seeds, computed and records differ in length")
    arrays: dict[str, np.ndarray] = {
        "format_version": np.asarray(FRAGMENT_FORMAT_VERSION, dtype=np.int64),
        "cell_key": np.asarray(list(cell_keys), dtype=np.str_).reshape(n_cells),
        "cell_seed": np.asarray(list(cell_seeds), dtype=np.str_).reshape(n_cells),
        "computed": np.asarray(list(computed), dtype=bool).reshape(n_cells),
    }
    if n_cells == 0:
        return arrays
    for name in records[0]:
        values = [np.asarray(record[name]) for record in records]
        if values[0].ndim == 0:
            dtype = np.int64 if np.issubdtype(values[0].dtype, np.integer) else np.float64
            arrays[name] = np.array([value.item() for value in values], dtype=dtype)
        else:
            lengths = [value.size for value in values]
            arrays[f"{name}__values"] = np.concatenate(
                [value.astype(np.float64, copy=False).ravel() for value in values]
            )
            arrays[f"{name}__offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(
                np.int64
            )
    return arrays


def decode_fragment(arrays: Mapping[str, np.ndarray]) -> Fragment:
    """Inverse of :func:`encode_fragment`."""
    keys = [str(key) for key in arrays["cell_key"]]
    n_cells = len(keys)
    records: list[dict[str, Any]] = [{} for _ in range(n_cells)]
    for name in arrays:
        if name in ("format_version", "cell_key", "cell_seed", "computed"):
            continue
        if name.endswith("__offsets"):
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


def write_fragment(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write fragment arrays atomically: temp file in the same directory, fsync, replace.

    A crash at any point leaves either no file at ``path`` or a complete one; temporary
    files start with ``.`` and end with ``.tmp`` and are never read as fragments.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as handle:
            np.savez(handle, allow_pickle=False, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def _link_or_copy(source: Path, target: Path) -> None:
    """Atomically make ``target`` a hard link of ``source`` (a copy where links fail)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError, OSError):
            tmp.unlink()


def publish_fragment(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write a block's fragment so that its cells outlive Snakemake's output handling.

    The arrays go atomically to ``<sweep>/cache/<block>.npz`` first, which no rule owns,
    then that file is hard-linked (atomically; copied where links fail) to
    ``<sweep>/fragments/<block>.npz``. A visible fragment therefore always has its cache
    entry, so a rerun of the job (forced, code-triggered, or marked incomplete because
    Snakemake was killed between the write and its bookkeeping), which deletes the output
    first, reuses every cell instead of recomputing it.
    """
    fragment = Path(path)
    cached = write_fragment(fragment.parent.parent / CACHE_DIRNAME / fragment.name, arrays)
    _link_or_copy(cached, fragment)
    return fragment


def read_fragment(path: str | os.PathLike[str]) -> Fragment:
    """Read a fragment written by :func:`write_fragment`."""
    with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as npz:
        return decode_fragment({name: npz[name] for name in npz.files})


def read_fragment_cell_ids(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``(cell_key, cell_seed)`` of each cell of a fragment, reading only those members."""
    with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as npz:
        return list(zip(npz["cell_key"].tolist(), npz["cell_seed"].tolist(), strict=True))


def fragment_paths(sweep_dir: str | os.PathLike[str]) -> list[Path]:
    """All complete fragment files of a sweep (current, orphaned, salvaged, cached), sorted."""
    sweep = Path(sweep_dir)
    found: list[Path] = []
    for sub in (FRAGMENTS_DIRNAME, SALVAGE_DIRNAME, CACHE_DIRNAME):
        directory = sweep / sub
        if directory.is_dir():
            found.extend(
                path
                for path in directory.iterdir()
                if path.name.endswith(FRAGMENT_SUFFIX) and not path.name.startswith(".")
            )
    return sorted(found)


_CELL_ID_CACHE: dict[tuple[int, int, int, int], list[tuple[str, str]]] = {}
_CELL_ID_CACHE_LOCK = threading.Lock()


def cached_fragment_cell_ids(path: Path) -> list[tuple[str, str]]:
    """:func:`read_fragment_cell_ids`, cached in-process by (device, inode, size, mtime).

    Block jobs run as threads of one Snakemake process, so each fragment's keys are read
    once per run instead of once per job (thousands of fragments stay cheap: a ``stat``
    each; a fragment and its hard link in ``cache/`` are read once). Fragments are replaced
    atomically, so a changed file has a new inode/mtime.
    """
    stat = path.stat()
    signature = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _CELL_ID_CACHE_LOCK:
        cached = _CELL_ID_CACHE.get(signature)
    if cached is not None:
        return cached
    ids = read_fragment_cell_ids(path)
    with _CELL_ID_CACHE_LOCK:
        _CELL_ID_CACHE[signature] = ids
    return ids


def fragment_index(
    sweep_dir: str | os.PathLike[str], exclude: Iterable[str | os.PathLike[str]] = ()
) -> dict[tuple[str, str], Path]:
    """Map ``(cell_key, cell_seed)`` to a fragment holding that finished cell.

    Unreadable files (e.g. truncated by a crash of an older writer) are skipped.
    """
    excluded = {Path(path).resolve() for path in exclude}
    index: dict[tuple[str, str], Path] = {}
    for path in fragment_paths(Path(sweep_dir).resolve()):
        if path in excluded:
            continue
        try:
            ids = cached_fragment_cell_ids(path)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            continue
        for cell_id in ids:
            index.setdefault(cell_id, path)
    return index


def failure_record_path(fragment_path: str | os.PathLike[str]) -> Path:
    """``<sweep>/failures/<block>.json`` of the block whose fragment is ``fragment_path``."""
    fragment = Path(fragment_path)
    return fragment.parent.parent / FAILURES_DIRNAME / f"{fragment.stem}.json"


def record_block_failures(
    fragment_path: str | os.PathLike[str], failed_cells: Sequence[Mapping[str, Any]]
) -> Path:
    """Write what failed in a block (atomically), replacing an earlier record.

    ``failed_cells``: one mapping per failed cell, ``{"key", "seed", "params", "error"}``
    (JSON-serialisable). The record also names the block and the time of the attempt.
    """
    path = failure_record_path(fragment_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "block": Path(fragment_path).stem,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cells": [dict(cell) for cell in failed_cells],
    }
    write_json_atomically(path, payload)
    return path


def write_json_atomically(path: str | os.PathLike[str], payload: Mapping[str, Any]) -> Path:
    """Write JSON to ``path`` via a temporary file in the same directory and ``os.replace``
    (readers see the old file or the new one, never a partial one)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(json.dumps(dict(payload), indent=1, sort_keys=True, default=str))
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def clear_block_failures(fragment_path: str | os.PathLike[str]) -> None:
    """Remove a block's failure record (it has now succeeded)."""
    with contextlib.suppress(FileNotFoundError):
        failure_record_path(fragment_path).unlink()


def read_failures(sweep_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every failed cell recorded under ``sweep_dir``, each with its ``block`` and ``time``.

    Sorted by block, then cell key. Unreadable records are skipped.
    """
    directory = Path(sweep_dir) / FAILURES_DIRNAME
    failed: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for cell in record.get("cells", []):
            failed.append({**cell, "block": record.get("block"), "time": record.get("time")})
    return sorted(failed, key=lambda cell: (str(cell["block"]), str(cell.get("key"))))


def finished_cell_keys(sweep_dir: str | os.PathLike[str]) -> set[str]:
    """Keys of every cell with a finished result in a sweep's fragments (any block)."""
    return {key for key, _ in fragment_index(sweep_dir)}


def load_cell_records(
    wanted: Iterable[tuple[str, str]], index: Mapping[tuple[str, str], Path]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Records of the wanted ``(cell_key, cell_seed)`` found in ``index`` (each file read once)."""
    by_path: dict[Path, set[tuple[str, str]]] = {}
    for cell_id in wanted:
        if cell_id in index:
            by_path.setdefault(index[cell_id], set()).add(cell_id)
    records: dict[tuple[str, str], dict[str, Any]] = {}
    for path, ids in by_path.items():
        try:
            fragment = read_fragment(path)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            continue
        for key, seed, record in zip(
            fragment.cell_keys, fragment.cell_seeds, fragment.records, strict=True
        ):
            if (key, seed) in ids:
                records[(key, seed)] = record
    return records


# =========================================================================== grids


def _coordinate_values(axis: str, values: Sequence[Any]) -> np.ndarray:
    if axis in ("positional", "weights"):
        return np.asarray([str(value) for value in values], dtype=object)
    if axis == "centered":
        return np.asarray([bool(value) for value in values], dtype=bool)
    if axis in ("d", "T"):
        return np.asarray([int(value) for value in values], dtype=np.int64)
    return np.asarray([float(value) for value in values], dtype=np.float64)


def axis_coordinates(axes: Mapping[str, Sequence[Any]]) -> dict[str, np.ndarray]:
    """Coordinate arrays of the sweep axes, in the fixed axis order."""
    return {axis: _coordinate_values(axis, axes[axis]) for axis in AXES}


def _lookup(values: Sequence[Any]) -> dict[Any, int]:
    return {value: index for index, value in enumerate(values)}


def cell_grid_index(cell: Any, lookups: Mapping[str, Mapping[Any, int]]) -> tuple[int, ...]:
    """Index of a plan cell in the sweep grid (axes in order, then replicate)."""
    return (*(lookups[axis][getattr(cell, axis)] for axis in AXES), int(cell.replicate))


def _attrs_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _dataset_attrs(sweep_plan: Any, root_seed: int, title: str) -> dict[str, Any]:
    from attnrmt import __version__

    return {
        "title": title,
        "sweep": str(sweep_plan.name),
        "attnrmt_version": str(__version__),
        "config_sha256": str(sweep_plan.config_sha256),
        "root_seed": int(root_seed),
        "model_summary": _attrs_json(model_summary(sweep_plan)),
        "Conventions": "CF-1.10 (attributes only)",
    }


def model_summary(sweep_plan: Any) -> dict[str, dict[str, Any]]:
    """Canonical specs of the named models a sweep uses: ``{positional: {...}, weights: {...}}``."""
    if getattr(sweep_plan, "models", None):
        return {kind: dict(specs) for kind, specs in sweep_plan.models.items()}
    summary: dict[str, dict[str, Any]] = {"positional": {}, "weights": {}}
    for cell in sweep_plan.cells:
        summary["positional"].setdefault(str(cell.positional), dict(cell.positional_spec))
        summary["weights"].setdefault(str(cell.weights), dict(cell.weights_spec))
    return summary


def _float_encoding(chunks: tuple[int, ...]) -> dict[str, Any]:
    return {"_FillValue": np.nan, "chunks": chunks}


def _chunks_for(dims: Sequence[str], sizes: Mapping[str, int]) -> tuple[int, ...]:
    """One chunk per point of the slow axes (d .. weights), whole along the rest."""
    slow = {"d", "delta", "gamma", "T", "positional", "weights"}
    return tuple(1 if dim in slow else max(1, sizes[dim]) for dim in dims)


# =========================================================================== cells.zarr


def cells_dataset(
    sweep_plan: Any,
    records: Mapping[str, Mapping[str, Any]],
    root_seed: int,
) -> Any:
    """Assemble a sweep's cell results into the ``cells.zarr`` dataset (data contract).

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
        Dims ``d, delta, gamma, T, positional, weights, snr, centered, replicate, k, eig,
        position``. ``alpha``, ``kappa``, ``sigma``, ``V``, ``N`` are over the axes only
        (``alpha``/``kappa``/``sigma`` = mean over replicates, exact for deterministic
        weights); ``alpha_replicate`` etc. keep the per-replicate values (they vary only for
        ``causal_attention``).
    """
    import xarray as xr

    coords = axis_coordinates(sweep_plan.axes)
    lookups = {axis: _lookup(sweep_plan.axes[axis]) for axis in AXES}
    n_replicates = int(sweep_plan.replicates)
    top_k = int(sweep_plan.top_k)
    grid_shape = tuple(len(coords[axis]) for axis in AXES)
    cell_shape = (*grid_shape, n_replicates)
    max_d = int(max(coords["d"]))
    max_t = int(max(coords["T"]))

    def nan_array(*tail: int) -> np.ndarray:
        return np.full((*cell_shape, *tail), np.nan)

    per_k = {name: nan_array(top_k) for name in TOP_K_FIELDS}
    eigenvalues = nan_array(max_d)
    weights = nan_array(max_t)
    per_cell = {
        name: nan_array()
        for name in (*POOLING_FIELDS, "compute_seconds", "downstream_accuracy")
    }
    sizes = {name: np.full(cell_shape, ABSENT_INT, dtype=np.int64) for name in SIZE_FIELDS}
    cell_keys = np.full(cell_shape, "", dtype=object)

    for cell in sweep_plan.cells:
        index = cell_grid_index(cell, lookups)
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

    axis_dims = AXES
    cell_dims = (*AXES, "replicate")
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
        data_vars[name] = (axis_dims, _first_present(sizes[name]))

    dataset = xr.Dataset(
        data_vars={
            name: xr.Variable(dims, values, attrs=CELL_ATTRS.get(name, {}))
            for name, (dims, values) in data_vars.items()
        },
        coords={
            **{axis: (axis, values, CELL_ATTRS[axis]) for axis, values in coords.items()},
            "replicate": ("replicate", np.arange(n_replicates), CELL_ATTRS["replicate"]),
            "k": ("k", np.arange(top_k), CELL_ATTRS["k"]),
            "eig": ("eig", np.arange(max_d), CELL_ATTRS["eig"]),
            "position": ("position", np.arange(max_t), CELL_ATTRS["position"]),
        },
        attrs={
            **_dataset_attrs(sweep_plan, root_seed, "attnrmt simulated cells"),
            "replicates": n_replicates,
            "top_k": top_k,
            "pooling_scalars": (
                "alpha, kappa, sigma are over the axes only: the mean over replicates of "
                "alpha_replicate, kappa_replicate, sigma_replicate (identical across "
                "replicates except for causal_attention, whose weights are measured)"
            ),
            "absent_cells": (
                "grid points without a result: NaN (floats), -1 (V, N), '' (cell_key)"
            ),
            "cells_present": int(np.count_nonzero(cell_keys != "")),
            "cells_total": int(cell_keys.size),
        },
    )
    return dataset


def _first_present(values: np.ndarray) -> np.ndarray:
    """Collapse the replicate axis of an int array, ignoring ``ABSENT_INT`` entries."""
    present = np.where(values == ABSENT_INT, np.iinfo(np.int64).min, values)
    collapsed = present.max(axis=-1)
    return np.where(collapsed == np.iinfo(np.int64).min, ABSENT_INT, collapsed)


def dataset_encoding(dataset: Any) -> dict[str, dict[str, Any]]:
    """Explicit Zarr encodings: NaN fill for floats, chunks whole along fast dims."""
    sizes = dict(dataset.sizes)
    encoding: dict[str, dict[str, Any]] = {}
    for name, variable in dataset.variables.items():
        dims = variable.dims
        chunks = _chunks_for(dims, sizes) if name not in dataset.dims else (sizes[name],)
        if np.issubdtype(variable.dtype, np.floating):
            encoding[name] = _float_encoding(chunks)
        else:
            encoding[name] = {"chunks": chunks}
    return encoding


def write_zarr_atomically(dataset: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``dataset`` as Zarr v3 to a temporary sibling, consolidate once, rename to ``path``.

    Any existing store at ``path`` is replaced (only the owning rule writes it).
    """
    import zarr

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        dataset.to_zarr(
            tmp,
            mode="w",
            zarr_format=3,
            consolidated=False,
            encoding=dataset_encoding(dataset),
        )
        with warnings.catch_warnings():
            # Zarr 3 warns that consolidated metadata is not yet in the v3 spec; we write it
            # deliberately (one read of the metadata for every open) and xarray reads it.
            warnings.filterwarnings(
                "ignore", message="Consolidated metadata", category=UserWarning
            )
            zarr.consolidate_metadata(str(tmp))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def gather_cells(
    sweep_plan: Any,
    fragment_files: Iterable[str | os.PathLike[str]],
    output_path: str | os.PathLike[str],
    root_seed: int,
    log_path: str | os.PathLike[str] | None = None,
) -> Path:
    """Assemble a sweep's block fragments into ``cells.zarr`` (rule ``gather_cells``).

    Parameters
    ----------
    sweep_plan : SweepPlan
        The sweep's plan.
    fragment_files : iterable of path
        The fragments of the sweep's current blocks.
    output_path : path
        ``results/<run>/<sweep>/cells.zarr``.
    root_seed : int
        The run's root seed.
    log_path : path, optional
        Log file (one summary line).

    Returns
    -------
    pathlib.Path
        ``output_path``.
    """
    started = time.perf_counter()
    records: dict[str, dict[str, Any]] = {}
    n_fragments = 0
    for path in fragment_files:
        fragment = read_fragment(path)
        n_fragments += 1
        for key, record in zip(fragment.cell_keys, fragment.records, strict=True):
            records.setdefault(key, record)
    dataset = cells_dataset(sweep_plan, records, root_seed)
    target = write_zarr_atomically(dataset, output_path)
    _log_line(
        log_path,
        f"{target}: {dataset.attrs['cells_present']}/{dataset.attrs['cells_total']} cells "
        f"from {n_fragments} fragments in {time.perf_counter() - started:.2f} s",
    )
    return target


def _log_line(log_path: str | os.PathLike[str] | None, line: str) -> None:
    if log_path is None:
        return
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as handle:
        handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


# =========================================================================== theory.zarr


def theory_dataset(sweep_plan: Any, root_seed: int) -> Any:
    """Theory predictions on a sweep's axes (no replicates), both variants (``theory.zarr``).

    Ratios are the *effective* ``delta = d/V`` and ``gamma = d/N`` of the realised sizes
    (:func:`attnrmt.model.realised_sizes`), so theory and simulation share them at finite
    d. ``alpha``, ``kappa``, ``sigma`` come from the deterministic weights
    (:func:`attnrmt.model.pooling_weights`; ``causal_attention`` uses its limit
    ``causal_limit(tau)``). Eigenvalue-like quantities are in units of S (times kappa).
    """
    import xarray as xr

    from attnrmt.model import (
        pooling_scalars,
        pooling_weights,
        positional_correlation,
        realised_sizes,
    )
    from attnrmt.theory import bulk_atom, bulk_edges, mean_spike, spike

    coords = axis_coordinates(sweep_plan.axes)
    positional_specs = {(c.positional, int(c.T)): c.positional_spec for c in sweep_plan.cells}
    weights_specs = {(c.weights, int(c.T)): c.weights_spec for c in sweep_plan.cells}
    shape = tuple(len(coords[axis]) for axis in AXES)

    def along(axis: str, values: np.ndarray) -> np.ndarray:
        view = [1] * len(AXES)
        view[AXES.index(axis)] = -1
        return np.broadcast_to(np.asarray(values).reshape(view), shape)

    # effective ratios on (d, delta, gamma)
    delta_eff = np.empty(shape[:3])
    gamma_eff = np.empty(shape[:3])
    for i, d in enumerate(coords["d"]):
        for j, delta in enumerate(coords["delta"]):
            for m, gamma in enumerate(coords["gamma"]):
                V, N = realised_sizes(int(d), float(delta), float(gamma))
                delta_eff[i, j, m] = d / V
                gamma_eff[i, j, m] = d / N
    # pooling scalars on (T, positional, weights)
    scalars = np.empty((*shape[3:6], 3))
    for i, T in enumerate(coords["T"]):
        for j, positional in enumerate(coords["positional"]):
            R = positional_correlation(positional_specs[(positional, int(T))], int(T))
            for m, weights_name in enumerate(coords["weights"]):
                w = pooling_weights(weights_specs[(weights_name, int(T))], int(T), R)
                scalars[i, j, m] = pooling_scalars(w, R)
    full = (*shape[:3], 1, 1, 1, 1, 1)
    delta = np.broadcast_to(delta_eff.reshape(full), shape)
    gamma = np.broadcast_to(gamma_eff.reshape(full), shape)
    mid = (1, 1, 1, *shape[3:6], 1, 1)
    alpha = np.broadcast_to(scalars[..., 0].reshape(mid), shape)
    kappa = np.broadcast_to(scalars[..., 1].reshape(mid), shape)
    sigma = np.broadcast_to(scalars[..., 2].reshape(mid), shape)
    snr = along("snr", coords["snr"].astype(np.float64))
    centered = along("centered", coords["centered"])

    lower, upper = bulk_edges(delta, gamma)
    atom = np.broadcast_to(bulk_atom(delta, gamma), shape)
    per_variant: dict[str, list[np.ndarray]] = {}
    for variant in VARIANTS:
        prediction = spike(delta, gamma, snr, alpha, kappa, variant=variant)
        fields = {
            "bulk_lower_edge": kappa * np.asarray(lower),
            "bulk_upper_edge": kappa * np.asarray(upper),
            "bulk_atom": atom,
            "pop_outlier": prediction.population_outlier,
            "sample_outlier": prediction.sample_outlier,
            "pop_overlap_signal": prediction.population_overlap,
            "sample_overlap_signal": prediction.sample_overlap,
            "threshold_snr_population": prediction.threshold_snr_population,
            "threshold_snr_sample": prediction.threshold_snr_sample,
            "theta": prediction.theta,
        }
        for name, values in fields.items():
            per_variant.setdefault(name, []).append(
                np.broadcast_to(np.asarray(values, dtype=np.float64), shape)
            )
    mean = mean_spike(delta, gamma, sigma, kappa)
    uncentred = ~centered

    def where_uncentred(values: Any) -> np.ndarray:
        return np.where(uncentred, np.broadcast_to(np.asarray(values, float), shape), np.nan)

    theory_attrs = {
        "bulk_lower_edge": {"long_name": "left edge of the bulk of S", "units": "S"},
        "bulk_upper_edge": {"long_name": "right edge of the bulk of S", "units": "S"},
        "bulk_atom": {"long_name": "mass of the bulk's atom at 0", "units": "1"},
        "pop_outlier": {
            "long_name": "population outlier of Sigma_E (NaN below threshold)",
            "units": "S",
        },
        "sample_outlier": {"long_name": "sample outlier of S (NaN below threshold)", "units": "S"},
        "pop_overlap_signal": {"long_name": "squared overlap of population eigvec with u"},
        "sample_overlap_signal": {"long_name": "squared overlap of sample eigvec with u"},
        "threshold_snr_population": {"long_name": "snr at the population BBP threshold"},
        "threshold_snr_sample": {"long_name": "snr at the sample BBP threshold"},
        "theta": {"long_name": "signal spike strength theta", "units": "kappa"},
        "alpha": {"long_name": "alpha = w^T R w of the deterministic weights", "units": "1"},
        "kappa": {"long_name": "kappa = ||w||^2 of the deterministic weights", "units": "1"},
        "sigma": {"long_name": "sigma = sum_t w_t of the deterministic weights", "units": "1"},
        "delta_effective": {"long_name": "effective ratio d/V", "units": "1"},
        "gamma_effective": {"long_name": "effective ratio d/N", "units": "1"},
        "mean_spike_outlier": {
            "long_name": "sample outlier of the uncentred mean spike (NaN where centred)",
            "units": "S",
        },
        "mean_spike_pop_outlier": {
            "long_name": "population outlier of the uncentred mean spike (NaN where centred)",
            "units": "S",
        },
        "mean_spike_overlap": {
            "long_name": "squared overlap of the sample eigvec with mbar (NaN where centred)"
        },
    }
    variant_dims = (*AXES, "variant")
    data_vars: dict[str, tuple[tuple[str, ...], np.ndarray]] = {
        name: (variant_dims, np.stack(values, axis=-1)) for name, values in per_variant.items()
    }
    data_vars.update(
        {
            "alpha": (AXES[3:6], scalars[..., 0]),
            "kappa": (AXES[3:6], scalars[..., 1]),
            "sigma": (AXES[3:6], scalars[..., 2]),
            "delta_effective": (AXES[:3], delta_eff),
            "gamma_effective": (AXES[:3], gamma_eff),
            "mean_spike_outlier": (AXES, where_uncentred(mean.sample_outlier)),
            "mean_spike_pop_outlier": (AXES, where_uncentred(mean.population_outlier)),
            "mean_spike_overlap": (AXES, where_uncentred(mean.sample_overlap)),
        }
    )
    return xr.Dataset(
        data_vars={
            name: xr.Variable(dims, values, attrs=theory_attrs.get(name, {}))
            for name, (dims, values) in data_vars.items()
        },
        coords={
            **{axis: (axis, values, CELL_ATTRS[axis]) for axis, values in coords.items()},
            "variant": ("variant", np.asarray(VARIANTS, dtype=object), CELL_ATTRS["variant"]),
        },
        attrs={
            **_dataset_attrs(sweep_plan, root_seed, "attnrmt theory predictions"),
            "ratios": (
                "effective delta = d/V, gamma = d/N with V = 2 round(d/(2 delta_nominal)), "
                "N = round(d/gamma_nominal); coordinates delta, gamma are the nominal values"
            ),
            "pooling_scalars": (
                "alpha, kappa, sigma of the deterministic weights; causal_attention uses its "
                "deterministic limit causal_limit(tau)"
            ),
            "units": "eigenvalue-like quantities in units of S (kappa included)",
        },
    )


def write_theory(
    sweep_plan: Any,
    output_path: str | os.PathLike[str],
    root_seed: int,
    log_path: str | os.PathLike[str] | None = None,
) -> Path:
    """Compute and write a sweep's ``theory.zarr`` (rule ``theory``)."""
    started = time.perf_counter()
    target = write_zarr_atomically(theory_dataset(sweep_plan, root_seed), output_path)
    _log_line(log_path, f"{target}: written in {time.perf_counter() - started:.2f} s")
    return target


# =========================================================================== reading


STORE_NAMES = ("cells", "theory", "analysis")


def open_results(run_dir: str | os.PathLike[str]) -> Any:
    """Open ``results/<run>`` as an :class:`xarray.DataTree`.

    One group per sweep (a subdirectory holding ``cells.zarr``, ``theory.zarr`` or
    ``analysis.zarr``), with children ``cells``, ``theory`` and, when present,
    ``analysis``. Variables are loaded lazily (Dask arrays).
    """
    import xarray as xr

    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"run_dir={str(run_dir)!r}: no such directory")
    groups: dict[str, Any] = {"/": xr.Dataset(attrs={"run_dir": str(root)})}
    for sweep_dir in sorted(path for path in root.iterdir() if path.is_dir()):
        for name in STORE_NAMES:
            path = sweep_dir / f"{name}.zarr"
            if path.is_dir():
                groups[f"/{sweep_dir.name}/{name}"] = xr.open_zarr(
                    path, consolidated=has_consolidated_metadata(path)
                )
    return xr.DataTree.from_dict(groups)


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
