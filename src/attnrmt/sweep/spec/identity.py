"""A cell's identity, defined once (docs/architecture.md, "Cell identity"): the cell key
(sha256 of the canonical parameters, hashed per line by the plan), the seed words and
their text token, the block key. Canonical JSON is what every hash is taken of (the
cell ids the store builds of key and root seed: :mod:`attnrmt.sweep.store.cell_table.lookup`).
Pure; O(size of input).
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np

from attnrmt.contract import round_significant

#: Bump when :func:`attnrmt.model.simulate_cell` changes its output for the same inputs;
#: every cell key (and so every fragment) changes with it.
MODEL_VERSION = 1


#: Bytes of a raw cell key (sha256 digest).
KEY_DIGEST_BYTES = 32

#: Hex digits of a block key (64 bits).
BLOCK_KEY_HEX = 16


#: The first 16 bytes of a key as four little-endian uint32 seed words.
_SEED_WORDS = struct.Struct("<4I")


def canonical_number(value: Any) -> Any:
    """A number in canonical form for hashing: integral values as ``int`` (``4.0`` -> ``4``),
    others rounded to 12 significant digits; booleans stay booleans."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return value
    if isinstance(value, Integral):
        return int(value)
    rounded = round_significant(value)
    if rounded.is_integer():
        return int(rounded)
    return rounded


@functools.lru_cache(maxsize=1 << 16)
def number_json(value: int | float) -> str:
    """JSON text of :func:`canonical_number` (cached: grid values repeat across cells)."""
    return json.dumps(canonical_number(value), allow_nan=False)


def _canonical_tree(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _canonical_tree(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical_tree(item) for item in value]
    return canonical_number(value)


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, numbers by :func:`canonical_number`."""
    return json.dumps(
        _canonical_tree(value), sort_keys=True, separators=(",", ":"), allow_nan=False
    )


class _SpecJsonCache:
    """Canonical JSON of spec dicts, cached by identity (the plan shares one spec dict among
    its cells); holds a reference to each spec, so an ``id`` is not reused. Do not mutate."""

    def __init__(self, capacity: int = 4096) -> None:
        self._entries: dict[int, tuple[Any, str]] = {}
        self._capacity = capacity

    def __call__(self, spec: Any) -> str:
        entry = self._entries.get(id(spec))
        if entry is not None and entry[0] is spec:
            return entry[1]
        text = canonical_json(spec)
        if len(self._entries) >= self._capacity:
            self._entries.clear()
        self._entries[id(spec)] = (spec, text)
        return text


spec_json = _SpecJsonCache()


# The key's spectrum entry: none for the default (full) route, see :func:`cell_key`.
_SPECTRUM_JSON = {"full": "", "top": '"spectrum":"top",'}


def cell_key(
    *,
    d: int,
    delta: float,
    gamma: float,
    T: int,
    positional_spec: Mapping[str, Any],
    weights_spec: Mapping[str, Any],
    snr: float,
    centered: bool,
    replicate: int,
    top_k: int,
    spectrum: str = "full",
    table_spec: Mapping[str, Any] | None = None,
    noise: str = "independent",
) -> str:
    """sha256 hex of a cell's canonical JSON (sorted keys; specs, not names): ``T, centered,
    d, delta, gamma, model_version, [noise,] positional, replicate, snr, [spectrum,] [table,]
    top_k, weights``. ``noise``, ``spectrum`` and ``table`` enter only off their defaults
    (shared, top, a non-Gaussian law), so older cells keep their keys."""
    text = (
        key_prefix(d, delta, gamma, T, positional_spec, centered, noise)
        + key_middle(number_json(snr), number_json(replicate))
        + key_suffix(top_k, spectrum, weights_spec, table_spec)
    )
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def key_prefix(
    d: int,
    delta: float,
    gamma: float,
    T: int,
    positional_spec: Mapping[str, Any],
    centered: bool,
    noise: str = "independent",
) -> str:
    number = number_json
    return (
        f'{{"T":{number(T)},"centered":{"true" if centered else "false"},'
        f'"d":{number(d)},"delta":{number(delta)},'
        f'"gamma":{number(gamma)},"model_version":{MODEL_VERSION},{_NOISE_JSON[noise]}'
        f'"positional":{spec_json(positional_spec)},"replicate":'
    )


def key_middle(snr_json: str, replicate_json: str) -> str:
    return f'{replicate_json},"snr":{snr_json},'


def key_suffix(
    top_k: int,
    spectrum: str,
    weights_spec: Mapping[str, Any],
    table_spec: Mapping[str, Any] | None = None,
) -> str:
    return (
        f'{_SPECTRUM_JSON[spectrum]}{table_json(table_spec)}"top_k":{number_json(top_k)},'
        f'"weights":{spec_json(weights_spec)}}}'
    )


def table_json(table_spec: Mapping[str, Any] | None) -> str:
    """The key's ``table`` entry: ``""`` for none or gaussian, else ``'"table":<spec>,'``."""
    if table_spec is None or table_spec.get("kind") == "gaussian":
        return ""
    return f'"table":{spec_json(table_spec)},'


# --------------------------------------------------------------------------- shared noise

# The key's noise entry: none for the default (independent cells), see :func:`cell_key`.
_NOISE_JSON = {"independent": "", "shared": '"noise":"shared",'}


def curve_key_text(prefix: str, replicate_json: str, suffix: str) -> str:
    """Canonical JSON of a shared-noise curve: a cell key's text without ``snr``. O(specs)."""
    return f"{prefix}{replicate_json},{suffix}"


def curve_key(
    *,
    d: int,
    delta: float,
    gamma: float,
    T: int,
    positional_spec: Mapping[str, Any],
    weights_spec: Mapping[str, Any],
    centered: bool,
    replicate: int,
    top_k: int,
    spectrum: str = "full",
    table_spec: Mapping[str, Any] | None = None,
) -> str:
    """sha256 hex of one replicate's curve of a ``noise: shared`` sweep: :func:`cell_key`'s
    parameters without ``snr``; every cell of the curve takes its seed from it
    (docs/data-contract.md, "Shared-noise sweeps"). O(specs)."""
    text = curve_key_text(
        key_prefix(d, delta, gamma, T, positional_spec, centered, "shared"),
        number_json(replicate),
        key_suffix(top_k, spectrum, weights_spec, table_spec),
    )
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def block_key(root_seed: int, cell_keys: list[str]) -> str:
    """Short stable hex: sha256 over the root seed and the sorted cell keys."""
    digest = hashlib.sha256(f"attnrmt-block:{int(root_seed)}".encode("ascii"))
    for key in sorted(cell_keys):
        digest.update(b":" + key.encode("ascii"))
    return digest.hexdigest()[:BLOCK_KEY_HEX]


def block_key_of_digests(root_seed: int, key_digests: np.ndarray) -> str:
    """:func:`block_key` of raw key digests ``(m, 32)`` uint8, the same bytes hashed in one
    ``update``. O(m log m), vectorised."""
    hexed = np.frombuffer(
        binascii.hexlify(np.ascontiguousarray(key_digests).tobytes()),
        dtype=f"S{2 * KEY_DIGEST_BYTES}",
    )
    joined = np.empty((hexed.size, 2 * KEY_DIGEST_BYTES + 1), dtype=np.uint8)
    joined[:, 0] = ord(":")
    joined[:, 1:] = np.sort(hexed).view(np.uint8).reshape(hexed.size, -1)
    digest = hashlib.sha256(f"attnrmt-block:{int(root_seed)}".encode("ascii"))
    digest.update(joined.tobytes())
    return digest.hexdigest()[:BLOCK_KEY_HEX]


def line_digests(prefix: str, tails: Iterable[bytes], count: int) -> bytearray:
    """Concatenated sha256 digests of ``prefix + tail`` per tail, the prefix hashed once.
    O(count), 32 bytes per tail."""
    start = hashlib.sha256(prefix.encode("ascii"))
    digests = bytearray(count * KEY_DIGEST_BYTES)
    view = memoryview(digests)
    offset = 0
    for tail in tails:
        state = start.copy()
        state.update(tail)
        view[offset : offset + KEY_DIGEST_BYTES] = state.digest()
        offset += KEY_DIGEST_BYTES
    return digests


def seed_words(key: str, root_seed: int) -> list[int]:
    """Seed for :func:`numpy.random.default_rng`: the hex ``key``'s first 16 bytes as four
    little-endian uint32 words, then ``root_seed``. O(1)."""
    return [*_SEED_WORDS.unpack(bytes.fromhex(key[:32])), int(root_seed)]


def seed_token(seed_words: Sequence[int]) -> str:
    """Canonical text of a cell's seed words (used to match reusable results)."""
    return json.dumps([int(word) for word in seed_words], separators=(",", ":"))
