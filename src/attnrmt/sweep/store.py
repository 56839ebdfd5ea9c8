"""The result store's public names in one place (compatibility facade; no code here).

The store is split along the data's lifecycle (``docs/architecture.md``, "Store"):

- :mod:`attnrmt.sweep.fragments` — block fragments (npz) and the reuse cache;
- :mod:`attnrmt.sweep.failures` — failure records of blocks;
- :mod:`attnrmt.sweep.grid` — coordinates, attributes, dense assembly, Zarr writing;
- :mod:`attnrmt.sweep.table_layout` — the on-disk layout of the cell table (format 2);
- :mod:`attnrmt.sweep.table_writer` — ``gather_cells``: append-only updates, atomic swap;
- :mod:`attnrmt.sweep.table_reader` — the lazy dense view and :func:`open_results`;
- :mod:`attnrmt.sweep.theory_store` — ``theory.zarr``.

Import from those modules in new code; the names below keep older imports working.
"""

from __future__ import annotations

from attnrmt.contract import ABSENT_INT, AXES, POOLING_FIELDS, SIZE_FIELDS, TOP_K_FIELDS, VARIANTS
from attnrmt.sweep.failures import (
    FAILURES_DIRNAME,
    clear_block_failures,
    failure_record_path,
    read_failures,
    record_block_failures,
)
from attnrmt.sweep.fragments import (
    CACHE_DIRNAME,
    FRAGMENT_FORMAT_VERSION,
    FRAGMENT_SUFFIX,
    FRAGMENTS_DIRNAME,
    SALVAGE_DIRNAME,
    Fragment,
    cached_fragment_cell_ids,
    decode_fragment,
    encode_fragment,
    finished_cell_keys,
    fragment_index,
    fragment_paths,
    load_cell_records,
    publish_fragment,
    read_fragment,
    read_fragment_cell_ids,
    seed_token,
    write_fragment,
    write_json_atomically,
)
from attnrmt.sweep.grid import (
    CELL_ATTRS,
    axis_coordinates,
    cell_grid_index,
    cells_dataset,
    dataset_encoding,
    has_consolidated_metadata,
    model_summary,
    write_zarr_atomically,
)
from attnrmt.sweep.table_layout import STORE_FORMAT_VERSION
from attnrmt.sweep.table_reader import STORE_NAMES, open_cells, open_results
from attnrmt.sweep.table_writer import gather_cells, update_cell_table
from attnrmt.sweep.theory_store import theory_dataset, write_theory

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
    "STORE_FORMAT_VERSION",
    "STORE_NAMES",
    "TOP_K_FIELDS",
    "VARIANTS",
    "Fragment",
    "axis_coordinates",
    "cached_fragment_cell_ids",
    "cell_grid_index",
    "cells_dataset",
    "clear_block_failures",
    "dataset_encoding",
    "decode_fragment",
    "encode_fragment",
    "failure_record_path",
    "finished_cell_keys",
    "fragment_index",
    "fragment_paths",
    "gather_cells",
    "has_consolidated_metadata",
    "load_cell_records",
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
