"""Planning (attnrmt.sweep.spec.plan): cells, blocks, config hashes, pinned fingerprints,
speed and memory."""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
from typing import Any

import numpy as np
import pytest

from attnrmt.sweep import AXES, Cell, load_config, plan_run
from tests.sweep.oracles import cell_block_params, make_blocks
from tests.sweep.spec.conftest import SMALL, known_cell, plan_of, sweep_config


def test_simulate_kwargs_bind_to_simulate_cell() -> None:
    from attnrmt.model import simulate_cell

    kwargs = known_cell().simulate_kwargs()
    inspect.signature(simulate_cell).bind(**kwargs, seed=[1, 2])
    assert kwargs["positional"] == {"kind": "prefix", "L": 4}
    assert kwargs["weights"] == {"kind": "mean"}


def test_plan_counts_axes_and_models() -> None:
    plan = plan_run(load_config(SMALL))
    assert (plan.run, plan.seed) == ("test-small", 7)
    transition = plan.sweeps["transition"]
    assert list(transition.axes) == list(AXES)
    assert transition.axes["snr"] == [0.0, 1.0, 2.0, 3.0]
    assert len(transition.cells) == 2 * 1 * 1 * 1 * 2 * 4 * 4 * 1 * 2
    assert transition.models["weights"]["causal1"] == {"kind": "causal_limit", "tau": 1.0}
    assert set(transition.models["positional"]) == {"prefix4", "iid"}
    markov = plan.sweeps["markov"]
    assert markov.axes["T"] == [4, 8] and len(markov.cells) == 2 * 2 * 2
    assert len({cell.key for cell in transition.cells}) == len(transition.cells)


def test_cells_share_spec_objects() -> None:
    sweep = plan_of(sweep_config(snr=[0.0, 1.0], replicates=3))
    specs = {id(cell.positional_spec) for cell in sweep.cells}
    assert len(specs) == 1


def test_blocks_never_mix_lines_and_are_sorted() -> None:
    sweep = plan_of(sweep_config(d=[10, 20], snr=[2.0, 0.0, 1.0], replicates=3))
    assert sum(len(block.cells) for block in sweep.blocks) == len(sweep.cells)
    for block in sweep.blocks:
        assert len({cell.line for cell in block.cells}) == 1
        order = [(cell.snr, cell.replicate) for cell in block.cells]
        assert order == sorted(order)
        assert 1 <= len(block.cells) <= 4


def test_block_size_does_not_change_the_cells() -> None:
    config = sweep_config(d=[10, 20], snr=[0.0, 1.0, 2.0], replicates=3)
    by_block_size = {}
    for size in (1, 16):
        config["execution"]["block_size"] = size
        sweep = plan_of(config)
        by_block_size[size] = sweep
        assert {key for block in sweep.blocks for key in block.cell_keys} == {
            cell.key for cell in sweep.cells
        }
    one, sixteen = by_block_size[1], by_block_size[16]
    assert [cell.key for cell in one.cells] == [cell.key for cell in sixteen.cells]
    assert len(one.blocks) == len(one.cells)
    assert one.config_sha256 == sixteen.config_sha256


def test_extending_an_axis_keeps_old_block_keys() -> None:
    before = plan_of(sweep_config(d=[20], snr=[0.0, 1.0], replicates=2))
    after = plan_of(sweep_config(d=[20, 30], snr=[0.0, 1.0], replicates=2))
    old, new = {b.key for b in before.blocks}, {b.key for b in after.blocks}
    assert old < new
    longer = plan_of(sweep_config(d=[20], snr=[0.0, 1.0, 2.0], replicates=2))
    assert old <= {b.key for b in longer.blocks}  # full blocks of the old snr prefix survive


def test_config_sha256_ignores_site_and_analysis_settings() -> None:
    config = sweep_config()
    reference = plan_of(config).config_sha256
    site = copy.deepcopy(config)
    site["dask"] = {"mode": "slurm", "jobqueue": {"cores": 8}}
    site["execution"] = {"block_size": 1}
    site["analysis"] = {}
    assert plan_of(site).config_sha256 == reference
    assert plan_of(sweep_config(replicates=2)).config_sha256 != reference
    assert plan_of(sweep_config(snr=[1.0, 2.0])).config_sha256 != reference


def test_auto_block_size_is_the_default_and_targets_block_seconds() -> None:
    from attnrmt.sweep.spec.cost import estimated_cell_seconds

    config = sweep_config(d=[20, 400], snr=[0.0, 1.0, 2.0, 3.0], replicates=50)
    del config["execution"]
    sweep = plan_of(config)
    target = 60.0  # the schema's default block_seconds
    lines: dict[tuple, list[Any]] = {}
    for block in sweep.blocks:
        lines.setdefault(block.cells[0].line, []).append(block)
    for line_blocks in lines.values():
        size = len(line_blocks[0].cells)
        assert all(len(b.cells) == size for b in line_blocks[:-1])  # the last one: the rest
        line_length = sum(len(b.cells) for b in line_blocks)
        cell_seconds = estimated_cell_seconds(line_blocks[0].cells[0].simulate_kwargs())
        # ~target seconds per block (within half a cell), unless the whole line is cheaper
        # or one cell is dearer than the target
        assert (
            abs(size * cell_seconds - target) <= cell_seconds / 2
            or (size == line_length and line_length * cell_seconds < target)
            or (size == 1 and cell_seconds > target / 2)
        )
    # d=20 lines (cheap) are one block each; d=400 cells (~0.02 s) make fewer, larger blocks
    cheap = [b for b in sweep.blocks if b.cells[0].d == 20]
    assert all(len(b.cells) == 200 for b in cheap)
    assert {cell.key for b in sweep.blocks for cell in b.cells} == {c.key for c in sweep.cells}


def test_auto_block_sizes_are_the_same_on_every_call() -> None:
    config = sweep_config(d=[20, 400], snr=[0.0, 1.0], replicates=20)
    config["execution"] = {"block_size": "auto", "block_seconds": 0.05}
    first, second = plan_of(config), plan_of(copy.deepcopy(config))
    assert [b.key for b in first.blocks] == [b.key for b in second.blocks]
    assert len({len(b.cells) for b in first.blocks}) > 1  # sizes differ by the cells' cost


def test_expensive_cells_get_blocks_of_one() -> None:
    from attnrmt.sweep.spec.cost import cells_per_block

    assert cells_per_block(cell_seconds=500.0, target_seconds=60.0, line_length=40) == 1
    assert cells_per_block(cell_seconds=0.001, target_seconds=60.0, line_length=40) == 40
    assert cells_per_block(cell_seconds=2.0, target_seconds=60.0, line_length=400) == 30


def test_plan_run_accepts_a_config_validated_only_by_snakemake() -> None:
    import yaml
    from snakemake.utils import validate

    with (SMALL).open(encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    from attnrmt.sweep.spec.schema import SCHEMA_PATH

    validate(raw, str(SCHEMA_PATH))
    by_snakemake = plan_run(raw)
    by_attnrmt = plan_run(load_config(SMALL))
    for name, sweep in by_attnrmt.sweeps.items():
        assert [b.key for b in by_snakemake.sweeps[name].blocks] == [b.key for b in sweep.blocks]
        assert by_snakemake.sweeps[name].config_sha256 == sweep.config_sha256


def test_plan_of_100k_cells_has_the_expected_blocks() -> None:
    config = {
        "positional_models": {"p4": {"kind": "prefix", "L": 4}},
        "weight_models": {"c1": {"kind": "causal_limit", "tau": 1.0}},
        "sweeps": {
            "big": {
                "d": [100, 200, 400, 800, 1600],
                "delta": [0.25, 0.5, 1.0, 2.0],
                "gamma": [0.5, 1.0],
                "T": [8, 16],
                "positional": ["p4", "iid"],
                "weights": ["mean", "harmonic", "optimal", "c1", "last"],
                "snr": {"start": 0.0, "stop": 3.0, "num": 25},
                "replicates": 5,
            }
        },
        "execution": {"block_size": 16},
    }
    # its time and memory are measured in benchmarks (bench_store: plan_seconds_1e6_cells)
    sweep = plan_run(load_config(config)).sweeps["big"]
    assert len(sweep.cells) == 100_000
    assert len(sweep.blocks) == 5 * 4 * 2 * 2 * 2 * 5 * 8  # 125 cells per line, 16 per block


# A run planned by the code before the plan held its cells as arrays (commit 598eb22,
# one Cell object per cell) gave these fingerprints; the array plan must give the same, so
# a run made before the change is reused whole after it: same fragment names (block keys),
# same cell ids (keys, seeds) and the same block-job params (Snakemake reruns a job whose
# recorded params changed). Unsorted snr and d, custom R, T varying, a top sweep, blocks of
# 5 and auto blocks that split lines.
PIN_CONFIG: dict[str, Any] = {
    "run": "pin",
    "seed": 11,
    "positional_models": {
        "p2": {"kind": "prefix", "L": 2},
        "mk": {"kind": "markov", "r": 0.8},
        "cu": {"kind": "custom", "R": [[1, 0.5, 0.25], [0.5, 1, 0.5], [0.25, 0.5, 1]]},
    },
    "weight_models": {
        "c1": {"kind": "causal_limit", "tau": 1.0},
        "a1": {"kind": "causal_attention", "tau": 0.5},
    },
    "sweeps": {
        "full": {
            "d": [40, 20],
            "delta": [0.5, 2.0],
            "gamma": 0.5,
            "T": 3,
            "positional": ["cu", "iid", "p2"],
            "weights": ["mean", "c1", "a1"],
            "snr": [2.0, 0.0, 1.5, 0.1],
            "centered": [True, False],
            "replicates": 3,
            "top_k": 2,
        },
        "top": {
            "d": [60],
            "T": [4, 8],
            "positional": ["mk"],
            "weights": ["optimal", "harmonic"],
            "snr": {"start": 3.0, "stop": 0.0, "num": 7},
            "replicates": 2,
            "spectrum": "top",
        },
    },
}


# (cells fingerprint, blocks fingerprint, first three block keys, key of cell 7, blocks,
#  block params fingerprint) per sweep and block size, from the pre-array code
PINNED: dict[str, tuple[str, str, list[str], str, int, str]] = {
    "full/5": (
        "c2425d38f602be8f82514f7c11335256352a757e5762fec36de1308f37bf6963",
        "f49547821b5fd4885a7857f3b8fefd3604cae48473f8756db725330c2b081b8e",
        ["5bac374c8efdfe9c", "1b66aaa112ed4cd4", "87b254baefdda286"],
        "681f85b624927e8cbabd8e4dc1b808f85274208cb718353bcb1679454656169d",
        216,
        "7682b6e0527c981535f07040471998773952c169e5f96ceb170433c7ed79f050",
    ),
    "top/5": (
        "f448241cfd4bd7474659127f4e05ddbb151bc7503f60deb2ce786dc8f186448d",
        "a6b64e43228d6b0777364d55c05e30c32c56c4248aa9b84804204b8513007fa3",
        ["7770b94309aed42c", "cdcdc5400f480d06", "7ff0bb1b030cb7a1"],
        "0c7da94919dda2f470a7b1319aaa2221a31ed0107c1cd3ecab9a9634a8c3ef70",
        12,
        "ea70b858caf6229d58eed4bd934bfb53b2c68188b61f426cc94525ca8fdac9be",
    ),
    "full/auto": (
        "c2425d38f602be8f82514f7c11335256352a757e5762fec36de1308f37bf6963",
        "7bce43e494dbf6f221c0984a6441a461caf8dccc669386f50b8a1cdfeed1f5cc",
        ["cd190ca5fc95472a", "d8326ab76619caf6", "16740bbd2d39581b"],
        "681f85b624927e8cbabd8e4dc1b808f85274208cb718353bcb1679454656169d",
        72,
        "db095bf81c98032624297dcac3cc3ea194ad57354abdd40a781171160df0bb99",
    ),
    # the top cost constants refitted to measured top cells (sweep/spec/cost.py): the auto
    # blocks of the top sweep changed (8 -> 56 at block_seconds 0.05), its cells did not
    "top/auto": (
        "f448241cfd4bd7474659127f4e05ddbb151bc7503f60deb2ce786dc8f186448d",
        "5011247ae4f9d8ea273370a9b5b7b56a055d7c916f812226fd5a97a2425d7b67",
        ["7604677bc241ebe5", "a3f93284d9d45485", "1c929660752628e2"],
        "0c7da94919dda2f470a7b1319aaa2221a31ed0107c1cd3ecab9a9634a8c3ef70",
        56,
        "9938d02509220b0753bec34592b07bbe7ca990fd5a5f90701cda5ee0d37cd0c2",
    ),
}


def pin_plan(block_size: int | str) -> Any:
    config = {**PIN_CONFIG, "execution": {"block_size": block_size, "block_seconds": 0.05}}
    return plan_run(load_config(config))


def plan_fingerprint(sweep: Any, seed: int) -> tuple[str, str, list[str], str, int, str]:
    """Hashes of every cell (key, seed words, coordinates, simulate kwargs), every block
    (key, its cells' keys in order) and every block's params (their repr, as Snakemake
    records them)."""
    cells, blocks, params = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
    for c in sweep.cells:
        kwargs = json.dumps(c.simulate_kwargs(), sort_keys=True)
        cells.update(
            f"{c.key}|{c.seed_words(seed)}|{sorted(c.coords.items())}|"
            f"{c.replicate}|{kwargs}\n".encode()
        )
    for block in sweep.blocks:
        blocks.update(f"{block.key}:{','.join(block.cell_keys)}\n".encode())
        cell_params = [  # what a cell depends on: the pinned part of the params
            {name: entry[name] for name in ("key", "seed", "kwargs", "curve") if name in entry}
            for entry in block.cells.block_params(seed)
        ]
        params.update(repr(cell_params).encode())
    return (
        cells.hexdigest(),
        blocks.hexdigest(),
        [b.key for b in sweep.blocks[:3]],
        sweep.cells[7].key,
        len(sweep.blocks),
        params.hexdigest(),
    )


@pytest.mark.parametrize("block_size", [5, "auto"])
def test_array_plan_equals_the_pinned_object_plan(block_size: int | str) -> None:
    plan = pin_plan(block_size)
    for name, sweep in plan.sweeps.items():
        assert plan_fingerprint(sweep, plan.seed) == PINNED[f"{name}/{block_size}"]


@pytest.mark.parametrize("block_size", [5, "auto"])
def test_array_blocks_equal_make_blocks_of_the_cell_objects(block_size: int | str) -> None:
    """grid_blocks (line ranges, keys from the raw digests) and make_blocks (one object per
    cell, hex keys) give the same blocks; block params from the arrays equal those built
    cell by cell."""

    plan = pin_plan(block_size)
    for sweep in plan.sweeps.values():
        cells = list(sweep.cells)
        assert all(
            cell.key
            == Cell(
                **{
                    name: getattr(cell, name)
                    for name in (
                        "d",
                        "delta",
                        "gamma",
                        "T",
                        "positional",
                        "weights",
                        "snr",
                        "centered",
                        "replicate",
                        "top_k",
                        "positional_spec",
                        "weights_spec",
                        "spectrum",
                    )
                }
            ).key
            for cell in cells
        )
        by_objects = make_blocks(cells, plan.seed, block_size, 0.05)
        assert [b.key for b in sweep.blocks] == [b.key for b in by_objects]
        assert [list(b.cells) for b in sweep.blocks] == [list(b.cells) for b in by_objects]
        for block, reference in zip(sweep.blocks, by_objects, strict=True):
            assert block.cell_keys == [cell.key for cell in reference.cells]
            assert block.cells.block_params(plan.seed) == cell_block_params(
                list(reference.cells), plan.seed
            )


def test_cell_sequence_behaves_as_a_list() -> None:
    sweep = pin_plan(5).sweeps["full"]
    cells = list(sweep.cells)
    assert len(sweep.cells) == len(cells) == 2 * 2 * 3 * 3 * 4 * 2 * 3
    assert sweep.cells[-1] == cells[-1] and sweep.cells[5] == cells[5]
    assert sweep.cells[3:40:7] == cells[3:40:7]
    with pytest.raises(IndexError):
        sweep.cells[len(cells)]
    block = sweep.blocks[4]
    assert block.cells[-1] == list(block.cells)[-1] and len(block.cells) == 5
    assert sweep.cells == cells
    assert sweep.cell_keys() == [cell.key for cell in cells]
    assert len(set(sweep.blocks)) == len(sweep.blocks)  # blocks hash (by key) as before
    assert np.array_equal(
        sweep.grid.keys[block.cells.positions],
        np.array([bytes.fromhex(key) for key in block.cell_keys]).view(np.uint8).reshape(-1, 32),
    )


def _traced_peak(function: Any, *args: Any) -> int:
    """tracemalloc peak (bytes) of one call, over what was allocated before it."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        function(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def tiny_sweep_config(n_gamma: int) -> dict[str, Any]:
    """One sweep of 4 n_gamma lines x 100 snr x 10 replicates (4,000 n_gamma cells)."""
    return {
        "run": "mem",
        "seed": 3,
        "sweeps": {
            "s": {
                "d": [8],
                "T": [4],
                "gamma": [0.1 * (i + 1) for i in range(n_gamma)],
                "weights": ["mean", "last", "harmonic", "optimal"],
                "snr": [0.01 * i for i in range(100)],
                "replicates": 10,
            }
        },
        "execution": {"block_size": 1000},
    }


def test_plan_memory_is_a_few_bytes_per_cell() -> None:
    """Planning holds 32 bytes per cell (the raw keys), not a Python object per cell: the
    tracemalloc peak grows by <= 48 bytes per extra cell between 20,000 and 80,000 cells
    (more lines of the same length, so one line's transient work is the same). Measured:
    ~30 B per cell; the plan with a Cell object per cell took ~350 B per cell
    (docs/scaling.md)."""
    configs = [load_config(tiny_sweep_config(n_gamma)) for n_gamma in (5, 20)]
    peaks = [_traced_peak(plan_run, config) for config in configs]
    assert (peaks[1] - peaks[0]) / 60_000 <= 48, peaks


@pytest.mark.parametrize("noise", ["independent", "shared"])
def test_replicates_per_d_keep_every_cell_when_another_d_grows(noise: str) -> None:
    """``replicates: {d: count}`` (rounds write it): the cells at each d are those of a
    square grid of that count (key, seed words, block params), a d growing leaves every
    other d's cells and block keys as they were, and the blocks are make_blocks of the
    cells (lines of their own length; independent noise)."""
    config = sweep_config(d=[10, 20], snr=[0.0, 1.0, 2.0], noise=noise, weights=["mean"])
    ragged = plan_of(
        {**config, "sweeps": {"s": {**config["sweeps"]["s"], "replicates": {10: 5, 20: 2}}}}
    )
    grown = plan_of(
        {**config, "sweeps": {"s": {**config["sweeps"]["s"], "replicates": {10: 5, 20: 4}}}}
    )
    square = plan_of({**config, "sweeps": {"s": {**config["sweeps"]["s"], "replicates": 5}}})
    cells = list(ragged.cells)
    assert ragged.n_cells == len(cells) == 3 * (5 + 2)
    assert sorted({(c.d, c.replicate) for c in cells}) == [(10, r) for r in range(5)] + [
        (20, 0),
        (20, 1),
    ]
    in_square = {cell.key: cell for cell in square.cells}
    for cell in cells:
        assert cell == in_square[cell.key]
        assert cell.seed_words(5) == in_square[cell.key].seed_words(5)
    assert set(ragged.cell_keys()) < set(grown.cell_keys())
    at_10 = [b.key for b in ragged.blocks if b.cells[0].d == 10]
    assert at_10 == [b.key for b in grown.blocks if b.cells[0].d == 10]
    assert at_10 == [b.key for b in square.blocks if b.cells[0].d == 10]
    if noise == "shared":  # whole curves in a block: make_blocks does not know them
        return
    by_objects = make_blocks(cells, 5, 4)
    assert [b.key for b in ragged.blocks] == [b.key for b in by_objects]
    for block, reference in zip(ragged.blocks, by_objects, strict=True):
        assert block.cells.block_params(5) == cell_block_params(list(reference.cells), 5)
