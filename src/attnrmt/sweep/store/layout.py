"""Where everything of a run lives: the one spelling of every path under ``results/<run>/``
(``docs/data-contract.md``, "Results folder"): :class:`RunLayout` (record, markers, logs,
figures, tables, report) and :class:`SweepLayout` (fragments, cache, salvage, failure
records, stores). Paths are built, never probed (O(1), no file touched); names may be
Snakemake wildcard patterns."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Where runs go, relative to the working directory.
RESULTS_DIRNAME = "results"
FRAGMENTS_DIRNAME = "fragments"
CACHE_DIRNAME = "cache"
SALVAGE_DIRNAME = "salvage"
FAILURES_DIRNAME = "failures"
FRAGMENT_SUFFIX = ".npz"


class _Under:
    """A path attribute of a layout: its ``root`` joined with ``parts``. O(1)."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, layout: Any, owner: Any = None) -> Path:
        return Path(layout.root).joinpath(*self.parts)


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run folder ``root`` (``results/<run>``)."""

    root: Path

    def __init__(self, root: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "root", Path(root))

    @classmethod
    def of(cls, run: str, results: str | os.PathLike[str] = RESULTS_DIRNAME) -> RunLayout:
        """The layout of run ``run`` under the results folder ``results``."""
        return cls(Path(results) / run)

    @property
    def name(self) -> str:
        """The run's name (the folder's)."""
        return self.root.name

    @property
    def workdir(self) -> Path:
        """The working directory the run was started in (Snakemake's ``.snakemake/``)."""
        return self.root.parent.parent

    record = _Under(".attnrmt-run.json")
    started_marker = _Under(".run-started")
    calibration = _Under(".calibration.json")
    cluster_dir = _Under(".dask")
    driver_dir = _Under("driver")
    report = _Under("report.html")
    figures_dir = _Under("figures")

    def figure(self, name: str, fmt: str) -> Path:
        return self.figures_dir / f"{name}.{fmt}"

    def table(self, name: str) -> Path:
        """``<run>/<name>.csv``."""
        return self.root / f"{name}.csv"

    def log(self, rule: str, *parts: str) -> Path:
        """``<run>/logs/<rule>/<parts...>``."""
        return self.root.joinpath("logs", rule, *parts)

    def sweep(self, name: str) -> SweepLayout:
        return SweepLayout(self.root / name)


@dataclass(frozen=True)
class SweepLayout:
    """The paths of one sweep folder ``root`` (``results/<run>/<sweep>``)."""

    root: Path

    def __init__(self, root: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "root", Path(root))

    @classmethod
    def of_fragment(cls, fragment: str | os.PathLike[str]) -> SweepLayout:
        """The sweep whose ``fragments/``, ``cache/`` or ``salvage/`` holds ``fragment``."""
        return cls(Path(fragment).parent.parent)

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def run(self) -> RunLayout:
        return RunLayout(self.root.parent)

    fragments_dir = _Under(FRAGMENTS_DIRNAME)
    cache_dir = _Under(CACHE_DIRNAME)
    salvage_dir = _Under(SALVAGE_DIRNAME)
    failures_dir = _Under(FAILURES_DIRNAME)
    cells = _Under("cells.zarr")
    theory = _Under("theory.zarr")
    analysis = _Under("analysis.zarr")

    def fragment(self, block: str) -> Path:
        return self.fragments_dir / f"{block}{FRAGMENT_SUFFIX}"

    def cached(self, block: str) -> Path:
        return self.cache_dir / f"{block}{FRAGMENT_SUFFIX}"

    def failure_record(self, block: str) -> Path:
        return self.failures_dir / f"{block}.json"
