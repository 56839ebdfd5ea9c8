"""Writer of the cell table, rule ``gather_cells`` (``docs/data-contract.md``, "The cell
table on disk"; ``docs/scaling.md``, "The result store at 10⁶ cells"). An update under
the sweep's table lock, ``G`` grid points, ``n`` new cells in ``f`` new fragments: finds
each plan cell's row (carried over by coordinates, else looked up by id: O(G log G)),
appends the new fragments' cells in batches (O(f) reads, O(n + values)), marks rows the
plan no longer uses superseded, writes the grid index and publishes (each array's
``zarr.json``, then the root's), and hard-links ``cells.zarr`` to it. Memory O(G) plus
one batch and one chunk per column; values copied bit for bit."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from attnrmt.contract import ABSENT_INT, PROVENANCE_ABSENT, PROVENANCE_FIELDS, TOP_K_FIELDS
from attnrmt.sweep.store.atomic import atomic_path, is_temporary, remove_stale_temporaries
from attnrmt.sweep.store.cell_table.columns import TableColumns
from attnrmt.sweep.store.cell_table.layout import (
    CELL_DIM,
    CELL_KEY,
    FORMAT_ATTR,
    GRID_DIRNAME,
    INGESTED_NAME,
    KEY_DIM,
    LEGACY_TABLE_DIRNAME,
    NEVER_SUPERSEDED,
    ROOT_SEED,
    ROW_ARRAY,
    ROW_CHUNK,
    STORE_FORMAT_VERSION,
    SUPERSEDED,
    TOP_K_DIM,
    VALUE_CHUNK,
    TableState,
    column_attrs,
    compressors,
    coordinate_names,
    ragged_names,
    read_state,
    store_dir,
)
from attnrmt.sweep.store.cell_table.lookup import (
    IdIndex,
    carried_rows,
    cell_ids,
    grid_identity,
    id_parts,
    key_bytes,
    plan_grid,
    plan_ids,
    renamed_models,
    root_seeds_of,
    row_points,
)
from attnrmt.sweep.store.cell_table.reader import version_arrays
from attnrmt.sweep.store.fragments import fragment_paths, member, read_fragment_arrays, take_cells
from attnrmt.sweep.store.grid import axis_coordinates, dataset_attrs, log_line
from attnrmt.sweep.store.guard import copy_run_record, table_lock
from attnrmt.sweep.store.integrity import write_digest
from attnrmt.sweep.store.provenance import ENVIRONMENTS_MEMBER, environments_of

#: Members of a fragment that are not result fields.
_FRAGMENT_META = ("format_version", "cell_key", "cell_seed", "computed", ENVIRONMENTS_MEMBER)
#: Grid versions kept besides the current one (readers that opened them keep working).
KEEP_OLD_GRIDS = 2
#: Bytes of fragment members a :class:`TableWriter` holds before it turns them into
#: columns (besides the rows of :data:`~attnrmt.sweep.store.cell_table.layout.ROW_CHUNK`).
PENDING_BYTES = 8 * 2**20
#: Fragments read before their cells are looked up together.
BATCH_FRAGMENTS = 256


# --------------------------------------------------------------------------- new rows


def _fill_of(name: str, dtype: np.dtype) -> Any:
    """Fill value of a column (what a row written before the column existed reads as)."""
    if name in PROVENANCE_FIELDS:
        return PROVENANCE_ABSENT[name]
    if name == SUPERSEDED:
        return NEVER_SUPERSEDED
    if name.endswith(("_count", "_start")):  # a ragged field new to the table: no values
        return 0
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "b":
        return False
    if dtype.kind in "TUO":
        return ""
    return ABSENT_INT if dtype.kind == "i" and name not in (CELL_KEY, ROOT_SEED) else 0


class TableWriter:
    """Appends fragments' cells as new rows: scalars, NaN-padded top-k fields, other arrays
    as CF ragged arrays, grid coordinates, ids, provenance, ``superseded_at_version``.
    Fragments are held until ``ROW_CHUNK`` rows or :data:`PENDING_BYTES`, then turned into
    columns (O(rows + values)). Memory: that much plus one chunk per column."""

    def __init__(
        self,
        columns: TableColumns,
        first_row: int,
        top_k: int,
        coords: Mapping[str, np.ndarray],
        shape: tuple[int, ...],
    ) -> None:
        self.columns = columns
        self.first_row = int(first_row)
        self.top_k = int(top_k)
        self.coords = coords
        self.shape = shape
        self.rows = 0
        self.ingested: list[str] = []
        self.environments: dict[int, str] = {}
        self.pending: list[tuple[np.ndarray, Mapping[str, np.ndarray], np.ndarray]] = []
        self.pending_rows = 0
        self.pending_bytes = 0

    def _add(
        self,
        name: str,
        values: np.ndarray,
        *,
        dims: tuple[str, ...] = (CELL_DIM,),
        chunk: int | None = None,
        sample_dimension: str | None = None,
        length: int | None = None,
    ) -> None:
        """Append ``values`` to column ``name``, created on first use."""
        values = np.asarray(values)
        if not self.columns.has(name):
            attrs = column_attrs(name)
            coordinates = coordinate_names(self.coords)
            if dims[0] == CELL_DIM and name not in coordinates:
                attrs["coordinates"] = " ".join(coordinates)
            if sample_dimension is not None:
                attrs["sample_dimension"] = sample_dimension
            dtype = str if values.dtype.kind in "TUO" else values.dtype
        else:
            attrs, dtype = {}, values.dtype
        self.columns.column(
            name,
            dtype=dtype,
            tail=tuple(values.shape[1:]),
            chunk=ROW_CHUNK if chunk is None else chunk,
            dims=dims,
            fill=_fill_of(name, np.dtype(values.dtype)),
            attrs=attrs,
            length=self.first_row if length is None else length,
        ).add(values)

    def append(
        self,
        ids: np.ndarray,
        arrays: Mapping[str, np.ndarray],
        take: np.ndarray,
        points: np.ndarray,
    ) -> None:
        """Append rows ``take`` (sorted, distinct) of a fragment: its ``S40`` ids, decoded
        npz members ``arrays`` and the flat grid position of each row taken (``points``).
        O(1) when every row is taken, else O(fragment)."""
        n_taken = int(take.size)
        if n_taken == 0:
            return
        if n_taken != ids.size:
            arrays = take_cells([arrays], [(0, row) for row in take.tolist()])
            ids = ids[take]
        self.environments.update(environments_of(arrays))
        self.pending.append((ids, arrays, np.asarray(points, dtype=np.int64)))
        self.rows += n_taken
        self.pending_rows += n_taken
        self.pending_bytes += sum(np.asarray(member).nbytes for member in arrays.values())
        if self.pending_rows >= ROW_CHUNK or self.pending_bytes >= PENDING_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Turn the held fragments into column data. O(rows + values held)."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        self.pending_rows = self.pending_bytes = 0
        members = [arrays for _, arrays, _ in pending]
        keys, root_seeds = id_parts(np.concatenate([ids for ids, _, _ in pending]))
        points = np.concatenate([points for _, _, points in pending])
        index = np.unravel_index(points, self.shape)
        for axis, along in zip(self.coords, index, strict=False):
            self._add(axis, self.coords[axis][along])
        self._add("replicate", index[-1].astype(np.int64))
        self._add(CELL_KEY, keys, dims=(CELL_DIM, KEY_DIM))
        self._add(ROOT_SEED, root_seeds)
        for name in PROVENANCE_FIELDS:  # old fragments: filled, so columns stay aligned
            self._add(name, np.concatenate([member(a, name) for a in members]).astype(np.int64))
        for name in _result_members(members):
            if not name.endswith("__values"):
                self._add(name, np.concatenate([arrays[name] for arrays in members]))
                continue
            field = name[: -len("__values")]
            flat, starts, lengths = _joined_ragged(members, field)
            if field in TOP_K_FIELDS:
                self._add(
                    field,
                    _padded_rows(flat, starts, lengths, self.top_k),
                    dims=(CELL_DIM, TOP_K_DIM),
                )
                continue
            names = ragged_names(field)
            base = self.columns.column_length(field)
            self._add(names.count, lengths.astype(np.int64), sample_dimension=names.sample)
            self._add(
                names.start, base + np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
            )
            self._add(
                field,
                _ragged_take(flat, starts, lengths),
                dims=(names.sample,),
                chunk=VALUE_CHUNK,
                length=base,
            )
        self._add(SUPERSEDED, np.full(keys.shape[0], NEVER_SUPERSEDED, dtype=np.int32))
        self.columns.drain()

    def close(self) -> None:
        """Write what is held and every column's partial last chunk."""
        self._flush()
        self.columns.close()


def _result_members(members: Sequence[Mapping[str, np.ndarray]]) -> list[str]:
    """Names of the result members (scalars and ``__values``) the fragments share (other
    result fields than the first's: an error, the columns would not align)."""

    def names(arrays: Mapping[str, np.ndarray]) -> list[str]:
        return [
            name
            for name in arrays
            if name not in _FRAGMENT_META
            and name not in PROVENANCE_FIELDS
            and not name.endswith("__offsets")
        ]

    first = names(members[0])
    for arrays in members[1:]:
        if set(names(arrays)) != set(first):
            raise ValueError(
                f"fragments with different result fields: {sorted(first)} "
                f"and {sorted(names(arrays))}"
            )
    return first


def _joined_ragged(
    members: Sequence[Mapping[str, np.ndarray]], field: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(values, start, length)`` of a ragged field over several fragments: their
    ``__values`` concatenated, each cell's start in that and its length. O(cells + values)."""
    flats = [arrays[f"{field}__values"] for arrays in members]
    offsets = [arrays[f"{field}__offsets"] for arrays in members]
    sizes = np.array([flat.size for flat in flats], dtype=np.int64)
    cells = np.array([offset.size - 1 for offset in offsets], dtype=np.int64)
    joined = np.concatenate(offsets).astype(np.int64, copy=False)
    last = np.cumsum(cells + 1) - 1  # each fragment's closing offset in ``joined``
    lengths = np.delete(np.diff(joined), last[:-1])
    starts = np.delete(joined, last) + np.repeat(np.cumsum(sizes) - sizes, cells)
    return np.concatenate(flats).astype(np.float64, copy=False), starts, lengths


def _padded_rows(
    flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int
) -> np.ndarray:
    """``(n, width)`` rows of a ragged array, NaN-padded (top-k fields). O(n width)."""
    out = np.full((starts.size, width), np.nan)
    columns = np.arange(width)
    present = columns < np.minimum(lengths, width)[:, None]
    out[present] = flat[(starts[:, None] + columns)[present]]
    return out


def _ragged_take(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``flat[start:start+length]`` for each row (vectorised). O(values)."""
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0)
    if (
        starts.size
        and starts[0] == 0
        and total == flat.size
        and np.all(starts[1:] == np.cumsum(lengths)[:-1])
    ):
        return flat
    row_offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return flat[np.arange(total) + row_offsets]


# --------------------------------------------------------------------------- the table


def read_table_ids(store: Path, state: TableState) -> np.ndarray:
    """``S40`` ids of every row of the published version, in row order. O(rows)."""
    arrays = version_arrays(str(store), state.version_id)
    return cell_ids(arrays[CELL_KEY][:], arrays[ROOT_SEED][:])


def read_table_ids_at(store: Path, state: TableState, rows: np.ndarray) -> np.ndarray:
    """``S40`` ids of the given rows (reads the chunks holding them). O(rows)."""
    arrays = version_arrays(str(store), state.version_id)
    return cell_ids(arrays[CELL_KEY].oindex[rows, :], arrays[ROOT_SEED].oindex[rows])


def read_grid(store: Path, state: TableState | None) -> tuple[dict[str, Any], np.ndarray] | None:
    """The published version's grid attributes and ``row`` index (None if unreadable)."""
    import zarr

    if state is None:
        return None
    try:
        group = zarr.open_group(str(store / state.grid), mode="r")
        attrs: dict[str, Any] = dict(group.attrs)
        rows = np.asarray(cast(Any, group[ROW_ARRAY])[:]).reshape([int(n) for n in attrs["shape"]])
    except (OSError, KeyError, ValueError, FileNotFoundError):
        return None
    return attrs, rows


def _ingested_and_superseded(store: Path, state: TableState | None) -> tuple[set[str], Any]:
    """Of the published version: the fragments whose every cell is a current row, and
    ``superseded_at_version`` of every row (int32). O(rows)."""
    if state is None:
        return set(), np.zeros(0, dtype=np.int32)
    ingested: set[str] = set()
    with contextlib.suppress(OSError, ValueError):
        ingested = set(json.loads((store / state.grid / INGESTED_NAME).read_text()))
    if SUPERSEDED not in state.arrays:
        return ingested, np.full(state.rows, NEVER_SUPERSEDED, dtype=np.int32)
    column = version_arrays(str(store), state.version_id)[SUPERSEDED][:]
    return ingested, np.asarray(column, dtype=np.int32)


def _plan_rows(
    store: Path,
    state: TableState | None,
    current: np.ndarray,
    grid: tuple[dict[str, Any], np.ndarray] | None,
    sweep_plan: Any,
    positions: np.ndarray,
    shape: tuple[int, ...],
    root_seed: int,
    identity: Mapping[str, Any],
) -> tuple[np.ndarray, bool]:
    """Current row of each plan cell at its grid point (``-1``: none), and whether some
    plan cells are in the table at another grid point (a renamed model: every fragment is
    read again to store them at their new coordinates). O(grid points), or O(rows) ids
    read when rows cannot be carried over."""
    if state is None or state.rows == 0:
        return np.full(positions.size, -1, dtype=np.int64), False
    carried = carried_rows(
        grid,
        sweep_plan,
        identity,
        positions,
        lambda indices: plan_ids(sweep_plan, indices, root_seed),
        lambda rows: read_table_ids_at(store, state, rows),
    )
    if carried is not None:
        return carried, renamed_models(grid[0].get("identity") if grid else None, identity)
    current_rows = np.flatnonzero(current)
    found = IdIndex(read_table_ids(store, state)[current_rows]).find(
        plan_ids(sweep_plan, None, root_seed)
    )
    plan_rows = np.where(found >= 0, current_rows[np.maximum(found, 0)], -1)
    points = (
        row_points(grid, sweep_plan, shape, state.rows)
        if grid is not None
        else np.full(state.rows, -1, dtype=np.int64)
    )
    misplaced = (plan_rows >= 0) & (points[np.maximum(plan_rows, 0)] != positions)
    plan_rows[misplaced] = -1
    return plan_rows.astype(np.int64), bool(misplaced.any())


def update_cell_table(
    sweep_plan: Any,
    fragment_files: Iterable[str | os.PathLike[str]],
    sweep_dir: str | os.PathLike[str],
    root_seed: int,
    snapshot: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Append the plan's missing cells to ``<sweep_dir>/cell_table.zarr`` (from
    ``fragment_files``, then the sweep's other fragments while cells are missing), publish
    a new version and link ``snapshot`` (``cells.zarr``) to it; the version's summary
    (``cells_present``, ``cells_total``, ``rows``, ``table_version``). Cost: module
    docstring."""
    sweep = Path(sweep_dir)
    store = store_dir(sweep)
    with table_lock(sweep):
        state = _update(sweep_plan, fragment_files, sweep, store, root_seed)
        if snapshot is not None:
            link_snapshot(store, state, Path(snapshot))
            write_digest(snapshot)
            # a format-2 table (attnrmt 0.1), replaced by this one: readers refused it
            shutil.rmtree(sweep / LEGACY_TABLE_DIRNAME, ignore_errors=True)
    return {
        "table_version": state.version,
        "rows": state.rows,
        "cells_present": int(state.attrs["cells_present"]),
        "cells_total": int(state.attrs["cells_total"]),
    }


def _update(
    sweep_plan: Any,
    fragment_files: Iterable[str | os.PathLike[str]],
    sweep: Path,
    store: Path,
    root_seed: int,
) -> TableState:
    """:func:`update_cell_table` under the lock: the published state."""
    state = read_state(store)
    if state is None:
        _clear_unpublished(store)
    _remove_leftovers(store, state)
    positions, shape = plan_grid(sweep_plan)
    identity = grid_identity(sweep_plan, root_seed)
    version = (state.version if state else 0) + 1
    ingested, superseded_at = _ingested_and_superseded(store, state)
    current = superseded_at >= version  # > the published version (dead writers' too)
    grid = read_grid(store, state)
    plan_rows, reread = _plan_rows(
        store, state, current, grid, sweep_plan, positions, shape, root_seed, identity
    )
    missing = np.flatnonzero(plan_rows < 0)
    # the missing cells' ids (distinct: their parameters differ), their grid points
    # and the row of each in the update once a fragment provided it
    wanted_index = IdIndex(
        plan_ids(sweep_plan, None if missing.size == positions.size else missing, root_seed)
    )
    new_row = np.full(missing.size, -1, dtype=np.int64)
    previous = set() if reread else ingested
    done = set(previous)
    first_row = state.rows if state else 0
    columns = TableColumns(store, state.arrays if state else None)
    writer = TableWriter(
        columns, first_row, int(sweep_plan.top_k), axis_coordinates(sweep_plan.axes), shape
    )
    args = (done, wanted_index, new_row, positions[missing], writer)
    if ingest_fragments([Path(path) for path in fragment_files], True, *args) < missing.size:
        ingest_fragments(fragment_paths(sweep), False, *args)  # cells still missing
    writer.close()
    plan_rows[missing] = np.where(new_row >= 0, new_row + first_row, -1)
    used = np.zeros(first_row, dtype=bool)
    used[plan_rows[(plan_rows >= 0) & (plan_rows < first_row)]] = True
    superseded = current & ~used
    rows = np.full(int(np.prod(shape)), -1, dtype=np.int64)
    rows[positions] = plan_rows
    attrs = grid_attrs(sweep_plan, root_seed, rows, shape, identity)
    _mark_superseded(columns, superseded_at, version, superseded)
    unchanged = grid is not None and grid[0] == attrs and np.array_equal(grid[1].ravel(), rows)
    if state is not None and writer.rows == 0 and not superseded.any() and unchanged:
        return state  # nothing changed: readers keep the current version
    kept = previous if not superseded.any() else set()
    environments = {**(state.environments if state else {}), **writer.environments}
    published = _publish(
        store, columns, version, rows, attrs, sorted(kept | set(writer.ingested)), environments
    )
    _collect_garbage(store, published)
    return published


def _mark_superseded(
    columns: TableColumns, superseded_at: np.ndarray, version: int, superseded: np.ndarray
) -> None:
    """Set ``superseded_at_version`` of the ``superseded`` rows to ``version`` and back to
    NEVER_SUPERSEDED where a killed writer set it; only the chunks holding them rewritten."""
    wanted = np.where(superseded_at >= version, NEVER_SUPERSEDED, superseded_at)
    wanted[superseded] = version
    changed = np.flatnonzero(wanted != superseded_at)
    if changed.size == 0:
        return
    column = columns.column(
        SUPERSEDED,
        dtype=np.int32,
        tail=(),
        chunk=ROW_CHUNK,
        dims=(CELL_DIM,),
        fill=NEVER_SUPERSEDED,
        attrs={},
    )
    for chunk in np.unique(changed // column.chunk).tolist():
        lo = chunk * column.chunk
        column.rewrite(lo, wanted[lo : min(lo + column.chunk, wanted.size)])
    columns.drain()


def grid_attrs(
    sweep_plan: Any,
    root_seed: int,
    rows: np.ndarray,
    shape: tuple[int, ...],
    identity: Mapping[str, Any],
) -> dict[str, Any]:
    """Attributes of a grid version: axes, sizes, identity, the view's dataset attributes."""
    return json.loads(
        json.dumps(
            {
                "format_version": STORE_FORMAT_VERSION,
                "shape": list(shape),
                "identity": dict(identity),
                "axes": {axis: list(values) for axis, values in sweep_plan.axes.items()},
                "replicates": int(sweep_plan.replicates),
                "top_k": int(sweep_plan.top_k),
                "dataset_attrs": {
                    **dataset_attrs(sweep_plan, root_seed, "attnrmt simulated cells"),
                    "cells_present": int(np.count_nonzero(rows >= 0)),
                    "cells_total": int(rows.size),
                },
            },
            default=str,
        )
    )


def _publish(
    store: Path,
    columns: TableColumns,
    version: int,
    rows: np.ndarray,
    attrs: Mapping[str, Any],
    ingested: Sequence[str],
    environments: Mapping[int, str],
) -> TableState:
    """Write the grid version (immutable, renamed into place), then publish the columns'
    metadata and the root ``zarr.json`` (CF global attributes, the sweep's, the
    bookkeeping); the new state."""
    import zarr

    from attnrmt import __version__

    version_id = f"{version:06d}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    with atomic_path(store / GRID_DIRNAME / version_id) as tmp:
        group = zarr.open_group(str(tmp), mode="w", zarr_format=3)
        group.create_array(
            ROW_ARRAY,
            data=rows,
            chunks=(min(rows.size, 1 << 20) or 1,),
            compressors=compressors(),
            fill_value=-1,
            dimension_names=("grid_point",),
        )
        group.attrs.update(dict(attrs))
        (tmp / INGESTED_NAME).write_text(json.dumps(list(ingested)))
    sweep = attrs["dataset_attrs"]
    coordinates = ", ".join(repr(name) for name in coordinate_names(attrs["axes"]))
    columns.publish(
        {
            "Conventions": "CF-1.10",
            "title": "attnrmt cell table: one row per stored cell",
            "source": f"attnrmt {__version__}",
            **{k: v for k, v in sweep.items() if k not in ("title", "Conventions")},
            "replicates": int(attrs["replicates"]),
            "top_k": int(attrs["top_k"]),
            "environments": json.dumps(
                {str(k): v for k, v in environments.items()}, sort_keys=True
            ),
            FORMAT_ATTR: STORE_FORMAT_VERSION,
            "table_version": int(version),
            "table_version_id": version_id,
            "grid_index": f"{GRID_DIRNAME}/{version_id}",
            "current_rows": "rows with superseded_at_version > table_version (each grid "
            "point x replicate at most once)",
            "dense_grid": f"current.set_index(cell=[{coordinates}]).unstack('cell')",
            "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
    )
    published = read_state(store)
    if published is None or published.version_id != version_id:
        raise RuntimeError(f"{store}: version {version_id} was not published")
    return published


def _clear_unpublished(store: Path) -> None:
    """Clear a table directory with no published version (a writer killed before its
    first publish); one of a newer format is an error (never overwritten)."""
    with contextlib.suppress(OSError, ValueError):
        newer = json.loads((store / "zarr.json").read_text()).get("attributes", {})
        if int(newer.get(FORMAT_ATTR, 0)) > STORE_FORMAT_VERSION:
            raise ValueError(
                f"{store}: a cell table of format {newer[FORMAT_ATTR]}, newer "
                f"than this attnrmt's ({STORE_FORMAT_VERSION}): upgrade attnrmt"
            )
    if store.is_dir():
        shutil.rmtree(store)


def link_snapshot(store: Path, state: TableState, target: Path) -> None:
    """Replace ``target`` (``cells.zarr``) by hard links to the published version ``state`` of
    ``store`` (copies where links fail), built beside it and renamed over it. O(files)."""
    with atomic_path(target, durable=False, replace_tree=True) as tmp:
        tmp.mkdir()
        _link(store / "zarr.json", tmp / "zarr.json")
        for name in (*state.arrays, state.grid):
            for directory, _, files in os.walk(store / name):
                inside = tmp / Path(directory).relative_to(store)
                inside.mkdir(parents=True, exist_ok=True)
                for file in files:
                    if not file.endswith(".partial") and not is_temporary(Path(file)):
                        _link(Path(directory) / file, inside / file)


def _link(source: Path, link: Path) -> None:
    try:
        os.link(source, link)
    except OSError:  # no hard links here (another file system, a limit): a copy
        shutil.copy2(source, link)


def _remove_leftovers(store: Path, state: TableState | None) -> None:
    """Remove what a killed writer left and no published version uses: temporaries (ours
    and Zarr's ``*.partial``), unpublished columns and grid versions. O(entries)."""
    if not store.is_dir():
        return
    remove_stale_temporaries(store, recursive=False)
    arrays = set(state.arrays) if state else set()
    for entry in store.iterdir():
        if entry.is_dir() and entry.name != GRID_DIRNAME and entry.name not in arrays:
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.name.endswith(".partial") or is_temporary(entry):
            entry.unlink(missing_ok=True)
    for name in arrays:
        for pattern in ("*.partial", "c/*.partial", "c/*/*.partial"):
            for path in (store / name).glob(pattern):
                path.unlink(missing_ok=True)
    grids = store / GRID_DIRNAME
    published = state.version if state else 0
    for path in grids.iterdir() if grids.is_dir() else []:
        number = path.name.split("-", 1)[0]
        if is_temporary(path) or (number.isdigit() and int(number) > published):
            shutil.rmtree(path, ignore_errors=True)


def _collect_garbage(store: Path, state: TableState) -> None:
    """Drop grid versions older than the :data:`KEEP_OLD_GRIDS` previous ones."""
    grids = sorted(
        path for path in (store / GRID_DIRNAME).iterdir() if not path.name.startswith(".")
    )
    current = Path(state.grid).name
    old = [path for path in grids if path.name < current]
    for path in old[: max(0, len(old) - KEEP_OLD_GRIDS)]:
        shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------- fragments


def take_batch(
    batch: Sequence[tuple[str, bool, Mapping[str, np.ndarray]]],
    wanted_index: IdIndex,
    new_row: np.ndarray,
    wanted_points: np.ndarray,
    writer: TableWriter,
) -> int:
    """Append to ``writer`` the wanted cells (first occurrences) of a batch of fragments
    ``(name, is_given, arrays)``, updating ``new_row`` (row of each wanted id among the new
    rows, -1: not found); the number appended. O(batch cells x log wanted)."""
    if not batch:
        return 0
    counts = np.array([arrays["cell_key"].size for _, _, arrays in batch], dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    ids = cell_ids(
        key_bytes(np.concatenate([arrays["cell_key"] for _, _, arrays in batch]).tolist()),
        root_seeds_of(np.concatenate([arrays["cell_seed"] for _, _, arrays in batch]).tolist()),
    )
    position = wanted_index.find(ids)
    hit = position >= 0
    hit[hit] = new_row[position[hit]] < 0
    rows = np.flatnonzero(hit)
    rows = np.sort(rows[np.unique(position[rows], return_index=True)[1]])
    new_row[position[rows]] = writer.rows + np.arange(rows.size)
    points = wanted_points[position[rows]]
    cuts = np.searchsorted(rows, bounds).tolist()
    starts = bounds.tolist()
    for index, (name, is_given, arrays) in enumerate(batch):
        writer.append(
            ids[starts[index] : starts[index + 1]],
            arrays,
            rows[cuts[index] : cuts[index + 1]] - starts[index],
            points[cuts[index] : cuts[index + 1]],
        )
        if is_given:
            writer.ingested.append(name)
    return int(rows.size)


def ingest_fragments(
    paths: Iterable[str | os.PathLike[str]],
    given: bool,
    done: set[str],
    wanted_index: IdIndex,
    new_row: np.ndarray,
    wanted_points: np.ndarray,
    writer: TableWriter,
) -> int:
    """Read the fragments ``paths`` not in ``done`` (added to it) in batches and append
    their wanted cells until every wanted cell is found; the number appended. O(cells read)."""
    n_taken = int(np.count_nonzero(new_row >= 0))
    start = n_taken
    batch: list[tuple[str, bool, dict[str, np.ndarray]]] = []
    batch_bytes = batch_cells = 0
    for path in paths:
        name = os.path.basename(path)
        if name in done or n_taken == new_row.size:
            if given:  # its cells are plan cells, all current once every wanted one is
                writer.ingested.append(name)
            continue
        done.add(name)  # its hard link in cache/ holds the same cells
        arrays = read_fragment_arrays(path)
        if arrays is None or "cell_key" not in arrays:
            continue
        batch.append((name, given, arrays))
        batch_bytes += sum(member.nbytes for member in arrays.values())
        batch_cells += arrays["cell_key"].size
        if (
            len(batch) >= BATCH_FRAGMENTS
            or batch_bytes >= PENDING_BYTES
            or batch_cells >= ROW_CHUNK
        ):
            n_taken += take_batch(batch, wanted_index, new_row, wanted_points, writer)
            batch, batch_bytes, batch_cells = [], 0, 0
    n_taken += take_batch(batch, wanted_index, new_row, wanted_points, writer)
    return n_taken - start


# --------------------------------------------------------------------------- rules


def gather_cells(
    sweep_plan: Any,
    fragment_files: Iterable[str | os.PathLike[str]],
    output_path: str | os.PathLike[str],
    root_seed: int,
    log_path: str | os.PathLike[str] | None = None,
) -> Path:
    """Rule ``gather_cells``: update the sweep's table and replace ``output_path``
    (``cells.zarr``, which Snakemake owns) by its snapshot; ``output_path``."""
    started = time.perf_counter()
    files = [Path(path) for path in fragment_files]
    target = Path(output_path)
    summary = update_cell_table(sweep_plan, files, target.parent, root_seed, snapshot=target)
    copy_run_record(target.parent)  # the run's owner, also known without its record
    log_line(
        log_path,
        f"{target}: {summary['cells_present']}/{summary['cells_total']} cells, "
        f"{summary['rows']} rows, table version {summary['table_version']}, "
        f"{len(files)} fragments, in {time.perf_counter() - started:.2f} s",
    )
    return target


def store_finished_cells(run_plan: Any, results_dir: str | os.PathLike[str]) -> list[str]:
    """The Snakefile's ``onerror``: store every sweep's finished cells in a table version
    (:func:`attnrmt.open_results` shows them); one line per sweep, never raising. O(reads)."""
    lines = []
    for name, sweep_plan in run_plan.sweeps.items():
        sweep_dir = Path(results_dir) / name
        if not fragment_paths(sweep_dir):
            continue
        try:
            summary = update_cell_table(sweep_plan, [], sweep_dir, run_plan.seed)
        except Exception as exc:  # reported, never raised: the run has failed already
            lines.append(f"{name}: finished cells not stored ({exc!r})")
            continue
        lines.append(
            f"{name}: {summary['cells_present']}/{summary['cells_total']} "
            f"finished cells stored (open_results shows them)"
        )
    return lines
