"""The sweep key ``noise: independent | shared``: identity, seeds, blocks and block jobs of
shared-noise sweeps (docs/data-contract.md, "Shared-noise sweeps"); independent sweeps are
unchanged (their pinned fingerprints are in test_plan.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from attnrmt.model import simulate_cell
from attnrmt.sweep.compute.blocks import BlockCell, compute_group, task_groups
from attnrmt.sweep.compute.provenance import worker_provenance
from attnrmt.sweep.spec.config import ConfigError, load_valid_config
from attnrmt.sweep.spec.plan import SweepPlan, plan_run
from tests.sweep.oracles import cell_block_params

ROOT_SEED = 7


def sweep_plan(block_size: int | str = 4, **sweep: Any) -> SweepPlan:
    config = {
        "seed": ROOT_SEED,
        "sweeps": {
            "s": {
                "d": [20, 24],
                "T": 4,
                "weights": ["mean", "last"],
                "snr": [2.0, 0.0, 1.0],
                "replicates": 3,
                **sweep,
            }
        },
        "execution": {"block_size": block_size},
    }
    valid = load_valid_config(config)
    return plan_run(valid.config, valid.sweeps).sweeps["s"]


def fingerprint(plan: SweepPlan) -> tuple:
    return (
        plan.cell_keys(),
        [cell.seed_words(ROOT_SEED) for cell in plan.cells],
        [(block.key, block.cell_keys) for block in plan.blocks],
        plan.config_sha256,
    )


@pytest.mark.parametrize("block_size", [4, "auto"])
def test_independent_is_the_default_and_changes_nothing(block_size: int | str) -> None:
    """``noise: independent`` written out plans exactly what leaving it out does (the
    default): keys, seeds, blocks and config hash; every seed comes from its own key."""
    default = sweep_plan(block_size)
    explicit = sweep_plan(block_size, noise="independent")
    assert default.noise == explicit.noise == "independent"
    assert fingerprint(default) == fingerprint(explicit)
    assert all(
        cell.seed_words(ROOT_SEED)[:4]
        == [int(w) for w in np.frombuffer(bytes.fromhex(cell.key[:32]), "<u4")]
        for cell in default.cells
    )
    assert all("curve" not in entry for entry in default.cells.block_params(ROOT_SEED))


def curves_of(plan: SweepPlan) -> dict[tuple, list]:
    curves: dict[tuple, list] = {}
    for cell in plan.cells:
        curves.setdefault((cell.line, cell.replicate), []).append(cell)
    return curves


def test_shared_cells_share_one_seed_per_replicate_curve() -> None:
    """Shared: every cell key differs from the independent sweep's (a shared cell holds
    other numbers), the snr values of one replicate of a setting share one seed, distinct
    curves have distinct seeds, and the arrays' block params equal the cells' own."""
    shared = sweep_plan(noise="shared")
    independent = sweep_plan()
    assert not set(shared.cell_keys()) & set(independent.cell_keys())
    assert len(set(shared.cell_keys())) == shared.n_cells
    assert shared.config_sha256 != independent.config_sha256
    seeds = {
        curve: {tuple(cell.seed_words(ROOT_SEED)) for cell in cells}
        for curve, cells in curves_of(shared).items()
    }
    assert all(len(words) == 1 for words in seeds.values())
    assert len({words.pop() for words in seeds.values()}) == len(seeds)
    for block in shared.blocks:
        params = block.cells.block_params(ROOT_SEED)
        assert params == cell_block_params(list(block.cells), ROOT_SEED)
        assert all(entry["curve"] is True for entry in params)


@pytest.mark.parametrize("block_size", [1, 2, 4, 5, 100, "auto"])
def test_blocks_hold_whole_curves_whatever_the_block_size(block_size: int | str) -> None:
    """Every curve lies in one block, in snr order; an integer block size rounds up to
    whole curves (1 -> one curve a block); every cell is in exactly one block."""
    plan = sweep_plan(block_size, noise="shared")
    where = {}
    for index, block in enumerate(plan.blocks):
        cells = list(block.cells)
        for cell in cells:
            where[cell.key] = index
        assert len(cells) % 3 == 0
    if block_size != "auto":  # 4 lines of 9 cells, chunks of whole curves
        size = min(3 * -(-int(block_size) // 3), 9)
        chunks = [size] * (9 // size) + ([9 % size] if 9 % size else [])
        assert [len(block.cells) for block in plan.blocks] == chunks * 4
    assert len(where) == plan.n_cells == sum(len(block.cells) for block in plan.blocks)
    for cells in curves_of(plan).values():
        assert len({where[cell.key] for cell in cells}) == 1
    block = list(plan.blocks[0].cells)
    assert [cell.snr for cell in block[:3]] == [0.0, 1.0, 2.0]


def test_adding_snr_values_keeps_keys_and_seeds_of_the_stored_cells() -> None:
    """Extending a shared sweep's snr axis leaves every old cell's key and seed as they
    were (the new values join the same curve seed), so a run reuses the stored cells."""
    old = sweep_plan(noise="shared")
    new = sweep_plan(noise="shared", snr=[2.0, 0.0, 1.0, 0.5, 3.0])
    new_seeds = {key: seed for key, seed in zip(new.cell_keys(), seeds_of(new), strict=True)}
    for key, seed in zip(old.cell_keys(), seeds_of(old), strict=True):
        assert new_seeds[key] == seed
    for curve, cells in curves_of(new).items():
        assert len({tuple(cell.seed_words(ROOT_SEED)) for cell in cells}) == 1
        assert tuple(curves_of(old)[curve][0].seed_words(ROOT_SEED)) == tuple(
            cells[0].seed_words(ROOT_SEED)
        )


def seeds_of(plan: SweepPlan) -> list[tuple[int, ...]]:
    return [tuple(cell.seed_words(ROOT_SEED)) for cell in plan.cells]


def test_a_misspelt_noise_value_is_named_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as caught:
        load_valid_config({"sweeps": {"s": {"noise": "shard"}}})
    assert str(caught.value) == (
        "sweeps.s.noise='shard': must be one of independent, shared (did you mean 'shared'?)"
    )


def test_block_job_groups_and_computes_whole_curves() -> None:
    """A block's shared cells group into curves by seed and parameters (snr aside); one
    :func:`compute_group` per curve gives :func:`attnrmt.model.simulate_cell`'s numbers for
    exactly the snr values asked (a part of a curve, as after extending snr, too)."""
    plan = sweep_plan(noise="shared")
    cells = [BlockCell.from_params(entry) for entry in plan.blocks[0].cells.block_params(ROOT_SEED)]
    groups = task_groups(cells)
    assert [len(group) for group in groups] == [3] * (len(cells) // 3)
    part = groups[0][1:]  # snr 1 and 2 only
    outcomes = compute_group([cell.kwargs for cell in part], part[0].seed, curve=True)
    assert all(error is None for _, error in outcomes)
    common = {k: v for k, v in part[0].kwargs.items() if k != "snr"}
    direct = simulate_cell(**common, snr=[1.0, 2.0], seed=list(part[0].seed))
    for (record, _), result in zip(outcomes, direct, strict=True):
        assert record is not None
        np.testing.assert_array_equal(record["top_eigenvalues"], result.top_eigenvalues)
        np.testing.assert_array_equal(record["eigenvalues"], result.eigenvalues)
        assert set(worker_provenance()) <= set(record)  # the worker's provenance, as a cell's
    broken = [dict(part[0].kwargs, top_k=0), dict(part[1].kwargs, top_k=0)]
    failed = compute_group(broken, part[0].seed, curve=True)
    assert all(record is None and isinstance(error, ValueError) for record, error in failed)


def test_planned_work_of_a_shared_cell_is_its_share_of_the_curve() -> None:
    """Status and plan estimates: the cells of one shared curve of 3 snr values together
    cost one curve (1.35 + 2 x 0.016 cells), not three cells."""
    from attnrmt.sweep.spec.cost import (
        CURVE_FIXED_FACTOR,
        CURVE_PER_SNR_FACTOR,
        cell_work,
        planned_cell_work,
    )

    shared = list(sweep_plan(noise="shared").blocks[0].cells)[:3]
    independent = sweep_plan().cells[0]
    one = cell_work(20, 0.5, 0.5, 4, "mean")
    assert planned_cell_work(independent) == one
    total = sum(planned_cell_work(cell) for cell in shared)
    assert total == pytest.approx(one * (CURVE_FIXED_FACTOR + 2 * CURVE_PER_SNR_FACTOR))
