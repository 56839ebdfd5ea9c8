"""One simulation cell of the exact generative model, and the one simulation door
:func:`simulate_cell` (docs/model.md, "The generative model", "Population covariance given
the table"): the spectrum and top eigenpairs (as overlaps) of ``S`` and of the population
matrix, by the routes its parameters choose: ``full`` ("Full cells"), ``top`` ("Top-k
cells"), a list of ``snr`` (:mod:`attnrmt.model._curve`), K classes
(:func:`attnrmt.model.classes.simulate_classes`); kernels in :mod:`attnrmt.model._linalg`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, overload

import numpy as np
import scipy.linalg
import scipy.sparse

from attnrmt._validation import check_int
from attnrmt.contract import SPECTRA, stored_eigenvalue_count
from attnrmt.model._cell_steps import (
    add_rank_one_terms,
    cell_readout,
    cell_streams,
    check_cell_arguments,
    readonly,
    sample_spectrum_from_samples,
    sample_through_tokens,
)
from attnrmt.model._linalg import (
    add_rank_one,
    lower_gram,
    shared_operator_top_eigenpairs,
    spectrum_and_top_eigenvectors,
    tall_times,
    tall_transpose_times,
    top_eigenpairs,
    uses_krylov,
)
from attnrmt.model.positional import positional_correlation, sample_signs, validate_positional
from attnrmt.model.table import (
    EmbeddingTable,
    helper_threads,
    in_threads,
    sample_table,
    sample_tokens,
)
from attnrmt.model.table_laws import validate_table
from attnrmt.model.weights import (
    causal_attention_weights,
    pooling_scalars,
    pooling_weights,
    validate_weights,
)


@dataclass(frozen=True, eq=False)
class CellResult:
    """Measurements of one cell; the fields and their meaning: docs/architecture.md, "The
    doors" (``attnrmt.model``). ``eigenvalues`` ascending, ``top_*`` descending, overlaps
    squared, in [0, 1]; the ``spike_*`` fields (:data:`attnrmt.contract.SPIKE_FIELDS`) and
    ``classes`` only for K-class cells (:func:`attnrmt.model.classes.simulate_classes`)."""

    eigenvalues: np.ndarray
    top_eigenvalues: np.ndarray
    overlap_signal: np.ndarray
    overlap_class_mean: np.ndarray
    overlap_table_mean: np.ndarray
    pop_top_eigenvalues: np.ndarray
    pop_overlap_signal: np.ndarray
    alpha: float
    kappa: float
    sigma: float
    V: int
    N: int
    effective_weights: np.ndarray
    downstream_accuracy: float
    compute_seconds: float
    spike_strength_table: np.ndarray | None = None
    spike_strength_signal: np.ndarray | None = None
    spike_overlap_table: np.ndarray | None = None
    spike_overlap_signal: np.ndarray | None = None
    spike_pop_overlap_table: np.ndarray | None = None
    spike_pop_overlap_signal: np.ndarray | None = None
    classes: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored record (docs/data-contract.md): the fields but ``classes`` and absent
        ``spike_*``; arrays read-only float64, scalars ``float``/``int``."""
        return {
            field.name: getattr(self, field.name)
            for field in fields(self)
            if field.name != "classes" and getattr(self, field.name) is not None
        }


# ------------------------------------------------------------------------------ pooling


def token_incidence(
    tokens: np.ndarray, token_weights: np.ndarray, V: int
) -> scipy.sparse.csr_array:
    """Sparse ``N x V`` matrix ``W`` with ``W[n, v] = sum_{t: v_{n,t} = v} w_{n,t}``: ``W E``
    are the pooled vectors as rows (docs/model.md, "Tokens, pooling and S"; repeated
    tokens are duplicate entries, which the product sums). O(N T)."""
    n_sequences, T = tokens.shape
    indptr = np.arange(0, n_sequences * T + 1, T, dtype=np.int64)
    data = np.broadcast_to(token_weights, tokens.shape).ravel().astype(np.float64)
    return scipy.sparse.csr_array(
        (data, tokens.ravel().astype(np.int64), indptr), shape=(n_sequences, V)
    )


# Column blocks of the pooling product once the table no longer fits in a core's L2 cache:
# the gathered rows then come from a V x 64 block in cache (docs/scaling.md).
_POOL_BLOCK_COLUMNS = 64
_POOL_BLOCKED_ABOVE_BYTES = 32 * 2**20


def _incidence_product(incidence: scipy.sparse.csr_array, embeddings: np.ndarray) -> np.ndarray:
    """``incidence @ embeddings``, by column blocks for a large table (bit-identical: every
    output element is the same ordered sum of its row's nonzeros)."""
    if embeddings.nbytes <= _POOL_BLOCKED_ABOVE_BYTES:
        return incidence @ embeddings
    product = np.empty((incidence.shape[0], embeddings.shape[1]))
    for start in range(0, embeddings.shape[1], _POOL_BLOCK_COLUMNS):
        columns = slice(start, start + _POOL_BLOCK_COLUMNS)
        product[:, columns] = incidence @ np.ascontiguousarray(embeddings[:, columns])
    return product


def pool(tokens: np.ndarray, token_weights: np.ndarray, embeddings: np.ndarray) -> np.ndarray:
    """Pooled vectors as rows, ``c_n = sum_t w_{n,t} e_{v_{n,t}}`` (N, d) (docs/model.md,
    "Tokens, pooling and S"): one sparse product (:func:`token_incidence`), the rows split
    among the helper threads (each row an independent sum: the split changes nothing).
    O(N T d) time, O(N d) memory."""
    n_sequences, V = tokens.shape[0], embeddings.shape[0]
    threads = helper_threads() if n_sequences >= 256 else 1
    if threads == 1:
        return _incidence_product(token_incidence(tokens, token_weights, V), embeddings)
    weights = np.broadcast_to(token_weights, tokens.shape)
    pooled = np.empty((n_sequences, embeddings.shape[1]))
    edges = np.linspace(0, n_sequences, threads + 1).round().astype(int)

    def fill(index: int) -> None:
        start, stop = edges[index], edges[index + 1]
        incidence = token_incidence(tokens[start:stop], weights[start:stop], V)
        pooled[start:stop] = _incidence_product(incidence, embeddings)

    in_threads(fill, threads)
    return pooled


def population_rank_one_terms(
    table_mean: np.ndarray,
    class_mean_difference: np.ndarray,
    alpha: float,
    kappa: float,
    sigma: float,
    centered: bool,
) -> tuple[tuple[float, np.ndarray], ...]:
    """``((coefficient, vector), ...)`` of the population matrix ``(kappa/V) E E^T + sum c v
    v^T``: ``(sigma^2 [uncentred] - kappa) mbar mbar^T + (alpha - kappa) Dlt Dlt^T``
    (docs/model.md, "Population covariance given the table"). O(1)."""
    return (
        (-kappa + (0.0 if centered else sigma**2), table_mean),
        (alpha - kappa, class_mean_difference),
    )


def population_matrix(
    table_gram: np.ndarray, terms: Sequence[tuple[float, np.ndarray]]
) -> np.ndarray:
    """The population matrix on the lower triangle: ``table_gram`` (``(kappa/V) E E^T``) plus
    the rank-one ``terms``, in place (docs/model.md, "Population covariance given the
    table"). O(d^2) a term."""
    for coefficient, vector in terms:
        add_rank_one(table_gram, coefficient, vector)
    return table_gram


Blocks = list[np.ndarray | None]


def table_operators(
    incidence: scipy.sparse.csr_array,
    embeddings: np.ndarray,
    centered: bool,
    population_terms: Sequence[tuple[float, np.ndarray]],
    kappa: float,
    pass_table: np.ndarray | None = None,
) -> Callable[[Blocks], Blocks]:
    """``[X_S, X_P] -> [S X_S, P X_P]`` without forming ``S`` or ``P`` (either may be None):
    ``S = C^T C / N - [centred] cbar cbar^T`` with ``C = W E`` (:func:`token_incidence`), ``P``
    the population matrix; one pass of ``E`` and one of ``E^T`` for both (docs/model.md,
    "Top-k cells"). ``pass_table`` (a float32 copy of ``E``) is what the passes read for the
    top route's warm start (rank-one terms and results float64). O(V d b) time, O(V b)
    memory besides ``E``."""
    n_samples, V = incidence.shape
    transposed = incidence.T.tocsr()
    sample_terms = [(-1.0, (incidence.sum(axis=0) @ embeddings) / n_samples)] if centered else []
    population_scale = kappa / V
    if pass_table is not None:
        embeddings = pass_table
        incidence = incidence.astype(pass_table.dtype)
        transposed = transposed.astype(pass_table.dtype)

    def apply_all(blocks: Blocks) -> Blocks:
        present = [block for block in blocks if block is not None]
        # (V, sum of widths); in the pass precision (no copy for float64)
        table_products = tall_times(
            embeddings, np.hstack(present).astype(embeddings.dtype, copy=False)
        )
        column, mixed = 0, []
        for index, block in enumerate(blocks):
            if block is None:
                continue
            part = table_products[:, column : column + block.shape[1]]
            column += block.shape[1]
            if index == 0:
                mixed.append(transposed @ (incidence @ part) / n_samples)
            else:
                mixed.append(part * population_scale)
        products = tall_transpose_times(embeddings, np.hstack(mixed))
        results: Blocks = []
        column = 0
        for index, block in enumerate(blocks):
            if block is None:
                results.append(None)
                continue
            product = products[:, column : column + block.shape[1]].astype(np.float64)
            column += block.shape[1]
            terms = sample_terms if index == 0 else population_terms
            results.append(add_rank_one_terms(product, block, terms))
        return results

    return apply_all


def squared_overlaps(vectors: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """``(v_j . direction/||direction||)^2`` for unit columns ``v_j``; NaN if direction = 0."""
    norm = np.sqrt(np.sum(direction**2))
    if norm == 0:
        return np.full(vectors.shape[1], np.nan)
    return np.clip(((direction[:, None] * vectors).sum(axis=0) / norm) ** 2, 0.0, 1.0)


def unit_columns(*directions: np.ndarray) -> np.ndarray:
    """The nonzero ``directions`` normalised, as the columns of a (d, q) array."""
    norms = [np.sqrt(np.sum(direction**2)) for direction in directions]
    columns = [
        direction / norm for direction, norm in zip(directions, norms, strict=True) if norm > 0
    ]
    return np.stack(columns, axis=1) if columns else np.zeros((directions[0].size, 0))


# --------------------------------------------------------------------------------- cell


@overload
def simulate_cell(
    d: int,
    delta: float,
    gamma: float,
    T: int,
    positional: Mapping[str, Any] | str,
    weights: Mapping[str, Any] | str,
    snr: float,
    centered: bool = ...,
    top_k: int | None = ...,
    seed: int | Sequence[int] = ...,
    spectrum: str = ...,
    table: Mapping[str, Any] | str | None = ...,
) -> CellResult: ...


@overload
def simulate_cell(
    d: int,
    delta: float,
    gamma: float,
    T: int,
    positional: Mapping[str, Any] | str,
    weights: Mapping[str, Any] | str,
    snr: Sequence[float] | np.ndarray,
    centered: bool = ...,
    top_k: int | None = ...,
    seed: int | Sequence[int] = ...,
    spectrum: str = ...,
    table: Mapping[str, Any] | str | None = ...,
) -> list[CellResult]: ...


def simulate_cell(
    d: int,
    delta: float,
    gamma: float,
    T: int,
    positional: Mapping[str, Any] | str,
    weights: Mapping[str, Any] | str,
    snr: float | Sequence[float] | np.ndarray,
    centered: bool = True,
    top_k: int | None = None,
    seed: int | Sequence[int] = 0,
    spectrum: str = "full",
    table: Mapping[str, Any] | str | None = None,
) -> CellResult | list[CellResult]:
    """Simulate one cell of the generative model and measure it (docs/model.md, "The
    generative model", "Tokens, pooling and S", "Spikes"); the arguments and routes:
    docs/architecture.md, "The doors".

    ``d`` >= 2; ``delta = d/V``, ``gamma = d/N`` (realised ``V = 2 round(d/(2 delta))``,
    ``N = round(d/gamma)``, both >= 2); ``T`` >= 1; ``positional`` a sign model
    (:func:`attnrmt.model.validate_positional`) or a K-class spec (full route only);
    ``weights`` (:func:`attnrmt.model.validate_weights`); ``snr`` in [0, MAX_SNR] or a
    sequence of them (a curve from one decomposition, :mod:`attnrmt.model._curve`);
    ``top_k`` None is ``min(K + 1, d)``; ``seed`` the entropy of a
    :class:`numpy.random.SeedSequence` whose four child streams draw the table, signs,
    tokens and solver start (common random numbers across weights and ``spectrum``);
    ``spectrum`` ``full`` (all ``d`` eigenvalues, O(d^3) time, O(d^2) memory) or ``top``
    (matrix-free block Lanczos, the ``min(2 top_k, d)`` largest eigenvalues, the other
    fields equal to 1e-10 relative (eigenvalues) and 5e-7 (overlaps); O((V d + N T) m)
    time, O(V d) memory); ``table`` the law of the noise entries
    (:func:`attnrmt.model.validate_table`; the other laws transform the Gaussian cell's
    normals, so signs, tokens and solver stream are shared).

    Returns a :class:`CellResult`, or a list of them for a sequence of ``snr``. Raises
    ValueError naming the argument and value for any invalid argument."""
    if spectrum not in SPECTRA:
        raise ValueError(f"spectrum={spectrum!r}: must be one of {list(SPECTRA)}")
    if isinstance(snr, Sequence | np.ndarray) and np.ndim(snr) > 0:
        from attnrmt.model._curve import simulate_curve

        return simulate_curve(
            d, delta, gamma, T, positional, weights, snr, centered, top_k, seed, spectrum, table
        )
    start_time = time.perf_counter()
    if isinstance(positional, Mapping) and positional.get("kind") == "classes":
        from attnrmt.model.classes import MAX_CLASSES, simulate_classes

        K = check_int("K", positional.get("K"), minimum=2)
        if K > MAX_CLASSES:
            raise ValueError(f"K={K!r}: must be <= {MAX_CLASSES}")
        law = validate_table(table)
        if spectrum != "full" or law["kind"] not in ("gaussian", "file"):
            raise ValueError(
                f"spectrum={spectrum!r}, table={table!r}: K-class cells have the full route "
                "and Gaussian or file tables only"
            )
        sizes = check_cell_arguments(d, delta, gamma, T, snr, centered, top_k, K)
        file = law if law["kind"] == "file" else None
        values, classes = simulate_classes(sizes, K, positional, weights, seed, file)
    else:
        sizes = check_cell_arguments(d, delta, gamma, T, snr, centered, top_k)
        values, classes = _simulate_signs(sizes, positional, weights, seed, spectrum, table), None
    seconds = time.perf_counter() - start_time
    frozen = _frozen(classes) if classes else None
    return CellResult(
        **_frozen(values), V=sizes[7], N=sizes[8], compute_seconds=seconds, classes=frozen
    )


def _frozen(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` with every array read-only (:func:`readonly`). O(fields)."""
    return {name: readonly(v) if isinstance(v, np.ndarray) else v for name, v in fields.items()}


class Draws(NamedTuple):
    """What a two-class cell draws (:func:`draw_cell`)."""

    table: EmbeddingTable
    tokens: np.ndarray
    labels: np.ndarray | None
    effective_weights: np.ndarray
    token_weights: np.ndarray
    alpha: float
    kappa: float
    sigma: float
    population_terms: tuple[tuple[float, np.ndarray], ...]
    solver_stream: np.random.Generator
    centered: bool


def draw_cell(
    sizes: tuple[int, float, float, int, float, bool, int, int, int],
    positional: Mapping[str, Any] | str,
    weights: Mapping[str, Any] | str,
    seed: Any,
    table: Mapping[str, Any] | str | None,
    rough_dtype: type | None = None,
) -> Draws:
    """Draw a two-class cell of checked ``sizes`` (``_cell_steps.check_cell_arguments``): table
    (with a ``rough_dtype`` copy for the top route's warm start), signs, tokens and pooling
    weights (docs/model.md, "The generative model", "Pooling scalars"). O(V d + N T) time,
    plus O(N T d) for ``causal_attention``."""
    d, _, _, T, snr, centered, _, V, N = sizes
    positional_spec = validate_positional(positional, T)
    weights_spec = validate_weights(weights, T)
    table_law = validate_table(table)
    table_stream, sign_stream, token_stream, solver_stream = cell_streams(seed)
    R = positional_correlation(positional_spec, T)
    drawn = sample_table(d, V, snr, table_stream, rough_dtype, table_law)
    signs, labels = sample_signs(positional_spec, T, N, sign_stream)
    tokens = sample_tokens(signs, V, token_stream)
    if weights_spec["kind"] == "causal_attention":
        token_weights = causal_attention_weights(drawn.embeddings, tokens, weights_spec["tau"])
        effective_weights = token_weights.mean(axis=0)
    else:
        effective_weights = token_weights = pooling_weights(weights_spec, T, R)
    scalars = pooling_scalars(effective_weights, R)
    means = (drawn.table_mean, drawn.class_mean_difference)
    terms = population_rank_one_terms(*means, *scalars, centered)
    sampled = (drawn, tokens, labels, effective_weights, token_weights)
    return Draws(*sampled, *scalars, terms, solver_stream, centered)


def _simulate_signs(
    sizes: tuple[int, float, float, int, float, bool, int, int, int],
    positional: Mapping[str, Any] | str,
    weights: Mapping[str, Any] | str,
    seed: Any,
    spectrum: str,
    table: Mapping[str, Any] | str | None,
) -> dict[str, Any]:
    """The two-class route of :func:`simulate_cell`: draw and measure by the ``full`` or ``top``
    route. Returns the fields of :class:`CellResult` but ``V``, ``N`` and the time."""
    d, top_k = sizes[0], sizes[6]
    # the float32 copy of E is drawn with it when the top route will iterate on it
    rough_dtype = TOP_WARM_START_DTYPE if spectrum == "top" and uses_krylov(d) else None
    drawn = draw_cell(sizes, positional, weights, seed, table, rough_dtype)
    table_drawn = drawn.table
    measure = _measure_top if spectrum == "top" else _measure_full
    eigenvalues, top_vectors, pop_top_eigenvalues, pop_vectors, downstream_accuracy = measure(
        drawn, top_k
    )
    return {
        "eigenvalues": eigenvalues,
        "top_eigenvalues": eigenvalues[::-1][:top_k],
        "overlap_signal": squared_overlaps(top_vectors, table_drawn.signal_direction),
        "overlap_class_mean": squared_overlaps(top_vectors, table_drawn.class_mean_difference),
        "overlap_table_mean": squared_overlaps(top_vectors, table_drawn.table_mean),
        "pop_top_eigenvalues": pop_top_eigenvalues,
        "pop_overlap_signal": squared_overlaps(pop_vectors, table_drawn.signal_direction),
        "alpha": drawn.alpha,
        "kappa": drawn.kappa,
        "sigma": drawn.sigma,
        "effective_weights": drawn.effective_weights,
        "downstream_accuracy": float(downstream_accuracy),
    }


def _spike_start(d: int, table: EmbeddingTable, rng: np.random.Generator, width: int) -> np.ndarray:
    """Krylov start (d, width): Gaussian columns, the first two plus the spike directions
    ``Dlt``, ``mbar`` (so the outliers are found in the first blocks). O(d width)."""
    start = rng.standard_normal((d, width)) if width > 1 else rng.standard_normal(d)[:, None]
    for column, direction in enumerate((table.class_mean_difference, table.table_mean)):
        norm = max(np.sqrt(np.sum(direction**2)), 1e-300)
        start[:, column if width > 1 else 0] += np.sqrt(d) * direction / norm
    return start


_Measured = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]


def _sample_spectrum_from_tokens(
    incidence: scipy.sparse.csr_array, embeddings: np.ndarray, centered: bool, top_k: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """All d eigenvalues of ``S`` and its top-k eigenvectors through the tokens, for ``V <
    min(N, d)`` (docs/model.md, "Full cells"): ``S = E^T B E`` with ``B = W^T W / N - b b^T``
    (V x V); with ``E E^T = L L^T``, ``L^T B L`` has the nonzero eigenvalues of ``S`` and an
    eigenvector ``z`` gives ``E^T B L z``. O(V^2 d + V^3 + N T^2) time, O(V d + V^2) memory.
    None when ``E E^T`` is not numerically positive definite (the caller takes the d route)."""
    n_samples, V = incidence.shape
    d = embeddings.shape[1]
    incidence_gram = (incidence.T @ incidence).toarray() / n_samples  # B, (V, V)
    if centered:
        token_mean = np.asarray(incidence.sum(axis=0)).ravel() / n_samples
        incidence_gram -= np.outer(token_mean, token_mean)
    try:
        factor = scipy.linalg.cholesky(
            np.tril(lower_gram(embeddings.T, 1.0)), lower=True, check_finite=False
        )
    except np.linalg.LinAlgError:
        return None
    weighted_factor = incidence_gram @ factor  # B L
    core = factor.T @ weighted_factor
    small_values, small_vectors = spectrum_and_top_eigenvectors(
        np.asfortranarray(0.5 * (core + core.T)), top_k
    )
    eigenvalues = np.concatenate([np.zeros(d - V), small_values])
    eigenvalues.sort()
    vectors = embeddings.T @ (weighted_factor @ small_vectors)
    return eigenvalues, vectors / np.maximum(np.sqrt(np.sum(vectors**2, axis=0)), 1e-300)


def _measure_full(drawn: Draws, top_k: int) -> _Measured:
    """The full route (docs/model.md, "Full cells"): all eigenvalues of ``S`` and the top-k
    eigenpairs of both matrices, each in the smaller dimension when there is one (``N < d``,
    ``V < min(N, d)`` for ``S``; ``V < d`` for the population matrix). O(N d^2 + V d^2 + d^3)
    time, O(d^2 + (N + V) d) memory. Returns (eigenvalues ascending, top vectors of S,
    population values descending, population vectors, downstream accuracy)."""
    table, tokens, labels, _, token_weights, _, kappa, _, population_terms, _, centered = drawn
    n_samples, V = tokens.shape[0], table.vocabulary_size
    found = None
    if sample_through_tokens(table.dimension, V, n_samples, top_k):
        found = _sample_spectrum_from_tokens(
            token_incidence(tokens, token_weights, V), table.embeddings, centered, top_k
        )
    # The pooled rows (N, d) are formed unless S went through the tokens and there is no
    # label to read out.
    pooled = (
        pool(tokens, token_weights, table.embeddings)
        if labels is not None or found is None
        else None
    )
    downstream_accuracy = cell_readout(pooled, labels)
    if found is not None:
        eigenvalues, top_vectors = found
    elif pooled is None:  # unreachable: the rows are formed when S is not from the tokens
        raise AssertionError("pooled rows missing for the sample spectrum")
    elif top_k < n_samples < table.dimension:
        eigenvalues, top_vectors = sample_spectrum_from_samples(pooled, centered, top_k)
    else:
        # S = (1/N) sum_n c_n c_n^T, minus the outer product of the mean when centred
        # (the same as centring the rows first, without another pass over them).
        sample_lower = lower_gram(pooled, 1.0 / n_samples)
        if centered:
            add_rank_one(sample_lower, -1.0, pooled.mean(axis=0))
        del pooled
        eigenvalues, top_vectors = spectrum_and_top_eigenvectors(sample_lower, top_k)
        del sample_lower

    # Lanczos start: the spike directions plus an equal-weight random part, drawn from the
    # cell's own stream.
    start = _spike_start(table.dimension, table, drawn.solver_stream, 1)[:, 0]
    if top_k < V < table.dimension:
        pop_values, pop_vectors = _population_top_from_tokens(
            table, population_terms, kappa, top_k, start
        )
    else:
        population = population_matrix(lower_gram(table.embeddings, kappa / V), population_terms)
        pop_values, pop_vectors = top_eigenpairs(population, top_k, start)
    return eigenvalues, top_vectors, pop_values, pop_vectors, downstream_accuracy


def population_rows(
    table: EmbeddingTable, population_terms: Sequence[tuple[float, np.ndarray]], kappa: float
) -> np.ndarray:
    """Rows ``Y = M^(1/2) E`` (V, d) with ``Y^T Y`` the population matrix (docs/model.md, "Full
    cells", where ``M`` is written out): ``a_0 E + (a_1 - a_0) 1 mbar^T + (a_2 - a_0) s
    Dlt^T`` with ``a_i = sqrt(max(kappa + c_i, 0) / V)``, ``c_i`` the coefficients of
    :func:`population_rank_one_terms` (``mbar`` first). O(V d)."""
    V = table.vocabulary_size
    (mean_coefficient, table_mean), (class_coefficient, class_mean_difference) = population_terms
    bulk = np.sqrt(kappa / V)
    mean_scale = np.sqrt(max(kappa + mean_coefficient, 0.0) / V) - bulk
    class_scale = np.sqrt(max(kappa + class_coefficient, 0.0) / V) - bulk
    rows = bulk * table.embeddings
    rows += mean_scale * table_mean
    rows += np.multiply.outer(class_scale * table.token_class, class_mean_difference)
    return rows


def _population_top_from_tokens(
    table: EmbeddingTable,
    population_terms: Sequence[tuple[float, np.ndarray]],
    kappa: float,
    top_k: int,
    start: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k eigenpairs of the population matrix through ``K = Y Y^T`` (V x V,
    :func:`population_rows`) for ``V < d``: an eigenvector ``z`` of ``K`` gives ``Y^T z``
    (normalised); the Lanczos start is ``Y start``. O(V^2 d + V^2 m) time, O(V d + V^2) memory."""
    rows = population_rows(table, population_terms, kappa)
    values, small_vectors = top_eigenpairs(lower_gram(rows.T, 1.0), top_k, rows @ start)
    vectors = rows.T @ small_vectors
    return values, vectors / np.maximum(np.sqrt(np.sum(vectors**2, axis=0)), 1e-300)


# Block widths of the top route's Krylov solver for S and for the population matrix (the
# population matrix needs more rounds; the fewest rounds wins: docs/scaling.md,
# ``top_block_widths``).
TOP_BLOCK_WIDTH = 12
POP_BLOCK_WIDTH = 20
# Precision of the top route's warm-start passes (None: no warm start); see
# :func:`attnrmt.model._linalg.shared_operator_top_eigenpairs` and the benchmark
# ``top_warm_start``.
TOP_WARM_START_DTYPE: type | None = np.float32


# Largest ``V max|E|^2`` for the float32 warm start: the products then stay far below
# float32's overflow (3.4e38) whatever the block (unit columns) and weights (|w_t| <= ~1).
_WARM_START_MAX_SCALE = 1e30


def _warm_start_operators(
    incidence: scipy.sparse.csr_array,
    table: EmbeddingTable,
    centered: bool,
    population_terms: Sequence[tuple[float, np.ndarray]],
    kappa: float,
) -> Callable[[Blocks], Blocks] | None:
    """:func:`table_operators` in ``TOP_WARM_START_DTYPE`` (reading ``table.rough_embeddings``
    when drawn in it, else a copy, O(V d)), or None when that is None or ``V max|E|^2 >
    _WARM_START_MAX_SCALE`` (float32 could overflow; the exact iteration then starts cold)."""
    if TOP_WARM_START_DTYPE is None:
        return None
    rough_table, largest = table.rough_embeddings, table.rough_max_abs
    if rough_table is None or rough_table.dtype != TOP_WARM_START_DTYPE:
        with np.errstate(over="ignore"):  # an overflow to inf fails the test below
            rough_table = table.embeddings.astype(TOP_WARM_START_DTYPE)
        largest = max(float(rough_table.max()), -float(rough_table.min()))
    if not table.vocabulary_size * largest**2 <= _WARM_START_MAX_SCALE:
        return None
    return table_operators(
        incidence, table.embeddings, centered, population_terms, kappa, rough_table
    )


def _measure_top(drawn: Draws, top_k: int) -> _Measured:
    """The top route (docs/model.md, "Top-k cells"): the ``min(2 top_k, d)`` largest
    eigenvalues of ``S`` and the top-k eigenpairs of both matrices, matrix-free: block
    Lanczos in lockstep sharing each round's passes over ``E`` after a float32 warm start
    (:func:`attnrmt.model._linalg.shared_operator_top_eigenpairs`). O(m (V d + N T) + d m^2)
    time for m Krylov columns, O(V d + m d) memory. Returns as :func:`_measure_full`."""
    table, tokens, labels, _, token_weights, _, kappa, _, population_terms, _, centered = drawn
    d, V = table.dimension, table.vocabulary_size
    incidence = token_incidence(tokens, token_weights, V)
    downstream_accuracy = (
        cell_readout(incidence @ table.embeddings, labels) if labels is not None else float("nan")
    )
    n_values = stored_eigenvalue_count("top", d, top_k)
    widths = (min(TOP_BLOCK_WIDTH, d), min(POP_BLOCK_WIDTH, d))
    operator_args = (incidence, table, centered, population_terms, kappa)
    # the dense route (small d) has no rounds to warm
    rough = _warm_start_operators(*operator_args) if uses_krylov(d) else None
    spikes = unit_columns(table.signal_direction, table.class_mean_difference, table.table_mean)
    (values, top_vectors), (pop_values, pop_vectors) = shared_operator_top_eigenpairs(
        table_operators(incidence, table.embeddings, centered, population_terms, kappa),
        [_spike_start(d, table, drawn.solver_stream, width) for width in widths],
        [n_values, min(top_k + 1, d)],
        [top_k, top_k],
        drawn.solver_stream,
        [spikes, unit_columns(table.signal_direction)],
        rough,
    )
    return values[::-1].copy(), top_vectors, pop_values[:top_k], pop_vectors, downstream_accuracy
