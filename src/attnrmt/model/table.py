"""The embedding table ``E`` and its class means (docs/model.md, "Embedding table",
"Spikes", "Table laws").

``embeddings`` is (V, d), row ``v`` is ``e_v`` (the model's ``E`` transposed, so that
gathering tokens reads contiguous rows); tokens ``0 .. V/2 - 1`` have class +1, the rest
-1; the signal direction is ``u = e_1`` for every law."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnrmt.model.table_laws import (
    AUXILIARY_KINDS,
    apply_covariance,
    apply_table_law,
    covariance_spectrum,
    load_file_table,
    validate_table,
)

Covariance = tuple[np.ndarray, np.ndarray | None]


@dataclass(frozen=True, eq=False)
class EmbeddingTable:
    """One draw of the table (docs/model.md, "Embedding table") with its class means
    (``table_mean`` ``mbar``, ``class_mean_difference`` ``Dlt``; docs/model.md, "Spikes"),
    ``token_class`` ``s_v``, ``signal_direction`` ``u = e_1``, and for the top route's
    warm start a lower-precision copy ``rough_embeddings`` (else None) with its largest
    magnitude ``rough_max_abs`` (inf after an overflow, NaN without a copy)."""

    embeddings: np.ndarray
    token_class: np.ndarray
    signal_direction: np.ndarray
    table_mean: np.ndarray
    class_mean_difference: np.ndarray
    rough_embeddings: np.ndarray | None = None
    rough_max_abs: float = float("nan")

    @property
    def vocabulary_size(self) -> int:
        """``V``."""
        return int(self.embeddings.shape[0])

    @property
    def dimension(self) -> int:
        """``d``."""
        return int(self.embeddings.shape[1])


def realised_sizes(d: int, delta: float, gamma: float) -> tuple[int, int]:
    """``V = 2 round(d / (2 delta))`` and ``N = round(d / gamma)`` (Python's ``round``;
    docs/model.md, "Sizes and ratios"); unchecked (:func:`attnrmt.model.simulate_cell`
    checks). O(1)."""
    return 2 * round(d / (2 * delta)), round(d / gamma)


def class_means(embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mbar, Dlt)`` of a table whose first half is class +1 (docs/model.md, "Spikes")."""
    half = embeddings.shape[0] // 2
    mean_plus = embeddings[:half].mean(axis=0)
    mean_minus = embeddings[half:].mean(axis=0)
    return 0.5 * (mean_plus + mean_minus), 0.5 * (mean_plus - mean_minus)


# The table is drawn in a fixed number of row blocks, each from its own child generator,
# so the numbers do not depend on how many threads fill them.
TABLE_BLOCKS_PER_CLASS = 2


def child_seeds(rng: np.random.Generator, n: int) -> list[np.random.SeedSequence]:
    """``rng``'s seed sequence spawned into ``n`` children (TypeError for a seedless
    generator). O(n)."""
    seed_seq = rng.bit_generator.seed_seq
    if not isinstance(seed_seq, np.random.SeedSequence):
        raise TypeError(f"rng's seed sequence {seed_seq!r} cannot spawn child seeds")
    return seed_seq.spawn(n)


def helper_threads() -> int:
    """Threads for the embarrassingly parallel fills: at most 2, the CPUs this process may
    use and ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` when set."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        available = os.cpu_count() or 1
    limits = [2, available]
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 0:
            limits.append(int(value))
    return max(1, min(limits))


def row_blocks(size: int, K: int) -> list[tuple[int, int]]:
    """The row blocks ``(start, stop)`` of a table of ``K`` classes of ``size`` rows:
    ``TABLE_BLOCKS_PER_CLASS`` a class, class by class (docs/model.md, "Table laws",
    random streams). O(K)."""
    edges = np.linspace(0, size, TABLE_BLOCKS_PER_CLASS + 1).round().astype(int)
    within = [(start, stop) for start, stop in itertools.pairwise(edges) if stop > start]
    return [(start + k * size, stop + k * size) for k in range(K) for start, stop in within]


def in_threads(work: Callable[[int], Any], count: int) -> list[Any]:
    """``[work(i) for i in range(count)]`` on up to :func:`helper_threads` threads."""
    threads = min(helper_threads(), count)
    if threads <= 1:
        return [work(index) for index in range(count)]
    with ThreadPoolExecutor(threads) as executor:
        return list(executor.map(work, range(count)))


# Rows a chunk of the fused fill (:func:`_fill_rows_with_rough_copy`): ~256 KiB of float64
# (the chunk is drawn, summed and rounded while it is in cache).
_FUSED_CHUNK_BYTES = 1 << 18


def _draw_noise(
    rows: np.ndarray,
    generator: np.random.Generator,
    law: Mapping[str, Any],
    auxiliary: np.random.Generator | None,
    covariance: Covariance | None = None,
) -> None:
    """Fill ``rows`` with the table law's entries: standard normals from ``generator``,
    transformed by the law and ``covariance`` (:mod:`attnrmt.model.table_laws`). O(rows)."""
    generator.standard_normal(out=rows)
    if law["kind"] != "gaussian":
        apply_table_law(rows, law, auxiliary)
    if covariance is not None:
        apply_covariance(rows, *covariance)


def _table_covariance(
    law: Mapping[str, Any], d: int, rng: np.random.Generator
) -> Covariance | None:
    """``(sqrt(lambda), reflector)`` of an anisotropic law, None otherwise (docs/model.md,
    "Anisotropic tables"): for ``random`` the Householder vector taking ``e_1`` to a uniform
    direction drawn from a child of ``rng`` spawned after the blocks'. O(d)."""
    lam = covariance_spectrum(law, d)
    if lam is None:
        return None
    if law["signal"] != "random":
        return np.sqrt(lam), None
    direction = np.random.Generator(np.random.SFC64(child_seeds(rng, 1)[0])).standard_normal(d)
    reflector = -direction / np.linalg.norm(direction)
    reflector[0] += 1.0
    norm = np.linalg.norm(reflector)
    return np.sqrt(lam), (reflector / norm if norm > 1e-12 else None)


def _fill_rows_with_rough_copy(
    rows: np.ndarray,
    rough_rows: np.ndarray,
    shift: float,
    generator: np.random.Generator,
    law: Mapping[str, Any] | None = None,
    auxiliary: np.random.Generator | None = None,
    covariance: Covariance | None = None,
) -> tuple[np.ndarray, float]:
    """Fill ``rows`` with the table law's noise (``shift`` added to column 0), write them rounded
    into ``rough_rows`` and return their column sums and ``max |rough_rows|``, a cache-sized
    chunk at a time (one pass over memory instead of three), bit-identical to drawing,
    shifting and summing the block at once (``tests/model/test_cell.py``,
    ``tests/model/test_table_laws.py``). O(rows) time, O(d) extra memory."""
    law = law or {"kind": "gaussian"}
    chunk = max(1, _FUSED_CHUNK_BYTES // (8 * rows.shape[1]))
    sums = np.zeros(rows.shape[1])
    largest = 0.0
    for start in range(0, rows.shape[0], chunk):
        part = rows[start : start + chunk]
        _draw_noise(part, generator, law, auxiliary, covariance)
        part[:, 0] += shift
        if start == 0:
            sums[:] = part[0]
        for row in part[1:] if start == 0 else part:
            sums += row
        rough_part = rough_rows[start : start + chunk]
        with np.errstate(over="ignore"):  # an overflow to inf shows in the maximum
            rough_part[...] = part
        largest = max(largest, float(rough_part.max()), -float(rough_part.min()))
    return sums, largest


def sample_table(
    d: int,
    V: int,
    snr: float,
    rng: np.random.Generator,
    rough_dtype: type | None = None,
    table: Mapping[str, Any] | str | None = None,
) -> EmbeddingTable:
    """Draw ``E`` (V, d): ``e_v = s_v mu + z_v`` with ``mu = sqrt(snr) e_1`` and ``z_v`` of the
    law ``table`` (docs/model.md, "Embedding table", "Table laws", where the random streams
    are fixed: ``2 TABLE_BLOCKS_PER_CLASS`` row blocks, each from an SFC64 generator seeded by
    a child of ``rng``, the auxiliary numbers of ``student_t`` / ``sparse`` from a second
    one per block). The blocks fill in parallel threads (the numbers do not depend on their
    count), with the class sums accumulated while a block is hot in cache, and with
    ``rough_dtype`` rounded into a copy as they are drawn. O(V d) time, 8 V d bytes (plus
    the rough copy)."""
    law = validate_table(table)
    if law["kind"] == "file":
        return file_table(law, snr, (V, d), rough_dtype)
    half = V // 2
    embeddings = np.empty((V, d))
    rough: np.ndarray | None = None if rough_dtype is None else np.empty((V, d), dtype=rough_dtype)
    token_class = np.repeat(np.array([1, -1], dtype=np.int8), half)
    blocks = row_blocks(half, 2)
    # SFC64 (a small chaotic counter generator that passes BigCrush and PractRand) fills
    # normals ~20% faster than PCG64; each block gets its own child seed of ``rng``.
    children = child_seeds(rng, len(blocks))
    generators = [np.random.Generator(np.random.SFC64(child)) for child in children]
    auxiliaries = [
        np.random.Generator(np.random.SFC64(child.spawn(1)[0]))
        if law["kind"] in AUXILIARY_KINDS
        else None
        for child in children
    ]
    covariance = _table_covariance(law, d, rng)
    amplitude = np.sqrt(snr)

    def fill(index: int) -> tuple[np.ndarray, float]:
        start, stop = blocks[index]
        rows, shift = embeddings[start:stop], amplitude * token_class[start]
        noise = (generators[index], law, auxiliaries[index], covariance)
        if rough is not None:
            return _fill_rows_with_rough_copy(rows, rough[start:stop], shift, *noise)
        _draw_noise(rows, *noise)
        rows[:, 0] += shift
        return rows.sum(axis=0), float("nan")

    filled = in_threads(fill, len(blocks))
    block_sums = [sums for sums, _ in filled]
    n_plus = len(blocks) // 2
    mean_plus = np.sum(block_sums[:n_plus], axis=0) / half
    mean_minus = np.sum(block_sums[n_plus:], axis=0) / half
    means = (0.5 * (mean_plus + mean_minus), 0.5 * (mean_plus - mean_minus))  # mbar, Dlt
    largest = max(largest for _, largest in filled) if rough is not None else float("nan")
    return EmbeddingTable(embeddings, token_class, np.eye(1, d)[0], *means, rough, largest)


def file_table(
    law: Mapping[str, Any],
    snr: float = 0.0,
    shape: tuple[int, int] | None = None,
    rough_dtype: type | None = None,
) -> EmbeddingTable:
    """A two-class ``file`` table (docs/model.md, "Tables from a file"): its rows reflected so
    that the class-mean difference lies along ``e_1``, plus ``s_v sqrt(snr) e_1``; ValueError
    when ``shape = (V, d)`` is not the file's or the labels have ``K > 2`` classes. O(V d)."""
    rows, index = load_file_table(law)
    if index[-1] != 1:
        raise ValueError(
            f"table.labels={law['labels']!r}: K = {index[-1] + 1} classes need a K-class "
            "positional spec ({'kind': 'classes', ...}; docs/model.md, \"Tables from a file\")"
        )
    classes = 1 - 2 * index
    if shape is not None and rows.shape != shape:
        V, d = rows.shape
        raise ValueError(
            f"table.path={law['path']!r}: shape {rows.shape}, the cell needs (V, d) = {shape}: "
            f"a file table needs d = {d} and delta = {d}/{V} = {d / V:g}"
        )
    _, difference = class_means(rows)
    reflector = difference / np.linalg.norm(difference)
    reflector[0] -= 1.0
    norm = np.linalg.norm(reflector)
    if norm > 1e-12:
        apply_covariance(rows, np.ones(rows.shape[1]), reflector / norm)
    rows[:, 0] += np.sqrt(snr) * classes
    table_mean, class_mean_difference = class_means(rows)
    rough: np.ndarray | None = None if rough_dtype is None else rows.astype(rough_dtype)
    return EmbeddingTable(
        embeddings=rows,
        token_class=classes.astype(np.int8),
        signal_direction=np.eye(rows.shape[1])[0],
        table_mean=table_mean,
        class_mean_difference=class_mean_difference,
        rough_embeddings=rough,
        rough_max_abs=float(np.abs(rough).max()) if rough is not None else float("nan"),
    )


def sample_tokens(signs: np.ndarray, V: int, rng: np.random.Generator) -> np.ndarray:
    """Token indices ``v_{n,t}`` (int64, shape of ``signs``), uniform among the ``V/2`` tokens
    of class ``xi_{n,t}`` (docs/model.md, "Tokens, pooling and S"). O(N T)."""
    half = V // 2
    within_class = rng.integers(0, half, size=signs.shape, dtype=np.int64)
    return np.where(signs > 0, within_class, within_class + half)
