"""Plan a run: expand each sweep into cells (content-keyed) and group them into blocks.

A **cell** is one call of :func:`attnrmt.model.simulate_cell` (one grid point, one
replicate). Its identity, :attr:`Cell.key`, is the sha256 of the canonical JSON of its
parameters: model *specs* (not their names), numbers normalised (so ``0.1`` from a
linspace and a typed ``0.1`` are the same cell), plus :data:`MODEL_VERSION`. Its random
generator is ``numpy.random.default_rng(cell.seed_words(root_seed))``; neither depends on
the grid position, the block size or the execution order.

A **block** is one Snakemake job: cells of one *line* (every parameter equal except
``snr`` and ``replicate``), sorted by ``(snr, replicate)``, chunked by ``block_size``
(``auto``: about ``block_seconds`` of estimated work per block, from the cost model). Its
key hashes only the root seed and its cells' keys, so extending an axis adds blocks and
leaves every block whose membership did not change (and its fragment) intact.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

from attnrmt.contract import AXES, round_significant
from attnrmt.sweep.config import ResolvedSweep, resolve_sweeps

#: Bump when :func:`attnrmt.model.simulate_cell` changes its output for the same inputs;
#: every cell key (and so every fragment) changes with it.
MODEL_VERSION = 1
#: Hex digits of a block key (64 bits).
BLOCK_KEY_HEX = 16
#: Parameters that vary within a line (a line is one block group).
LINE_FREE_PARAMETERS = ("snr", "replicate")


# --------------------------------------------------------------------------- canonical JSON


def canonical_number(value: Any) -> Any:
    """A number in canonical form for hashing: integral values as ``int``, others rounded.

    Booleans stay booleans; ``4``, ``4.0`` -> ``4``; ``0.30000000000000004`` -> ``0.3``
    (12 significant digits).
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        return value
    if isinstance(value, Integral):
        return int(value)
    rounded = round_significant(value)
    if rounded.is_integer():
        return int(rounded)
    return rounded


@functools.lru_cache(maxsize=1 << 16)
def _number_json(value: int | float) -> str:
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
    """Canonical JSON of spec dicts, cached by object identity.

    The plan shares one spec dict among all cells that use it, so each spec (a custom
    ``R`` can hold T^2 numbers) is serialised once. The cache holds a reference to each
    spec, so an ``id`` is never reused while cached; specs must not be mutated.
    """

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


_spec_json = _SpecJsonCache()


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
) -> str:
    """sha256 hex of a cell's canonical parameters (model names excluded, specs included).

    The canonical JSON is, with keys sorted: ``T, centered, d, delta, gamma,
    model_version, positional, replicate, snr, [spectrum,] top_k, weights`` (numbers by
    :func:`canonical_number`; specs by :func:`canonical_json`). ``spectrum`` enters only
    when it is ``"top"`` (a top cell stores other data), so full cells keep the keys they
    had before the key existed.
    """
    number = _number_json
    text = (
        f'{{"T":{number(T)},"centered":{"true" if centered else "false"},'
        f'"d":{number(d)},"delta":{number(delta)},'
        f'"gamma":{number(gamma)},"model_version":{MODEL_VERSION},'
        f'"positional":{_spec_json(positional_spec)},"replicate":{number(replicate)},'
        f'"snr":{number(snr)},{_SPECTRUM_JSON[spectrum]}"top_k":{number(top_k)},'
        f'"weights":{_spec_json(weights_spec)}}}'
    )
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# --------------------------------------------------------------------------- cells, blocks


@dataclass(frozen=True, slots=True)
class Cell:
    """One simulation cell: a grid point of a sweep and a replicate index.

    Attributes
    ----------
    d, delta, gamma, T, snr, centered
        Model parameters (docs/model.md, "The generative model"), normalised coordinate values.
    positional, weights : str
        Model *names* (dataset coordinates; not part of the key).
    replicate : int
        Replicate index, ``0 .. replicates - 1``.
    top_k : int
        Number of top eigenpairs measured.
    positional_spec, weights_spec : dict
        Canonical specs (shared between cells; do not mutate).
    spectrum : str
        ``"full"`` or ``"top"`` (:func:`attnrmt.model.simulate_cell`); part of the key only
        when ``"top"``.
    key : str
        sha256 hex of the canonical parameters (:func:`cell_key`), computed on creation.
    """

    d: int
    delta: float
    gamma: float
    T: int
    positional: str
    weights: str
    snr: float
    centered: bool
    replicate: int
    top_k: int
    positional_spec: dict[str, Any] = field(repr=False)
    weights_spec: dict[str, Any] = field(repr=False)
    spectrum: str = "full"
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = cell_key(
            d=self.d,
            delta=self.delta,
            gamma=self.gamma,
            T=self.T,
            positional_spec=self.positional_spec,
            weights_spec=self.weights_spec,
            snr=self.snr,
            centered=self.centered,
            replicate=self.replicate,
            top_k=self.top_k,
            spectrum=self.spectrum,
        )
        object.__setattr__(self, "key", key)

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def coords(self) -> dict[str, Any]:
        """Axis coordinates of the cell, in :data:`AXES` order (names for models)."""
        return {axis: getattr(self, axis) for axis in AXES}

    @property
    def line(self) -> tuple:
        """Every coordinate except ``snr`` (the block grouping; replicate excluded too)."""
        return (
            self.d,
            self.delta,
            self.gamma,
            self.T,
            self.positional,
            self.weights,
            self.centered,
        )

    def seed_words(self, root_seed: int) -> list[int]:
        """Seed for :func:`numpy.random.default_rng`: four uint32 words of the key, root.

        The words are the key's first 16 bytes read as little-endian uint32.
        """
        digest = bytes.fromhex(self.key[:32])
        words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
        return [*words, int(root_seed)]

    def simulate_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`attnrmt.model.simulate_cell` (without ``seed``)."""
        return {
            "d": self.d,
            "delta": self.delta,
            "gamma": self.gamma,
            "T": self.T,
            "positional": self.positional_spec,
            "weights": self.weights_spec,
            "snr": self.snr,
            "centered": self.centered,
            "top_k": self.top_k,
            "spectrum": self.spectrum,
        }


def block_key(root_seed: int, cell_keys: list[str]) -> str:
    """Short stable hex: sha256 over the root seed and the sorted cell keys."""
    digest = hashlib.sha256(f"attnrmt-block:{int(root_seed)}".encode("ascii"))
    for key in sorted(cell_keys):
        digest.update(b":" + key.encode("ascii"))
    return digest.hexdigest()[:BLOCK_KEY_HEX]


@dataclass(frozen=True, slots=True)
class Block:
    """One Snakemake job: cells of one line, sorted by ``(snr, replicate)``.

    Attributes
    ----------
    key : str
        :func:`block_key` of the root seed and the cells' keys (content only).
    cells : tuple[Cell, ...]
    """

    key: str
    cells: tuple[Cell, ...]

    @property
    def cell_keys(self) -> list[str]:
        """Keys of the block's cells, in block order."""
        return [cell.key for cell in self.cells]


@dataclass(frozen=True)
class SweepPlan:
    """Cells and blocks of one sweep.

    Attributes
    ----------
    name : str
    axes : dict[str, list]
        Coordinate values in :data:`AXES` order (``d, delta, gamma, T, positional,
        weights, snr, centered``).
    replicates, top_k : int
    cells : list[Cell]
        Grid order: axes in :data:`AXES` order (last fastest), then replicate.
    blocks : list[Block]
        Lines in grid order; within a line, chunks of ``block_size`` cells.
    config_sha256 : str
        sha256 of the sweep's canonical config (axes, models used, replicates, top_k,
        root seed, :data:`MODEL_VERSION`); not execution, dask or analysis settings.
    models : dict
        ``{"positional": {name: canonical spec}, "weights": {name: canonical spec}}``
        for the models this sweep uses (canonical specs do not depend on ``T``).
    spectrum : str
        ``"full"`` or ``"top"`` (config key ``spectrum``): what ``eigenvalues`` holds.
    """

    name: str
    axes: dict[str, list]
    replicates: int
    top_k: int
    cells: list[Cell] = field(repr=False)
    blocks: list[Block] = field(repr=False)
    config_sha256: str
    models: dict[str, dict[str, dict[str, Any]]] = field(repr=False)
    spectrum: str = "full"

    @property
    def n_cells(self) -> int:
        """Number of cells."""
        return len(self.cells)

    def block_index(self) -> dict[str, Block]:
        """``{block key: block}``."""
        return {block.key: block for block in self.blocks}


@dataclass(frozen=True)
class RunPlan:
    """Plan of a run: ``run`` name, root ``seed``, ``sweeps`` ``{name: SweepPlan}``."""

    run: str
    seed: int
    sweeps: dict[str, SweepPlan]


def _grid_cells(resolved: ResolvedSweep) -> list[Cell]:
    axes = resolved.axes
    positional_specs, weights_specs = resolved.positional_specs, resolved.weights_specs
    replicates = range(resolved.replicates)
    top_k = resolved.top_k
    cells = []
    grid = itertools.product(*(axes[axis] for axis in AXES))
    for d, delta, gamma, T, positional, weights, snr, centered in grid:
        positional_spec = positional_specs[(positional, T)]
        weights_spec = weights_specs[(weights, T)]
        for replicate in replicates:
            cells.append(
                Cell(
                    d, delta, gamma, T, positional, weights, snr, centered,
                    replicate, top_k, positional_spec, weights_spec, resolved.spectrum,
                )
            )
    return cells


def make_blocks(
    cells: list[Cell], root_seed: int, block_size: int | str, block_seconds: float = 0.0
) -> list[Block]:
    """Group cells by line, sort each line by ``(snr, replicate)``, chunk by block size.

    ``block_size``: cells per block, or ``"auto"``: per line,
    :func:`attnrmt.sweep.cost.cells_per_block` of the line's estimated cell cost
    (:func:`attnrmt.sweep.cost.estimated_cell_seconds`, fixed constants) and
    ``block_seconds``. Blocks never mix lines; lines appear in order of first appearance
    in ``cells``. O(cells log line length).
    """
    from attnrmt.sweep.cost import cells_per_block, estimated_cell_seconds

    auto = block_size == "auto"
    if not auto and (not isinstance(block_size, Integral) or block_size < 1):
        raise ValueError(f"block_size={block_size!r}: must be >= 1 or 'auto'")
    if auto and not block_seconds > 0:
        raise ValueError(f"block_seconds={block_seconds!r}: must be > 0 with block_size auto")
    lines: dict[tuple, list[Cell]] = {}
    for cell in cells:
        lines.setdefault(cell.line, []).append(cell)
    blocks = []
    for line_cells in lines.values():
        line_cells.sort(key=lambda cell: (cell.snr, cell.replicate))
        size = (
            cells_per_block(estimated_cell_seconds(line_cells[0].simulate_kwargs()),
                            block_seconds, len(line_cells))
            if auto else int(block_size)
        )
        for start in range(0, len(line_cells), size):
            chunk = tuple(line_cells[start : start + size])
            blocks.append(Block(block_key(root_seed, [cell.key for cell in chunk]), chunk))
    return blocks


def execution_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's ``execution:`` block with the schema's defaults filled in."""
    from attnrmt.sweep.config import load_schema

    properties = load_schema()["properties"]["execution"]["properties"]
    defaults = {name: spec["default"] for name, spec in properties.items() if "default" in spec}
    return {**defaults, **dict(config.get("execution") or {})}


def _models_used(resolved: ResolvedSweep) -> dict[str, dict[str, dict[str, Any]]]:
    first_T = resolved.axes["T"][0]
    return {
        "positional": {
            name: resolved.positional_specs[(name, first_T)]
            for name in resolved.axes["positional"]
        },
        "weights": {
            name: resolved.weights_specs[(name, first_T)] for name in resolved.axes["weights"]
        },
    }


def sweep_config_sha256(resolved: ResolvedSweep, root_seed: int) -> str:
    """sha256 of a sweep's canonical config (see :attr:`SweepPlan.config_sha256`)."""
    specs = {
        kind: {f"{name}@T={T}": spec for (name, T), spec in table.items()}
        for kind, table in (
            ("positional", resolved.positional_specs),
            ("weights", resolved.weights_specs),
        )
    }
    payload = {
        "axes": resolved.axes,
        "models": specs,
        "replicates": resolved.replicates,
        "top_k": resolved.top_k,
        "seed": int(root_seed),
        "model_version": MODEL_VERSION,
    }
    if resolved.spectrum != "full":  # full sweeps keep their hash
        payload["spectrum"] = resolved.spectrum
    return hashlib.sha256(canonical_json(payload).encode("ascii")).hexdigest()


def plan_sweep(
    resolved: ResolvedSweep, root_seed: int, block_size: int | str, block_seconds: float = 0.0
) -> SweepPlan:
    """Cells, blocks and config hash of one resolved sweep."""
    cells = _grid_cells(resolved)
    return SweepPlan(
        name=resolved.name,
        axes={axis: list(resolved.axes[axis]) for axis in AXES},
        replicates=resolved.replicates,
        top_k=resolved.top_k,
        cells=cells,
        blocks=make_blocks(cells, root_seed, block_size, block_seconds),
        config_sha256=sweep_config_sha256(resolved, root_seed),
        models=_models_used(resolved),
        spectrum=resolved.spectrum,
    )


def plan_run(
    config: Mapping[str, Any], resolved: Mapping[str, ResolvedSweep] | None = None
) -> RunPlan:
    """Plan every sweep of a schema-valid config (e.g. from :func:`load_config`).

    ``resolved``: the sweeps the one validation already resolved
    (:attr:`attnrmt.sweep.config.ValidConfig.sweeps`), so the semantic checks are not
    repeated; without it they run here and raise
    :class:`~attnrmt.sweep.config.ConfigError` on a problem.
    """
    resolved = resolve_sweeps(config) if resolved is None else resolved
    root_seed = int(config.get("seed", 2026))
    execution = execution_settings(config)
    block_size, block_seconds = execution["block_size"], float(execution["block_seconds"])
    return RunPlan(
        run=str(config.get("run", "default")),
        seed=root_seed,
        sweeps={
            name: plan_sweep(sweep, root_seed, block_size, block_seconds)
            for name, sweep in resolved.items()
        },
    )


__all__ = [
    "BLOCK_KEY_HEX",
    "MODEL_VERSION",
    "Block",
    "Cell",
    "RunPlan",
    "SweepPlan",
    "block_key",
    "canonical_json",
    "canonical_number",
    "cell_key",
    "execution_settings",
    "make_blocks",
    "plan_run",
    "plan_sweep",
    "sweep_config_sha256",
]
