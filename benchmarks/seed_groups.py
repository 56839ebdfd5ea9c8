"""Pass rates of the statistical tests over disjoint seed groups (not run by pytest or CI).

Usage::

    python -m benchmarks.seed_groups tests.theory.test_sim_vs_theory [more modules] [--groups 8]

A statistical test module declares ``SEED_GROUP_CHECKS = {name: (check, seeds)}``: ``check``
takes a tuple of seeds and raises ``AssertionError`` when the test's criterion fails, and
``seeds`` is the group the test itself uses. Group ``g`` shifts every seed by ``g`` times
the span of that group (group 0 is the test's own), so the groups are disjoint and
independent draws of the same criterion. The pass counts (and the first failure message of
each check) are printed and stored under the module name in
``benchmarks/seed_groups.json``; copy the counts into the test module's comment.

Cost: ``groups`` times a test's own cost (each seed runs once per group; cells cached by the
test module are reused across checks). Memory: what one group of the test holds.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "seed_groups.json"

Check = Callable[[tuple[int, ...]], None]


def disjoint_groups(seeds: Sequence[int], groups: int) -> list[tuple[int, ...]]:
    """``groups`` shifted copies of ``seeds`` (the first is ``seeds``), pairwise disjoint."""
    span = max(seeds) - min(seeds) + 1
    return [tuple(seed + g * span for seed in seeds) for g in range(groups)]


def describe(error: AssertionError) -> str:
    """The failed assertion's source line and the first line of its message."""
    where = traceback.extract_tb(error.__traceback__)[-1]
    message = next((line for line in str(error).splitlines() if line.strip()), "")
    return f"line {where.lineno}: {where.line} {message}"[:300]


def pass_rate(check: Check, seeds: Sequence[int], groups: int) -> dict[str, Any]:
    """Run ``check`` on each disjoint group; count passes, keep the failures' messages."""
    failures = {}
    started = time.perf_counter()
    for group in disjoint_groups(seeds, groups):
        try:
            check(group)
        except AssertionError as error:
            failures[f"{group[0]}-{group[-1]}"] = describe(error)
    return {
        "passed": groups - len(failures),
        "groups": groups,
        "seeds_per_group": len(seeds),
        "failures": failures,
        "seconds": round(time.perf_counter() - started, 1),
    }


def run_module(name: str, groups: int) -> dict[str, Any]:
    module = importlib.import_module(name)
    results = {}
    for check_name, (check, seeds) in module.SEED_GROUP_CHECKS.items():
        results[check_name] = pass_rate(check, tuple(seeds), groups)
        row = results[check_name]
        print(
            f"{name}::{check_name}: {row['passed']}/{groups} groups of {len(seeds)} seeds"
            f" ({row['seconds']} s) {row['failures'] or ''}",
            flush=True,
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="+", help="test modules with SEED_GROUP_CHECKS")
    parser.add_argument("--groups", type=int, default=8, help="disjoint groups (default 8)")
    args = parser.parse_args(argv)
    stored = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for name in args.modules:
        stored[name] = run_module(name, args.groups)
        RESULTS.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
