"""The columns of the cell table (attnrmt.sweep.store.cell_table.columns): appends in whole
chunks, the published shape kept until the publish.

Shown to bite (scratch edit, restored): writing each column's grown ``zarr.json`` at
every chunk write (what Zarr's ``resize``/``append`` do) showed the unpublished shape to
readers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def test_columns_append_in_whole_chunks_and_keep_the_published_shape(tmp_path: Path) -> None:
    """A column grows from its published length: the first write completes the partial
    last chunk (its prefix kept), the rest are whole chunks; until the publish, the
    published metadata (root and array ``zarr.json``) still describes the old shape, and
    reading through it gives the old values; chunks before the old partial one are never
    rewritten."""
    import zarr

    from attnrmt.sweep.store.cell_table.columns import TableColumns
    from attnrmt.sweep.store.cell_table.layout import read_state

    root = tmp_path / "t.zarr"
    root.mkdir()
    attrs = {"attnrmt_cell_table_format": 3, "table_version": 1}

    def column(columns: TableColumns) -> Any:
        return columns.column(
            "x",
            dtype=np.float64,
            tail=(),
            chunk=4,
            dims=("cell",),
            fill=np.nan,
            attrs={"long_name": "x"},
        )

    first = TableColumns(root, None)
    for part in np.array_split(np.arange(6.0), 3):
        column(first).add(part)
    first.close()
    first.publish(attrs)
    chunk0 = (root / "x" / "c" / "0").stat()
    state = read_state(root)
    assert state is not None and state.length("x") == 6
    second = TableColumns(root, state.arrays)
    grown = column(second)
    grown.add(np.arange(6.0, 11.0))
    second.close()
    assert grown.written_chunks == {1, 2}
    assert (root / "x" / "c" / "0").stat().st_mtime_ns == chunk0.st_mtime_ns
    old = zarr.open_group(str(root), mode="r", use_consolidated=True)["x"]
    assert old.shape == (6,)
    np.testing.assert_array_equal(old[:], np.arange(6.0))
    assert zarr.open_array(str(root / "x"), mode="r").shape == (6,)
    second.publish({**attrs, "table_version": 2})
    new = zarr.open_group(str(root), mode="r", use_consolidated=True)["x"]
    assert new.shape == (11,) and new.chunks == (4,)
    np.testing.assert_array_equal(new[:], np.arange(11.0))
