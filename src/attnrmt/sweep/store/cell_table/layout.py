"""On-disk layout of a sweep's cell table (format 3; ``docs/data-contract.md``, "The cell
table on disk"): ``<sweep>/cell_table.zarr``, one Zarr v3 group that
:func:`xarray.open_zarr` opens as a CF-1.10 dataset along ``cell`` (coordinates, ids,
results, provenance, spectra as CF contiguous ragged arrays, ``superseded_at_version``)
plus ``grid/<version>/``, each version's dense row index. Columns are only extended and
files replaced by a rename, so a reader of one version never sees another; ``cells.zarr``
is a hard-linked snapshot of the published version."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnrmt.contract import VARIABLE_ATTRS, sweep_axes

#: Version of the layout above (2, ``cell_table/`` segments, is refused with the command
#: that rebuilds it: ``docs/data-contract.md``, "The cell table on disk").
STORE_FORMAT_VERSION = 3
#: Root attribute holding :data:`STORE_FORMAT_VERSION` (what tells a table from format 1).
FORMAT_ATTR = "attnrmt_cell_table_format"
#: The table (no rule owns it) and its snapshot (rule ``gather_cells``' output, which
#: Snakemake deletes before rerunning the rule).
TABLE_STORE_NAME = "cell_table.zarr"
CELLS_STORE_NAME = "cells.zarr"
GRID_DIRNAME = "grid"
#: Name of the grid-index array in a grid group.
ROW_ARRAY = "row"
INGESTED_NAME = "fragments.json"
LOCK_NAME = ".cell_table.lock"
#: Format 2's directory and pointer (only to refuse it).
LEGACY_TABLE_DIRNAME = "cell_table"
LEGACY_MANIFEST_NAME = "manifest.json"

CELL_DIM = "cell"
KEY_DIM = "key_byte"
TOP_K_DIM = "k"
ROOT_SEED = "root_seed"
CELL_KEY = "cell_key"
SUPERSEDED = "superseded_at_version"
#: ``superseded_at_version`` of a row no version has superseded (int32 max).
NEVER_SUPERSEDED = 2**31 - 1


def coordinate_names(axes: Iterable[str]) -> tuple[str, ...]:
    """The grid coordinates a table column names in its ``coordinates`` attribute: the
    sweep's axes in order, then ``replicate``. O(axes)."""
    return (*sweep_axes(axes), "replicate")


#: Rows per chunk of the per-cell columns and values per chunk of a sample dimension,
#: fixed when a column is created: an update rewrites every column's partial last chunk,
#: O(new cells + columns x chunk) bytes (docs/scaling.md, "The store as one Zarr group").
ROW_CHUNK = 16_384
VALUE_CHUNK = 131_072
#: Bytes a chunk of the dense view may hold in memory (bounds every lazy read).
DENSE_CHUNK_BYTES = 64 * 2**20


@dataclass(frozen=True)
class RaggedNames:
    """Names of the CF contiguous ragged array of a per-cell array field."""

    count: str
    start: str
    sample: str


def ragged_names(field: str) -> RaggedNames:
    """``eigenvalues`` -> ``eigenvalue_count``, ``eigenvalue_start``, ``eigenvalue_sample``
    (the field's singular: its name without a final ``s``). O(1)."""
    stem = field[:-1] if field.endswith("s") else field
    return RaggedNames(f"{stem}_count", f"{stem}_start", f"{stem}_sample")


def compressors() -> list[Any]:
    """Zarr v3 codecs of every array of every store: Blosc zstd, byte shuffle (lossless),
    then Zarr's ``crc32c`` checksum of the compressed chunk (a damaged chunk fails its
    read; docs/data-contract.md, "Integrity")."""
    from zarr.codecs import BloscCodec, Crc32cCodec

    return [BloscCodec(cname="zstd", clevel=5, shuffle="shuffle"), Crc32cCodec()]


def store_dir(sweep_dir: str | os.PathLike[str]) -> Path:
    """``<sweep>/cell_table.zarr``, the table."""
    return Path(sweep_dir) / TABLE_STORE_NAME


def table_store(path: str | os.PathLike[str]) -> Path:
    """The store a path names: itself if it is a ``.zarr`` (the table or a snapshot),
    else the table of the sweep directory it is."""
    location = Path(path)
    return location if location.name.endswith(".zarr") else store_dir(location)


_TABLE_ONLY_ATTRS: dict[str, dict[str, str]] = {
    CELL_KEY: {
        "long_name": "sha256 content key of the cell, its 32 bytes (hex: bytes(row).hex())",
        "units": "1",
    },
    ROOT_SEED: {"long_name": "root seed of the run (with cell_key: the cell's id)", "units": "1"},
    SUPERSEDED: {
        "long_name": "table version from which the row is superseded: current in "
        f"version v iff v < this ({NEVER_SUPERSEDED}: never)",
        "units": "1",
    },
}


def column_attrs(name: str) -> dict[str, str]:
    """CF attributes of a table column: the contract's, or the table's own for ids,
    bookkeeping and the ragged arrays' counts and starts. O(1)."""
    if name in _TABLE_ONLY_ATTRS:
        return dict(_TABLE_ONLY_ATTRS[name])
    if name.endswith("_count") or name.endswith("_start"):
        what = "number of values" if name.endswith("_count") else "index of the first value"
        field = name.rsplit("_", 1)[0] + "s"
        return {
            "long_name": f"{what} of the cell in {ragged_names(field).sample} ({field})",
            "units": "1",
        }
    return dict(VARIABLE_ATTRS[name])


@dataclass(frozen=True)
class TableState:
    """One published version of a table: the root ``zarr.json``, parsed."""

    attrs: Mapping[str, Any]
    arrays: Mapping[str, Mapping[str, Any]]

    @property
    def version(self) -> int:
        """The version's number (1, 2, ...), compared with ``superseded_at_version``."""
        return int(self.attrs["table_version"])

    @property
    def version_id(self) -> str:
        return str(self.attrs["table_version_id"])

    @property
    def grid(self) -> str:
        """Path of the version's grid group inside ``cells.zarr``."""
        return str(self.attrs["grid_index"])

    @property
    def rows(self) -> int:
        """Rows of the table in this version (current or superseded)."""
        return int(self.arrays[CELL_KEY]["shape"][0]) if CELL_KEY in self.arrays else 0

    @property
    def environments(self) -> dict[int, str]:
        """``environment_id -> environment JSON`` of the version's cells."""
        text = str(self.attrs.get("environments", "{}"))
        return {int(k): str(v) for k, v in json.loads(text).items()}

    def length(self, name: str) -> int:
        """Length along the first dimension of array ``name`` (0 if absent)."""
        return int(self.arrays[name]["shape"][0]) if name in self.arrays else 0


def read_state(store: str | os.PathLike[str]) -> TableState | None:
    """The published version of the table ``store``; None without one (or another
    format, unreadable). One small JSON read."""
    try:
        root = json.loads((Path(store) / "zarr.json").read_text())
    except (OSError, ValueError):
        return None
    attrs = root.get("attributes", {})
    if attrs.get(FORMAT_ATTR) != STORE_FORMAT_VERSION:
        return None
    consolidated = root.get("consolidated_metadata") or {}
    return TableState(attrs=attrs, arrays=dict(consolidated.get("metadata", {})))
