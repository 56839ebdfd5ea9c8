"""Where a run stands (docs/cluster.md, "Long sweeps"). The one count of a sweep's cells
(``attnrmt plan``, ``attnrmt status``, the progress line, the end summary): **done** when a
verified fragment of the sweep holds the cell (the one index of finished cells,
:func:`attnrmt.sweep.store.fragments.finished_keys`), **failed** when a standing failure
record names it, **pending** otherwise, split into running and queued while a live
Snakemake holds a token (else missing); throughput over the fragments finished in the last
:data:`_RATE_WINDOW_SECONDS` (:func:`throughput`) and the ETA. Read-only. Cost:
O(fragments) ``stat`` calls (each file's ids read once per process), O(planned cells), two
members of at most :data:`_MAX_TIMED_FRAGMENTS` fragments."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.sweep.compute.failures import (
    count_failures_by_cause,
    describe_causes,
    merge_cause_counts,
)
from attnrmt.sweep.spec.cost import (
    CELL_OVERHEAD_SECONDS,
    DEFAULT_SECONDS_PER_WORK,
    planned_cell_work,
)
from attnrmt.sweep.store import fragments
from attnrmt.sweep.store.failures import unresolved_failures
from attnrmt.sweep.store.guard import live_run_since
from attnrmt.sweep.store.layout import RunLayout

#: Throughput is measured over fragments finished within this many seconds before now.
_RATE_WINDOW_SECONDS = 300.0
#: At most this many of the newest fragments have their timings read (calibration, rate).
_MAX_TIMED_FRAGMENTS = 256
#: A run prints its progress line at most once per this many seconds.
PROGRESS_INTERVAL_SECONDS = 30.0
#: ... and spends at most this share of one core on it (:func:`next_progress_wait`).
PROGRESS_CPU_SHARE = 0.02

#: The block jobs' logs: ``logs/simulate_block/<sweep>/<block>.log`` (:class:`RunLayout`).
BLOCK_LOG_RULE = "simulate_block"


@dataclass(frozen=True)
class FragmentFile:
    """One fragment file on disk: where, which block name, when it finished."""

    path: Path
    block: str
    mtime: float
    planned: bool
    """True when ``block`` is a block key of the current plan (its cells are known)."""


def scan_fragment_files(sweep_dir: Path, planned_blocks: Iterable[str]) -> list[FragmentFile]:
    """Every complete fragment of a sweep, a block's ``cache/`` copy only without its
    ``fragments/`` file (:func:`attnrmt.sweep.store.fragments.fragment_files`). O(files)."""
    planned = set(planned_blocks)
    found = []
    for name, signature in fragments.fragment_files(sweep_dir):
        path = Path(name)
        twin = fragments.twin_of(path) is not None  # a block's fragment or its cache copy
        found.append(
            FragmentFile(path, path.stem, signature[3] / 1e9, twin and path.stem in planned)
        )
    return found


def done_cell_keys(sweep_plan: Any, sweep_dir: Path) -> set[str]:
    """Keys of the sweep's planned cells its fragments hold (the one index of finished
    cells, :func:`attnrmt.sweep.store.fragments.finished_keys`)."""
    return fragments.finished_keys(sweep_plan.cell_keys(), sweep_dir)


@dataclass(frozen=True)
class SweepCount:
    """What one sweep's files say: its fragment files, done and failed cell keys."""

    sweep_plan: Any
    files: list[FragmentFile]
    done: set[str]
    failed: set[str]
    failed_by_cause: dict[str, int]
    failed_records: list[dict[str, Any]]
    """The standing failure records of the failed cells (store/failures.py)."""

    @property
    def cells(self) -> int:
        """Planned cells of the sweep."""
        return int(self.sweep_plan.n_cells)

    @property
    def pending(self) -> int:
        """Planned cells neither done nor failed."""
        return self.cells - len(self.done) - len(self.failed)


def count_sweep(sweep_plan: Any, sweep_dir: str | os.PathLike[str]) -> SweepCount:
    """Done, failed and pending cells of one planned sweep from its files (module docstring)."""
    sweep_dir = Path(sweep_dir)
    files = scan_fragment_files(sweep_dir, (block.key for block in sweep_plan.blocks))
    done = done_cell_keys(sweep_plan, sweep_dir)
    planned_keys = set(sweep_plan.cell_keys())
    standing = [
        cell
        for cell in unresolved_failures(sweep_dir, done)
        if cell.get("key") in planned_keys and cell.get("key") not in done
    ]
    failed = {str(cell.get("key")) for cell in standing}
    return SweepCount(sweep_plan, files, done, failed, count_failures_by_cause(standing), standing)


@dataclass(frozen=True)
class FragmentTiming:
    """Timing of one finished block: mtime, its cells and what the computed ones cost."""

    mtime: float
    n_cells: int
    computed_seconds: float  # sum of compute_seconds of the cells its job computed
    computed_work: float  # their work units by the cost model
    n_computed: int


def read_cell_timings(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(computed, compute_seconds)`` of a fragment, verified, reading only those members."""
    arrays = fragments.read_fragment_members(
        path, ("computed", "compute_seconds"), ("compute_seconds",)
    )
    computed = np.asarray(arrays["computed"], dtype=bool)
    return computed, np.asarray(arrays.get("compute_seconds", np.zeros(computed.shape)), float)


_TIMINGS: dict[tuple[str, float], FragmentTiming | None] = {}


def fragment_timing(file: FragmentFile, block: Any) -> FragmentTiming | None:
    """:class:`FragmentTiming` of a planned block's fragment (None if unreadable), cached by
    path and mtime. O(its cells) on first sight."""
    key = (str(file.path), file.mtime)
    if key not in _TIMINGS:
        try:
            computed, seconds = read_cell_timings(file.path)
        except (OSError, ValueError):  # absent, replaced or damaged
            return None
        work = np.array([planned_cell_work(cell) for cell in block.cells])
        _TIMINGS[key] = None  # a fragment of another plan's block
        if computed.size == work.size:
            sums = float(seconds[computed].sum()), float(work[computed].sum())
            _TIMINGS[key] = FragmentTiming(file.mtime, computed.size, *sums, int(computed.sum()))
    return _TIMINGS[key]


def _running_blocks(
    sweep_plan: Any, run_dir: Path, done: set[str], failed: set[str], since: float
) -> list[Any]:
    """Unfinished blocks of a sweep whose log was written at or after ``since``. O(blocks)."""
    log_dir = RunLayout(run_dir).log(BLOCK_LOG_RULE, sweep_plan.name)
    running = []
    for block in sweep_plan.blocks:
        keys = block.cell_keys
        if all(key in done or key in failed for key in keys):
            continue
        try:
            if (log_dir / f"{block.key}.log").stat().st_mtime >= since:
                running.append(block)
        except OSError:
            continue
    return running


def recalibrated_seconds_per_work(
    timings: Sequence[FragmentTiming], fallback: float = DEFAULT_SECONDS_PER_WORK
) -> float:
    """``max(sum (compute_seconds - CELL_OVERHEAD_SECONDS), 0) / sum work`` over the computed
    cells; ``fallback`` when none was computed. O(timings)."""
    n_computed = sum(timing.n_computed for timing in timings)
    work = sum(timing.computed_work for timing in timings)
    if n_computed == 0 or work <= 0:
        return fallback
    seconds = sum(timing.computed_seconds for timing in timings)
    return max(seconds - n_computed * CELL_OVERHEAD_SECONDS, 0.0) / work


def throughput(
    timings: Sequence[FragmentTiming], now: float, window_seconds: float = _RATE_WINDOW_SECONDS
) -> tuple[float | None, float | None]:
    """``(cells_per_second, busy_cores)`` over the fragments finished in the last
    ``window_seconds`` at ``t_1 <= ... <= t_k``: ``sum_{i>=2} cells_i / (t_k - t_1)``, and the
    same of ``compute_seconds``; ``(None, None)`` with fewer than two fragments or one instant."""
    recent = sorted(
        (timing for timing in timings if now - window_seconds <= timing.mtime <= now + 1.0),
        key=lambda timing: timing.mtime,
    )
    if len(recent) < 2:
        return None, None
    span = recent[-1].mtime - recent[0].mtime
    if span <= 0:
        return None, None
    cells = sum(timing.n_cells for timing in recent[1:])
    core_seconds = sum(timing.computed_seconds for timing in recent[1:])
    return cells / span, core_seconds / span


def eta_seconds(remaining_core_seconds: float, busy_cores: float | None) -> float | None:
    """Wall seconds left: remaining one-core seconds over busy cores (0 when nothing remains,
    None when the throughput is unknown)."""
    if remaining_core_seconds <= 0:
        return 0.0
    if busy_cores is None or busy_cores <= 0:
        return None
    return remaining_core_seconds / busy_cores


@dataclass(frozen=True)
class SweepStatus:
    """Counts, throughput and ETA of one sweep (module docstring)."""

    sweep: str
    cells: int
    done: int
    failed: int
    pending: int
    running: int | None
    queued: int | None
    missing: int | None
    cells_per_second: float | None
    remaining_core_seconds: float
    eta_seconds: float | None
    last_fragment_age_seconds: float | None
    failed_by_cause: dict[str, int] = field(default_factory=dict)
    """Failed cells per cause (:func:`attnrmt.sweep.compute.failures.count_failures_by_cause`)."""

    @property
    def percent_done(self) -> float:
        """Done cells in percent of the planned ones (100 for an empty sweep)."""
        return 100.0 * self.done / self.cells if self.cells else 100.0


@dataclass(frozen=True)
class RunStatus:
    """Status of every sweep of a run and of the run as a whole."""

    run: str
    time: float
    sweeps: list[SweepStatus]
    total: SweepStatus
    seconds_per_work: float
    calibrated: bool
    """True when ``seconds_per_work`` comes from measured cells, False for the default."""
    live: bool | None
    """Whether a Snakemake of the workflow is alive in the run's directory (None: unknown)."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``attnrmt status --json``)."""
        return {
            "run": self.run,
            "time": self.time,
            "seconds_per_work": self.seconds_per_work,
            "calibrated": self.calibrated,
            "live": self.live,
            "sweeps": [{**asdict(row), "percent_done": row.percent_done} for row in self.sweeps],
            "total": {**asdict(self.total), "percent_done": self.total.percent_done},
        }


def _newest_timings(scans: Sequence[SweepCount]) -> dict[str, list[FragmentTiming]]:
    """Timings of the newest :data:`_MAX_TIMED_FRAGMENTS` planned fragments, per sweep."""
    candidates = [
        (file, scan)
        for scan in scans
        for file in scan.files
        if file.planned and file.path.parent.name == fragments.FRAGMENTS_DIRNAME
    ]
    candidates.sort(key=lambda pair: pair[0].mtime, reverse=True)
    timings: dict[str, list[FragmentTiming]] = {scan.sweep_plan.name: [] for scan in scans}
    blocks = {scan.sweep_plan.name: scan.sweep_plan.block_index() for scan in scans}
    for file, scan in candidates[:_MAX_TIMED_FRAGMENTS]:
        timing = fragment_timing(file, blocks[scan.sweep_plan.name][file.block])
        if timing is not None:
            timings[scan.sweep_plan.name].append(timing)
    return timings


def remaining_work(
    sweep_plan: Any, done: set[str], failed: set[str], seconds_per_work: float
) -> float:
    """One-core seconds left of a sweep's unfinished cells (a cell's cost depends only on its
    line, so one estimate per block). O(cells)."""
    seconds = 0.0
    for block in sweep_plan.blocks:
        left = sum(key not in done and key not in failed for key in block.cell_keys)
        if left:
            work = planned_cell_work(block.cells[0])
            seconds += (CELL_OVERHEAD_SECONDS + work * seconds_per_work) * left
    return seconds


def _sweep_row(
    scan: SweepCount,
    timings: Sequence[FragmentTiming],
    seconds_per_work: float,
    busy_cores: float | None,
    now: float,
    window_seconds: float,
    split: tuple[int | None, int | None, int | None],
) -> SweepStatus:
    """One sweep's row from the one counter (:class:`SweepCount`)."""
    remaining = remaining_work(scan.sweep_plan, scan.done, scan.failed, seconds_per_work)
    cells_per_second, _ = throughput(timings, now, window_seconds)
    newest = max((file.mtime for file in scan.files if file.planned), default=None)
    return SweepStatus(
        sweep=scan.sweep_plan.name,
        cells=scan.cells,
        done=len(scan.done),
        failed=len(scan.failed),
        pending=scan.pending,
        running=split[0],
        queued=split[1],
        missing=split[2],
        cells_per_second=cells_per_second,
        remaining_core_seconds=remaining,
        eta_seconds=eta_seconds(remaining, busy_cores),
        last_fragment_age_seconds=None if newest is None else max(now - newest, 0.0),
        failed_by_cause=scan.failed_by_cause,
    )


def _pending_split(
    scan: SweepCount, run_dir: Path, known: bool, since: float | None
) -> tuple[int | None, int | None, int | None]:
    """``(running, queued, missing)`` cells of a sweep (module docstring)."""
    pending = scan.pending
    if not known:
        return None, None, None
    if since is None:
        return 0, 0, pending
    blocks = _running_blocks(scan.sweep_plan, run_dir, scan.done, scan.failed, since)
    running = sum(
        key not in scan.done and key not in scan.failed
        for block in blocks
        for key in block.cell_keys
    )
    return running, pending - running, 0


def computing_split(
    splits: Sequence[tuple[int | None, int | None, int | None]], busy_cores: float | None
) -> list[tuple[int | None, int | None, int | None]]:
    """``(running, queued, missing)`` per sweep with running only the cells being computed
    (``max(1, round(busy_cores))`` handed to sweeps in order; unchanged without a measured
    throughput). O(sweeps)."""
    if busy_cores is None:
        return list(splits)
    slots = max(1, round(busy_cores))
    result = []
    for running, queued, missing in splits:
        if running is None or queued is None:
            result.append((running, queued, missing))
            continue
        computing = min(running, slots)
        slots -= computing
        result.append((computing, queued + running - computing, missing))
    return result


def run_status(
    run_plan: Any,
    run_dir: str | os.PathLike[str],
    now: float | None = None,
    window_seconds: float = _RATE_WINDOW_SECONDS,
) -> RunStatus:
    """Status of every sweep of ``run_plan`` from the files under ``run_dir`` at ``now``, busy
    cores measured run-wide. Read-only; O(fragments + planned cells)."""
    now = time.time() if now is None else float(now)
    run_dir = Path(run_dir)
    scans = [count_sweep(sweep, run_dir / name) for name, sweep in run_plan.sweeps.items()]
    timings = _newest_timings(scans)
    all_timings = [timing for sweep_timings in timings.values() for timing in sweep_timings]
    calibrated = any(timing.n_computed for timing in all_timings)
    seconds_per_work = recalibrated_seconds_per_work(all_timings)
    _, busy_cores = throughput(all_timings, now, window_seconds)
    known, since = live_run_since(RunLayout(run_dir).workdir)
    if known and since is None:
        busy_cores = None  # a stopped run makes no progress: no ETA
    splits = computing_split(
        [_pending_split(scan, run_dir, known, since) for scan in scans], busy_cores
    )
    context = (seconds_per_work, busy_cores, now, window_seconds)
    rows = [
        _sweep_row(scan, timings[scan.sweep_plan.name], *context, split)
        for scan, split in zip(scans, splits, strict=True)
    ]

    def summed(name: str) -> Any:
        return sum(getattr(row, name) or 0 for row in rows)

    ages = [row.last_fragment_age_seconds for row in rows]
    remaining = summed("remaining_core_seconds")
    in_flight: dict[str, Any] = {
        n: summed(n) if known else None for n in ("running", "queued", "missing")
    }
    total = SweepStatus(
        sweep="total",
        **{name: summed(name) for name in ("cells", "done", "failed", "pending")},
        **in_flight,
        cells_per_second=throughput(all_timings, now, window_seconds)[0],
        remaining_core_seconds=remaining,
        eta_seconds=eta_seconds(remaining, busy_cores),
        last_fragment_age_seconds=min((age for age in ages if age is not None), default=None),
        failed_by_cause=merge_cause_counts(row.failed_by_cause for row in rows),
    )
    live = (since is not None) if known else None
    return RunStatus(run_plan.run, now, rows, total, seconds_per_work, calibrated, live)


def format_duration(seconds: float | None) -> str:
    """``"3.5 s"``, ``"42 s"``, ``"3.5 min"``, ``"2.1 h"``, ``"1.5 d"``; ``"unknown"`` for None."""
    if seconds is None:
        return "unknown"
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def rate_text(cells_per_second: float | None) -> str:
    """``"2.1 cells/s"``, ``"42 cells/min"``; ``"-"`` when unknown. O(1)."""
    if cells_per_second is None:
        return "-"
    if cells_per_second >= 1:
        return f"{cells_per_second:.3g} cells/s"
    return f"{cells_per_second * 60:.3g} cells/min"


def progress_line(status: RunStatus) -> str:
    """One line: run, done / total cells (percent), failed, throughput, ETA."""
    total = status.total
    failed = (
        f", {total.failed:,} failed ({describe_causes(total.failed_by_cause)})"
        if total.failed
        else ""
    )
    rate = total.cells_per_second
    return (
        f"attnrmt: progress {status.run}: {total.done:,}/{total.cells:,} cells "
        f"({total.percent_done:.1f}%){failed}, "
        f"{'rate not yet measured' if rate is None else rate_text(rate)}, "
        f"ETA {format_duration(total.eta_seconds)}"
    )


def format_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as aligned lines: the first column left-aligned, the others right. O(cells)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            value.rjust(width) if i else value.ljust(width)
            for i, (value, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]


def status_table(status: RunStatus) -> list[str]:
    """Lines of ``attnrmt status``: a table per sweep and a total, then the calibration."""
    columns = "sweep cells done % failed running queued missing rate ETA".split()
    lines: list[tuple[str, ...]] = [(*columns, "last block")]
    for row in [*status.sweeps, status.total]:
        age = row.last_fragment_age_seconds
        split = ["?" if n is None else f"{n:,}" for n in (row.running, row.queued, row.missing)]
        counts = f"{row.cells:,}", f"{row.done:,}", f"{row.percent_done:.1f}", f"{row.failed:,}"
        timing = rate_text(row.cells_per_second), format_duration(row.eta_seconds)
        last = "-" if age is None else format_duration(age) + " ago"
        lines.append((row.sweep, *counts, *split, *timing, last))
    text = format_table(lines)
    if status.total.failed:
        text.append(f"failed cells by cause: {describe_causes(status.total.failed_by_cause)}")
    source = (
        "recalibrated from the compute_seconds of the newest finished cells"
        if status.calibrated
        else "built-in constant (no computed cell yet)"
    )
    text.append(
        f"ETA: pending cells' cost-model seconds ({status.seconds_per_work:.2e} s per work "
        f"unit, {source}) over the cores busy in the last {_RATE_WINDOW_SECONDS:.0f} s; "
        + {
            True: "a live Snakemake runs the sweep; running = cells being computed (as many "
            "as cores were busy; until that is measured, every cell of the blocks in "
            "flight)",
            False: "no live Snakemake in the run's directory: pending cells are missing, no ETA",
            None: "cannot tell running from queued here (? = unknown)",
        }[status.live]
    )
    return text


_last_progress = [0.0, 0.0]  # when the last line started (monotonic), its CPU seconds
_progress_lock = threading.Lock()


def next_progress_wait(
    last_cost_seconds: float, interval_seconds: float, cpu_share: float = PROGRESS_CPU_SHARE
) -> float:
    """Seconds until the next progress line: ``interval_seconds``, or longer so that the lines
    take at most ``cpu_share`` of a core. O(1)."""
    return max(interval_seconds, last_cost_seconds / cpu_share)


def print_progress(
    run_plan: Any,
    run_dir: str | os.PathLike[str],
    interval_seconds: float = PROGRESS_INTERVAL_SECONDS,
    stream: Any = None,
) -> str | None:
    """Print :func:`progress_line` unless this process printed one within
    :func:`next_progress_wait`; the line, or None (never raises: block jobs call it)."""
    with _progress_lock:
        now = time.monotonic()
        wait = next_progress_wait(_last_progress[1], interval_seconds)
        if _last_progress[0] and now - _last_progress[0] < wait:
            return None
        _last_progress[0] = now
    started = time.thread_time()
    try:
        line = progress_line(run_status(run_plan, run_dir))
    except Exception:  # a progress line must never fail a block job
        return None
    finally:
        _last_progress[1] = time.thread_time() - started
    print(line, file=sys.stderr if stream is None else stream, flush=True)
    return line
