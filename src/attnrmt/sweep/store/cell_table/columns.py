"""The columns of a cell table being extended (``docs/data-contract.md``, "The cell table on
disk"): :class:`TableColumns` appends to each column in whole chunks while every
``zarr.json`` keeps the published shape, then :meth:`TableColumns.publish` writes each
array's ``zarr.json`` and last the root's (the publish). O(rows and values appended) +
O(columns)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.sweep.store.atomic import fsync_tree, write_bytes_atomically
from attnrmt.sweep.store.cell_table.layout import compressors


def _metadata_bytes(metadata: Any) -> bytes:
    from zarr.core.buffer import default_buffer_prototype

    return bytes(metadata.to_buffer_dict(default_buffer_prototype())["zarr.json"].to_bytes())


@functools.lru_cache(maxsize=64)
def _template(dtype: str, tail: tuple[int, ...], chunk: int, fill: Any) -> Any:
    """Metadata of an empty column ``(0, *tail)`` (``dtype`` ``"str"``: variable-length
    UTF-8), built in memory once per process (Zarr derives the codecs' parameters from the
    dtype, ~4 ms a call)."""
    import zarr
    from zarr.storage import MemoryStore

    return zarr.create_array(
        MemoryStore(),
        shape=(0, *tail),
        dtype=str if dtype == "str" else np.dtype(dtype),
        chunks=(chunk, *tail),
        fill_value=fill,
        compressors=compressors(),
    ).metadata


#: Rows the in-memory array a column writes through has room for (never stored).
_ROOM = 2**40


class Column:
    """Appends rows to one array from row ``length`` on in whole chunks (the first write
    completes the previous version's partial chunk); writes are queued in ``jobs`` and run
    together by :meth:`TableColumns.drain`. Memory: one chunk of buffered rows."""

    def __init__(self, store: Path, name: str, metadata: Any, jobs: list[Any]) -> None:
        self.store = store
        self.name = name
        self.published = metadata
        self.jobs = jobs
        self.length = int(metadata.shape[0])
        self.chunk = int(metadata.chunk_grid.chunk_shape[0])
        self.dtype = metadata.dtype.to_native_dtype()
        self.pending: list[np.ndarray] = []
        self.n_pending = 0
        self.written_chunks: set[int] = set()
        self._writable: Any = None

    @property
    def metadata(self) -> Any:
        """The column's metadata at its current length."""
        if self.length == self.published.shape[0]:
            return self.published
        return self.published.update_shape((self.length, *self.published.shape[1:]))

    def _array(self) -> Any:
        """The array to write through: in memory only, with room for any number of rows
        (its shape is never written; one codec pipeline for every write)."""
        if self._writable is None:
            from zarr.core.array import AsyncArray
            from zarr.storage import LocalStore, StorePath

            roomy = self.published.update_shape((_ROOM, *self.published.shape[1:]))
            self._writable = AsyncArray(roomy, StorePath(LocalStore(self.store), self.name))
        return self._writable

    def add(self, values: np.ndarray) -> None:
        values = np.asarray(values)
        if values.dtype != self.dtype:
            values = values.astype(self.dtype)
        if len(values) == 0:
            return
        self.pending.append(values)
        self.n_pending += len(values)
        end = self.length + self.n_pending
        if end // self.chunk > self.length // self.chunk:  # reaches a chunk boundary
            joined = np.concatenate(self.pending)
            cut = (end // self.chunk) * self.chunk - self.length
            self._write(joined[:cut])
            self.pending = [joined[cut:]] if cut < len(joined) else []
            self.n_pending = len(joined) - cut

    def close(self) -> None:
        """Queue the buffered rows (the new partial last chunk)."""
        if self.pending:
            self._write(np.concatenate(self.pending))
        self.pending, self.n_pending = [], 0

    def _write(self, values: np.ndarray) -> None:
        end = self.length + len(values)
        self.jobs.append((self._array(), slice(self.length, end), values))
        self.written_chunks.update(range(self.length // self.chunk, (end - 1) // self.chunk + 1))
        self.length = end

    def rewrite(self, start: int, values: np.ndarray) -> None:
        """Queue the replacement of rows ``start .. start + len(values)`` below the current
        length (their chunks rewritten whole; only ``superseded_at_version`` does this)."""
        self.jobs.append((self._array(), slice(start, start + len(values)), values))
        self.written_chunks.update(
            range(start // self.chunk, (start + len(values) - 1) // self.chunk + 1)
        )

    def chunk_files(self) -> list[Path]:
        """Files of the chunks written (those Zarr kept: an all-fill chunk is deleted)."""
        tail = "/0" * (len(self.published.shape) - 1)
        paths = (
            self.store / self.name / "c" / f"{index}{tail}" for index in sorted(self.written_chunks)
        )
        return [path for path in paths if path.is_file()]


class TableColumns:
    """The columns of one table: those of ``published`` (the root's consolidated metadata; None
    for a new table) opened at their length, new ones created at ``length`` (older rows read
    the fill value)."""

    def __init__(self, store: Path, published: Mapping[str, Mapping[str, Any]] | None) -> None:
        self.store = store
        self.published = dict(published or {})
        self.columns: dict[str, Column] = {}
        self.jobs: list[Any] = []

    def has(self, name: str) -> bool:
        return name in self.columns or name in self.published

    def column_length(self, name: str) -> int:
        """Rows (or values) of column ``name`` so far, the buffered ones included."""
        if name in self.columns:
            return self.columns[name].length + self.columns[name].n_pending
        return int(self.published[name]["shape"][0]) if name in self.published else 0

    def column(
        self,
        name: str,
        *,
        dtype: Any,
        tail: tuple[int, ...],
        chunk: int,
        dims: Sequence[str],
        fill: Any,
        attrs: Mapping[str, Any],
        length: int = 0,
    ) -> Column:
        """The column ``name``, opened or created (``length`` rows of fill) on first use."""
        if name not in self.columns:
            if name in self.published:
                from zarr.core.metadata import ArrayV3Metadata

                metadata = ArrayV3Metadata.from_dict(dict(self.published[name]))
            else:
                key = "str" if dtype is str else np.dtype(dtype).str
                metadata = dataclasses.replace(
                    _template(key, tuple(tail), int(chunk), fill),
                    attributes=dict(attrs),
                    dimension_names=tuple(dims),
                ).update_shape((int(length), *tail))
            self.columns[name] = Column(self.store, name, metadata, self.jobs)
        return self.columns[name]

    def drain(self) -> None:
        """Run the queued writes together (each column queues at most one per chunk
        boundary crossed, so no two of them touch the same chunk)."""
        if not self.jobs:
            return
        import asyncio

        from zarr.core.sync import sync

        jobs, self.jobs[:] = list(self.jobs), []

        async def run() -> None:
            await asyncio.gather(*(array.setitem(where, values) for array, where, values in jobs))

        sync(run())

    def close(self) -> None:
        """Write every column's buffered rows."""
        for column in self.columns.values():
            column.close()
        self.drain()

    def publish(self, attrs: Mapping[str, Any]) -> None:
        """Make the written chunks durable, write every changed array's ``zarr.json``, then
        replace the root ``zarr.json`` (attributes ``attrs`` and the consolidated metadata
        of every column): the publish."""
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.group import ConsolidatedMetadata, GroupMetadata
        from zarr.core.metadata import ArrayV3Metadata

        self.drain()
        _fsync_files([path for column in self.columns.values() for path in column.chunk_files()])
        merged = {
            name: ArrayV3Metadata.from_dict(dict(meta)) for name, meta in self.published.items()
        }
        metadata = dict(
            sorted({**merged, **{n: c.metadata for n, c in self.columns.items()}}.items())
        )
        for name, column in self.columns.items():
            published = self.published.get(name)
            if published is None or list(published["shape"]) != list(column.metadata.shape):
                (self.store / name).mkdir(parents=True, exist_ok=True)
                write_bytes_atomically(
                    self.store / name / "zarr.json", _metadata_bytes(column.metadata), durable=False
                )
        root = GroupMetadata(
            attributes=dict(attrs), consolidated_metadata=ConsolidatedMetadata(metadata=metadata)
        )
        payload = root.to_buffer_dict(default_buffer_prototype())["zarr.json"].to_bytes()
        write_bytes_atomically(self.store / "zarr.json", bytes(payload), durable=True)
        self.published = {name: meta.to_dict() for name, meta in metadata.items()}
        self.columns = {}


def _fsync_files(paths: Sequence[Path]) -> None:
    """fsync the chunk files an update wrote (:func:`attnrmt.sweep.store.atomic.fsync_tree`
    of each, from a few threads: the file system then commits them in fewer journal
    transactions). O(files written)."""
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(paths)))) as pool:
        list(pool.map(fsync_tree, paths))
