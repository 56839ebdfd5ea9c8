"""What the Snakefile's hooks and rule bodies call in the process that drives a run, so that
the workflow files stay declarative (docs/architecture.md). Each call is O(1) besides what
it delegates."""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Iterable
from typing import Any

#: ``later``: the driver prints the end summary itself, after the report.
END_SUMMARY_VARIABLE = "ATTNRMT_END_SUMMARY"


def after_block(fragment: str, run_plan: Any, results: str, blocks_left: Any, remote: bool) -> None:
    """What the driving process does as a block job ends (remote jobs do nothing): the
    progress line; Snakemake's idle rate-limiter wake-ups cancelled; the run's Dask cluster
    closed in the background once the last block's fragment is written (``blocks_left``:
    the gathers need no cluster, so the workers' teardown overlaps them)."""
    if remote:
        return
    from attnrmt.sweep.compute.cluster import cancel_rate_limiter_wakeups, shutdown_run_cluster
    from attnrmt.sweep.report.status import print_progress

    print_progress(run_plan, results)
    cancel_rate_limiter_wakeups()
    if blocks_left.finished(fragment):
        shutdown_run_cluster(results, wait=False)


def preload_imports() -> None:
    """Import Dask, distributed and xarray in the main thread when a run starts: two rule
    bodies (threads) importing dask at once can see a partially initialized module."""
    import dask.array  # noqa: F401
    import distributed  # noqa: F401
    import xarray  # noqa: F401


def print_end_summary(run_plan: Any, run_started: float, config_file: str, results: str) -> None:
    """The end-of-run summary (:func:`attnrmt.sweep.report.summary.run_summary`) and the
    dashboard link on stderr, unless the driver prints it after the report."""
    if os.environ.get(END_SUMMARY_VARIABLE) == "later":
        return
    from attnrmt.sweep.compute.cluster import dashboard_link
    from attnrmt.sweep.report.summary import run_summary

    for line in run_summary(
        run_plan, os.path.dirname(results) or ".", run_started, str(config_file)
    ):
        print(line, file=sys.stderr)
    link = dashboard_link(results)
    if link:
        print(f"Dask dashboard (while the run lasted): {link}", file=sys.stderr)


def prune_cell_cache(root: Any, config: Any) -> None:
    """Evict the shared cell cache's least recently used cells down to
    ``cell_cache.max_gb`` (:func:`attnrmt.sweep.store.cell_cache.prune`; O(entries)),
    saying so when it evicted any; nothing when the cache is off (``root`` None)."""
    if root is None:
        return
    from attnrmt.sweep.store.cell_cache import max_bytes, prune

    removed, freed = prune(root, max_bytes(config))
    if removed:
        print(
            f"attnrmt: cell cache {root}: {removed} least recently used cells evicted "
            f"({freed / 1e9:.2f} GB) to stay within cell_cache.max_gb",
            file=sys.stderr,
            flush=True,
        )


def print_max_failures_message(budget: Any, results: str) -> None:
    """The one max_failures message (:class:`attnrmt.sweep.compute.failures.FailureBudget`),
    when the run stopped because of it."""
    message = budget.exceeded(results)
    if message:
        print(f"attnrmt: {message}", file=sys.stderr)


def skip_exit_collection() -> None:
    """``gc.freeze()`` the heap of a process about to exit, so the interpreter's final
    collection skips it (seconds for the imports and DAG of a run, docs/scaling.md,
    "Pipeline overhead"); nothing of it needs collecting, the process ends."""
    gc.freeze()


def table_has_data(path: str, placeholder_columns: Iterable[str] = ("note",)) -> bool:
    """False for a table written without data (a header only, or the analysis's placeholder
    with a single ``note`` column); True when it does not exist yet (during a run: the
    report is made afterwards). Reads two lines."""
    try:
        with open(path, encoding="utf-8") as handle:
            header, first_row = handle.readline().strip(), handle.readline().strip()
    except FileNotFoundError:
        return True
    return header not in set(placeholder_columns) and bool(first_row)


def file_contains(path: str, marker: bytes) -> bool:
    """Whether the file at ``path`` holds ``marker`` (False when it does not exist yet:
    during a run, the report is made afterwards). O(bytes of the file)."""
    try:
        with open(path, "rb") as handle:
            return marker in handle.read()
    except FileNotFoundError:
        return False


_STORING = threading.Lock()


def report_finished_cells(run_plan: Any, results: str) -> None:
    """Store every sweep's finished cells (:func:`attnrmt.sweep.store.store_finished_cells`)
    and say so, one caller at a time: the Snakefile's onerror, and a stopped run's exit if
    onerror has not come in time (:func:`attnrmt.sweep.compute.cluster.stop_on_signals`)."""
    from attnrmt.sweep.store.cell_table.writer import store_finished_cells

    with _STORING:
        for line in store_finished_cells(run_plan, results):
            print(f"attnrmt: {line}", file=sys.stderr, flush=True)
