"""On-disk layout of a sweep's cell table (format 2), shared by writer and reader.

::

    <sweep>/cell_table/                 no Snakemake rule owns it (it survives reruns)
      manifest.json                     the current version; replaced atomically
      segments/<seq>-<id>/              Zarr v3 group, immutable once renamed into place
        cell_key        (n, 32) uint8   sha256 of the cell's canonical parameters
        root_seed       (n,)    int64   the run's root seed (last seed word)
        <scalar>        (n,)            alpha, kappa, sigma, V, N, compute_seconds, ...
        <top-k field>   (n, k)          top_eigenvalues, overlap_signal, ...
        <ragged>__values (m,) float64   eigenvalues, effective_weights: concatenated,
        <ragged>__start (n,) int64      cell i holds values[start[i] : start[i] + length[i]]
        <ragged>__length (n,) int64     (any length per cell: full or top spectra, any d)
        fragments.json                  stems of the fragments ingested whole
      grids/<seq>-<id>/                 Zarr v3 group, immutable: the dense view's index
        row  (d, delta, gamma, T, positional, weights, snr, centered, replicate) int64
             global row of each grid point's cell (-1: absent); rows number the
             segments' cells in manifest order
        attrs: axes, shape, replicates, top_k, identity (model specs by name and a hash
               of top_k, spectrum, model version, root seed), the dataset attributes
    <sweep>/cells.zarr/manifest.json    copy of manifest.json (rule gather_cells' output)

The table is append-only along the ``cell`` dimension: an update writes one new segment
(only the new cells) and one new grid index, then swaps ``manifest.json`` with
:func:`os.replace`. Readers read the manifest once and then only immutable directories,
so they see the old version or the new one, never a mix; a killed update leaves the
previous manifest and its directories untouched. See ``docs/data-contract.md``,
"cells.zarr" and ``docs/scaling.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Version of the on-disk layout above (format 1: a dense ``cells.zarr`` Zarr group).
STORE_FORMAT_VERSION = 2
CELL_TABLE_DIRNAME = "cell_table"
SEGMENTS_DIRNAME = "segments"
GRIDS_DIRNAME = "grids"
MANIFEST_NAME = "manifest.json"
INGESTED_NAME = "fragments.json"
#: Name of the grid-index array in a grid group.
ROW_ARRAY = "row"
#: Bytes of a cell key (sha256).
KEY_BYTES = 32
#: Suffixes of the three arrays of a ragged field.
RAGGED_SUFFIXES = ("__values", "__start", "__length")
#: Rows per chunk of the per-cell columns, and values per chunk of a ragged field's values:
#: ~1 MB chunks of float64 before compression. A column shorter than one chunk (a small
#: update's segment) is one chunk of its own length (``table_writer._Appender``).
ROW_CHUNK = 131_072
VALUE_CHUNK = 131_072
#: Bytes a chunk of the dense view may hold in memory (bounds every lazy read).
DENSE_CHUNK_BYTES = 64 * 2**20


def compressors() -> list[Any]:
    """Zarr v3 codecs of every array: Blosc zstd, byte shuffle (lossless)."""
    from zarr.codecs import BloscCodec

    return [BloscCodec(cname="zstd", clevel=5, shuffle="shuffle")]


def table_dir(sweep_dir: str | Path) -> Path:
    """``<sweep>/cell_table``."""
    return Path(sweep_dir) / CELL_TABLE_DIRNAME


def read_manifest(path: str | Path) -> dict[str, Any] | None:
    """The manifest at ``path`` (a ``manifest.json``), or None if absent or not format 2."""
    try:
        manifest = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("format_version") != STORE_FORMAT_VERSION:
        return None
    return manifest
