"""Rows of the plan in the cell table (attnrmt.sweep.store.cell_table.lookup): the id index
and its sorted search."""

from __future__ import annotations

import numpy as np


def test_id_index_finds_ids_and_survives_digest_collisions() -> None:
    """Lookups by 64-bit digest equal an exact search; ids sharing a digest (same first 8
    key bytes and seed, other bytes different) switch the index to exact sorting."""
    from attnrmt.sweep.store.cell_table.lookup import IdIndex, cell_ids, id_parts, sorted_search

    rng = np.random.default_rng(3)
    keys = rng.integers(0, 256, size=(3000, 32), dtype=np.uint8)
    ids = cell_ids(keys.view("S32").reshape(-1), np.full(3000, 7, dtype=np.int64))
    np.testing.assert_array_equal(cell_ids(keys, np.full(3000, 7)), ids)  # raw key rows
    raw, seeds = id_parts(ids)
    np.testing.assert_array_equal(raw, keys)
    assert seeds.tolist() == [7] * 3000
    index = IdIndex(ids[:2000])
    assert not index.exact
    found = index.find(ids)  # 3000 probes: the sorted-probe search
    np.testing.assert_array_equal(found, np.r_[np.arange(2000), np.full(1000, -1)])
    colliding = keys[:2].copy()
    colliding[1, :8] = colliding[0, :8]  # same digest, different id
    pair = cell_ids(colliding.view("S32").reshape(-1), np.full(2, 7, dtype=np.int64))
    collided = IdIndex(np.concatenate([pair, ids[2:50]]))
    assert collided.exact
    np.testing.assert_array_equal(collided.find(pair), [0, 1])
    np.testing.assert_array_equal(collided.find(ids[2:50]), np.arange(2, 50))
    assert collided.find(ids[60:61]).tolist() == [-1]
    haystack = np.sort(rng.integers(0, 2**63, 5000).astype(np.uint64))
    needles = rng.integers(0, 2**63, 4000).astype(np.uint64)
    np.testing.assert_array_equal(
        sorted_search(haystack, needles), np.searchsorted(haystack, needles)
    )
