"""benchmarks/seed_groups.py: disjoint seed groups and pass counting (tests/README.md)."""

from __future__ import annotations

import importlib

import pytest
from benchmarks.seed_groups import describe, disjoint_groups, pass_rate

STATISTICAL_MODULES = (
    "tests.theory.test_sim_vs_theory",
    "tests.model.test_population",
    "tests.model.test_positional",
    "tests.model.test_weights",
    "tests.analysis.test_comparison",
    "tests.analysis.test_pooling",
    "tests.analysis.test_thresholds_realistic",
)


@pytest.mark.parametrize("seeds", [(0, 1, 2, 3), (12345,), (3, 5, 9)])
def test_groups_are_shifted_disjoint_copies_starting_with_the_tests_own(seeds) -> None:
    groups = disjoint_groups(seeds, 5)
    assert groups[0] == seeds and len(groups) == 5
    assert all(len(group) == len(seeds) for group in groups)
    flat = [seed for group in groups for seed in group]
    assert len(set(flat)) == len(flat)


def test_pass_rate_counts_failing_groups_and_names_the_assertion() -> None:
    def check(seeds: tuple[int, ...]) -> None:
        assert all(seed % 3 for seed in seeds), "a multiple of 3"

    result = pass_rate(check, (1, 2), 4)  # groups (1, 2) (3, 4) (5, 6) (7, 8)
    assert (result["passed"], result["groups"], result["seeds_per_group"]) == (2, 4, 2)
    assert set(result["failures"]) == {"3-4", "5-6"}
    assert "a multiple of 3" in result["failures"]["3-4"]
    assert "assert all(seed % 3" in result["failures"]["3-4"]


def test_describe_survives_an_empty_message() -> None:
    with pytest.raises(AssertionError) as caught:
        raise AssertionError
    assert describe(caught.value).startswith("line ")
    assert "raise AssertionError" in describe(caught.value)


@pytest.mark.parametrize("name", STATISTICAL_MODULES)
def test_statistical_modules_declare_their_checks(name: str) -> None:
    checks = importlib.import_module(name).SEED_GROUP_CHECKS
    assert checks
    for check, seeds in checks.values():
        assert callable(check)
        assert seeds and all(isinstance(seed, int) for seed in seeds)
