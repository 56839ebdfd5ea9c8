"""Content keys and seeds (attnrmt.sweep.spec.identity) as cells and blocks carry them: the
canonical JSON of a cell, what enters its key, seed words, block keys."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np

from attnrmt.sweep.spec.identity import MODEL_VERSION
from tests.sweep.spec.conftest import (
    KNOWN_CELL_JSON,
    KNOWN_CELL_KEY,
    known_cell,
    plan_of,
    sweep_config,
)


def test_known_cell_key_is_the_sha256_of_its_canonical_json() -> None:
    assert MODEL_VERSION == 1
    assert hashlib.sha256(KNOWN_CELL_JSON.encode()).hexdigest() == KNOWN_CELL_KEY
    assert known_cell().key == KNOWN_CELL_KEY


def test_spectrum_enters_the_key_only_when_top() -> None:
    """A full cell keeps the key it had before ``spectrum`` existed (KNOWN_CELL_JSON has no
    spectrum entry); a top cell stores other data, so it has its own key, from the same
    canonical JSON with ``"spectrum":"top"`` in sorted position; the sweep's config hash
    follows the same rule, and the spectrum reaches simulate_cell."""
    assert known_cell(spectrum="full").key == KNOWN_CELL_KEY
    top_json = KNOWN_CELL_JSON.replace('"snr":1,', '"snr":1,"spectrum":"top",')
    assert known_cell(spectrum="top").key == hashlib.sha256(top_json.encode()).hexdigest()
    full_plan, top_plan = plan_of(sweep_config()), plan_of(sweep_config(spectrum="top"))
    assert full_plan.config_sha256 == plan_of(sweep_config(spectrum="full")).config_sha256
    assert top_plan.config_sha256 != full_plan.config_sha256
    assert (full_plan.spectrum, top_plan.spectrum) == ("full", "top")
    assert {cell.simulate_kwargs()["spectrum"] for cell in top_plan.cells} == {"top"}
    assert not {cell.key for cell in top_plan.cells} & {cell.key for cell in full_plan.cells}


def test_key_is_stable_across_processes() -> None:
    code = (
        "from attnrmt.sweep import Cell; "
        "print(Cell(400, 0.5, 0.5, 8, 'x', 'y', 1.0, True, 0, 3, "
        "{'L': 4, 'kind': 'prefix'}, {'kind': 'mean'}).key)"
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert keys == {KNOWN_CELL_KEY}


def test_key_excludes_names_and_includes_specs() -> None:
    renamed = known_cell(positional="other", weights="another")
    assert renamed.key == KNOWN_CELL_KEY
    assert known_cell(positional_spec={"kind": "prefix", "L": 3}).key != KNOWN_CELL_KEY
    assert known_cell(snr=1.0 + 1e-15).key == KNOWN_CELL_KEY  # normalised
    assert known_cell(snr=np.float64(1.0)).key == KNOWN_CELL_KEY
    for change in ({"replicate": 1}, {"top_k": 2}, {"centered": False}, {"d": 401}):
        assert known_cell(**change).key != KNOWN_CELL_KEY


def test_keys_do_not_depend_on_model_names_or_grid_position() -> None:
    small = plan_of(sweep_config(snr=[1.0]))
    config = sweep_config(d=[10, 20], snr=[0.5, 1.0], weights=["harmonic", "mean", "causal"])
    config["weight_models"] = {"causal": {"kind": "causal_limit", "tau": 1.0}}
    config["positional_models"] = {"first2": {"kind": "prefix", "L": 2}}
    config["sweeps"]["s"]["positional"] = ["first2"]
    big = plan_of(config)
    assert {cell.key for cell in small.cells} <= {cell.key for cell in big.cells}


def test_linspace_and_list_snr_give_the_same_keys() -> None:
    by_linspace = plan_of(sweep_config(snr={"start": 0.0, "stop": 0.3, "num": 4}))
    by_list = plan_of(sweep_config(snr=[0.0, 0.1, 0.2, 0.3]))
    assert [cell.key for cell in by_linspace.cells] == [cell.key for cell in by_list.cells]
    assert [block.key for block in by_linspace.blocks] == [b.key for b in by_list.blocks]


def test_seed_words_feed_default_rng() -> None:
    words = known_cell().seed_words(2026)
    assert len(words) == 5 and words[-1] == 2026
    assert all(0 <= word < 2**32 for word in words[:4])
    assert words[:4] == [
        int.from_bytes(bytes.fromhex(KNOWN_CELL_KEY)[i : i + 4], "little") for i in (0, 4, 8, 12)
    ]
    first = np.random.default_rng(words).standard_normal(3)
    again = np.random.default_rng(known_cell().seed_words(2026)).standard_normal(3)
    np.testing.assert_array_equal(first, again)
    assert known_cell().seed_words(1) != words


def test_block_keys_depend_on_root_seed_cell_keys_do_not() -> None:
    config = sweep_config(snr=[0.0, 1.0])
    first = plan_of(config)
    config["seed"] = 6
    second = plan_of(config)
    assert [c.key for c in first.cells] == [c.key for c in second.cells]
    assert not {b.key for b in first.blocks} & {b.key for b in second.blocks}
    assert first.config_sha256 != second.config_sha256
