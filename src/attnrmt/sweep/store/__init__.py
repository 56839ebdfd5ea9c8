"""The result store's public names in one place (compatibility facade; no code here).

The store is split along the data's lifecycle (``docs/architecture.md``, "Store"):

- :mod:`attnrmt.sweep.store.fragments` — block fragments (npz) and the reuse cache;
- :mod:`attnrmt.sweep.store.failures` — failure records of blocks;
- :mod:`attnrmt.sweep.store.grid` — coordinates, attributes, dense assembly, Zarr writing;
- :mod:`attnrmt.sweep.store.cell_table.layout` — the on-disk layout of the cell table (format 3);
- :mod:`attnrmt.sweep.store.cell_table.writer` — ``gather_cells``: append-only updates, atomic
  publish, the ``cells.zarr`` snapshot (``columns``: the columns, ``lookup``: rows of the plan);
- :mod:`attnrmt.sweep.store.cell_table.reader` — the lazy dense view and :func:`open_results`;
- :mod:`attnrmt.sweep.store.theory` — ``theory.zarr``.

Import from those modules in new code; the names below keep older imports working.
"""

from attnrmt._lazy import lazy_door

#: Where each public name lives (imported on first use, PEP 562).
_EXPORTS = {
    "ABSENT_INT": "attnrmt.contract",
    "AXES": "attnrmt.contract",
    "CACHE_DIRNAME": "attnrmt.sweep.store.fragments",
    "CELL_ATTRS": "attnrmt.sweep.store.grid",
    "FAILURES_DIRNAME": "attnrmt.sweep.store.failures",
    "FRAGMENTS_DIRNAME": "attnrmt.sweep.store.fragments",
    "FRAGMENT_FORMAT_VERSION": "attnrmt.sweep.store.fragments",
    "FRAGMENT_SUFFIX": "attnrmt.sweep.store.fragments",
    "Fragment": "attnrmt.sweep.store.fragments",
    "POOLING_FIELDS": "attnrmt.contract",
    "SALVAGE_DIRNAME": "attnrmt.sweep.store.fragments",
    "SIZE_FIELDS": "attnrmt.contract",
    "STORE_CHUNK_BYTES": "attnrmt.sweep.store.grid",
    "STORE_FORMAT_VERSION": "attnrmt.sweep.store.cell_table.layout",
    "STORE_NAMES": "attnrmt.sweep.store.cell_table.reader",
    "TOP_K_FIELDS": "attnrmt.contract",
    "VARIANTS": "attnrmt.contract",
    "axis_coordinates": "attnrmt.sweep.store.grid",
    "cell_grid_index": "attnrmt.sweep.store.grid",
    "clear_block_failures": "attnrmt.sweep.store.failures",
    "dataset_encoding": "attnrmt.sweep.store.grid",
    "decode_fragment": "attnrmt.sweep.store.fragments",
    "encode_fragment": "attnrmt.sweep.store.fragments",
    "failure_record_path": "attnrmt.sweep.store.failures",
    "fragment_paths": "attnrmt.sweep.store.fragments",
    "gather_cells": "attnrmt.sweep.store.cell_table.writer",
    "has_consolidated_metadata": "attnrmt.sweep.store.grid",
    "load_cell_columns": "attnrmt.sweep.store.fragments",
    "model_summary": "attnrmt.sweep.store.grid",
    "open_cells": "attnrmt.sweep.store.cell_table.reader",
    "open_results": "attnrmt.sweep.store.cell_table.reader",
    "publish_fragment": "attnrmt.sweep.store.fragments",
    "read_failures": "attnrmt.sweep.store.failures",
    "read_fragment": "attnrmt.sweep.store.fragments",
    "read_fragment_cell_ids": "attnrmt.sweep.store.fragments",
    "record_block_failures": "attnrmt.sweep.store.failures",
    "seed_token": "attnrmt.sweep.spec.identity",
    "theory_dataset": "attnrmt.sweep.store.theory",
    "update_cell_table": "attnrmt.sweep.store.cell_table.writer",
    "write_fragment": "attnrmt.sweep.store.fragments",
    "write_json_atomically": "attnrmt.sweep.store.atomic",
    "write_theory": "attnrmt.sweep.store.theory",
    "write_zarr_atomically": "attnrmt.sweep.store.grid",
}

__getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

__all__ = [
    "ABSENT_INT",
    "AXES",
    "CACHE_DIRNAME",
    "CELL_ATTRS",
    "FAILURES_DIRNAME",
    "FRAGMENTS_DIRNAME",
    "FRAGMENT_FORMAT_VERSION",
    "FRAGMENT_SUFFIX",
    "POOLING_FIELDS",
    "SALVAGE_DIRNAME",
    "SIZE_FIELDS",
    "STORE_CHUNK_BYTES",
    "STORE_FORMAT_VERSION",
    "STORE_NAMES",
    "TOP_K_FIELDS",
    "VARIANTS",
    "Fragment",
    "axis_coordinates",
    "cell_grid_index",
    "clear_block_failures",
    "dataset_encoding",
    "decode_fragment",
    "encode_fragment",
    "failure_record_path",
    "fragment_paths",
    "gather_cells",
    "has_consolidated_metadata",
    "load_cell_columns",
    "model_summary",
    "open_cells",
    "open_results",
    "publish_fragment",
    "read_failures",
    "read_fragment",
    "read_fragment_cell_ids",
    "record_block_failures",
    "seed_token",
    "theory_dataset",
    "update_cell_table",
    "write_fragment",
    "write_json_atomically",
    "write_theory",
    "write_zarr_atomically",
]
