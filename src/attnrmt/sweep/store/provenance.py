"""Provenance columns of each cell (``docs/data-contract.md``, "Provenance"): the worker's
environment (stored once per distinct value: ``environments`` and ``environment_id``),
``peak_memory_bytes`` and ``attempt``; metadata only, never part of a cell's identity.
Cells from before provenance read :data:`~attnrmt.contract.PROVENANCE_ABSENT`. O(cells)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from attnrmt.contract import PROVENANCE_ABSENT, PROVENANCE_FIELDS

#: Record key of the environment JSON (stored deduplicated: :data:`ENVIRONMENTS_MEMBER`).
ENVIRONMENT_KEY = "environment"
#: Fragment member and segment/dataset attribute holding the distinct environments.
ENVIRONMENTS_MEMBER = "environments"
#: Record keys that are provenance, not results (never part of a cell's identity).
PROVENANCE_KEYS: frozenset[str] = frozenset({ENVIRONMENT_KEY, *PROVENANCE_FIELDS})


def environment_id(environment_json: str) -> int:
    """64-bit id of an environment JSON: the first 8 bytes of its sha256 (signed, != 0;
    ``""``, unknown, is 0). O(1)."""
    if not environment_json:
        return int(PROVENANCE_ABSENT["environment_id"])
    digest = hashlib.sha256(environment_json.encode()).digest()
    return int.from_bytes(digest[:8], "little", signed=True) or 1


# --------------------------------------------------------------------------- fragments


def encode_provenance(records: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """Fragment members of the records' provenance: ``environments`` (distinct JSON,
    first-seen order) and per cell the ``PROVENANCE_FIELDS`` (int64; missing keys read as
    ``PROVENANCE_ABSENT``). O(n)."""
    texts = [str(record.get(ENVIRONMENT_KEY, "")) for record in records]
    distinct = [text for text in dict.fromkeys(texts) if text]
    ids = {text: environment_id(text) for text in dict.fromkeys(texts)}
    members = {
        ENVIRONMENTS_MEMBER: np.asarray(distinct, dtype=np.str_).reshape(len(distinct)),
        "environment_id": np.array([ids[text] for text in texts], dtype=np.int64),
    }
    for name in PROVENANCE_FIELDS:
        if name != "environment_id":
            members[name] = np.array(
                [int(record.get(name, PROVENANCE_ABSENT[name])) for record in records],
                dtype=np.int64,
            )
    return members


def environments_of(arrays: Mapping[str, np.ndarray]) -> dict[int, str]:
    """``environment_id -> environment JSON`` of a fragment's members (``{}`` if none)."""
    if ENVIRONMENTS_MEMBER not in arrays:
        return {}
    return {environment_id(str(text)): str(text) for text in arrays[ENVIRONMENTS_MEMBER]}
