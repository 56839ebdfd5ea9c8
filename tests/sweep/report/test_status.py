"""attnrmt.sweep.report.status and `attnrmt status`: counts, throughput, ETA, progress line.
Fragments are written by the real fragment writer (tests/sweep/conftest.py); their mtimes
are set with os.utime to replay a known schedule, and ``now`` is passed explicitly.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from attnrmt import cli
from attnrmt.sweep.report import status
from attnrmt.sweep.spec.cost import CELL_OVERHEAD_SECONDS
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.sweep.store import fragments
from attnrmt.sweep.store.failures import record_block_failures
from attnrmt.sweep.store.guard import claim_run_dir
from attnrmt.sweep.store.layout import RunLayout
from tests.e2e.helpers import subprocess_environment
from tests.sweep.conftest import store_config, write_block
from tests.sweep.report.conftest import EPOCH, uniform_config, write_timed_block


def replay_schedule(
    n_blocks: int, block_seconds: np.ndarray, workers: int, overhead: float
) -> np.ndarray:
    """Finish time of each block when ``workers`` take blocks in order as they free up,
    each block taking its compute seconds plus ``overhead`` of wall time."""
    free = np.zeros(workers)
    finished = np.empty(n_blocks)
    for index in range(n_blocks):
        worker = int(np.argmin(free))
        free[worker] += block_seconds[index] + overhead
        finished[index] = free[worker]
    return finished


def test_counts_done_failed_and_pending_from_fragments_salvage_and_failures(
    tmp_path: Path,
) -> None:
    plan = plan_run(uniform_config(n_snr=3, block_size=2))  # 12 cells, 6 blocks
    sweep = plan.sweeps["grid"]
    sweep_dir = tmp_path / "unit" / "grid"
    first, second, third = sweep.blocks[:3]
    write_timed_block(plan, sweep_dir, first, np.full(2, 0.5), EPOCH)
    # a salvaged half of the second block: one done cell, read by key
    write_block(
        plan, sweep_dir / fragments.SALVAGE_DIRNAME / f"{second.key}.npz", [second.cells[0]]
    )
    record_block_failures(
        sweep_dir / fragments.FRAGMENTS_DIRNAME / f"{third.key}.npz",
        [
            {"key": cell.key, "seed": "[]", "params": {}, "error": "boom", "cause": cause}
            for cell, cause in zip(third.cells, ["numerical", "killed"], strict=True)
        ],
    )

    result = status.run_status(plan, tmp_path / "unit", now=EPOCH + 1)

    row = result.sweeps[0]
    assert (row.cells, row.done, row.failed, row.pending) == (12, 3, 2, 7)
    assert (row.running, row.queued, row.missing) == (0, 0, 7)  # no live Snakemake
    assert result.live is False
    assert result.total.done == 3 and result.total.percent_done == pytest.approx(25.0)
    assert row.last_fragment_age_seconds == pytest.approx(1.0)
    # failed cells by cause: per sweep, in the total, the table and the progress line
    assert row.failed_by_cause == result.total.failed_by_cause == {"killed": 1, "numerical": 1}
    assert "failed cells by cause: 1 killed, 1 numerical" in status.status_table(result)
    assert "2 failed (1 killed, 1 numerical)" in status.progress_line(result)


def test_finished_run_is_100_percent_with_zero_eta(tmp_path: Path) -> None:
    plan = plan_run(uniform_config(n_snr=2, block_size=4))
    sweep = plan.sweeps["grid"]
    for index, block in enumerate(sweep.blocks):
        write_timed_block(plan, tmp_path / "unit" / "grid", block, np.full(4, 0.1), EPOCH + index)
    result = status.run_status(plan, tmp_path / "unit", now=EPOCH + 10)
    assert result.total.percent_done == 100.0
    assert result.total.pending == 0
    assert result.total.eta_seconds == 0.0
    assert "(100.0%)" in status.progress_line(result)


# Holds a token as Snakemake does, then looks at the run's liveness from inside (as the
# progress line does in Snakemake): that must not drop its own lock.
HOLD_TOKEN = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from attnrmt.sweep.store.guard import hold_liveness_token\n"
    "from attnrmt.sweep.store.guard import live_run_since\n"
    "token = hold_liveness_token(sys.argv[1])\n"
    "assert live_run_since(Path(sys.argv[1]))[1] is not None\n"
    "print(token, flush=True)\n"
    "time.sleep(600)\n"
)


def test_running_queued_and_missing_follow_a_live_snakemake_token(tmp_path: Path) -> None:
    """A real process holds a liveness token as Snakemake does (attnrmt.sweep.store.guard):
    blocks whose log started after it are running, the rest queued; once it is killed,
    every pending cell is missing."""
    plan = plan_run(uniform_config(n_snr=3, block_size=2))  # 6 blocks of 2 cells
    sweep = plan.sweeps["grid"]
    run_dir = tmp_path / "results" / plan.run
    write_timed_block(plan, run_dir / "grid", sweep.blocks[0], np.full(2, 1.0), EPOCH)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_TOKEN, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_environment(),
    )
    try:
        token = Path(holder.stdout.readline().strip())
        started = token.stat().st_mtime
        log_dir = RunLayout(run_dir).log(status.BLOCK_LOG_RULE, "grid")
        log_dir.mkdir(parents=True)
        for block, mtime in (
            (sweep.blocks[0], started + 1),
            (sweep.blocks[1], started + 1),
            (sweep.blocks[2], started - 100),
        ):  # done, running, earlier run
            log = log_dir / f"{block.key}.log"
            log.write_text("")
            os.utime(log, (mtime, mtime))

        live = status.run_status(plan, run_dir, now=EPOCH + 1)
        assert live.live is True
        assert (live.total.running, live.total.queued, live.total.missing) == (2, 8, 0)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    dead = status.run_status(plan, run_dir, now=EPOCH + 1)
    assert dead.live is False
    assert (dead.total.running, dead.total.queued, dead.total.missing) == (0, 0, 10)


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5, 0.8])
def test_eta_of_a_uniform_sweep_is_within_a_factor_1_5_of_the_real_remaining_time(
    tmp_path: Path, fraction: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay: 80 cells in 40 blocks on 2 workers, each cell 1.0 s +-30 % (uniform, seed
    7), 0.5 s of wall overhead per block that no compute_seconds records, and cells 40x
    slower than the built-in cost constant (so an unrecalibrated model would be 40x off).
    The factor 1.5 is the issue's requirement. Measured ETA / real remaining over seeds
    0-19: 0.69-0.83 at 10 % (early, the two workers' first blocks finish together, so
    the rate from fragment 2..k over t_k - t_1 is high), 0.84-1.00 at 25 %, 0.91-1.04 at
    50 %, 0.91-1.13 at 80 %; seed 7 gives 0.72, 0.96, 0.98, 1.01."""
    plan = plan_run(uniform_config(n_snr=20, block_size=2))
    sweep = plan.sweeps["grid"]
    rng = np.random.default_rng(7)
    work = status.planned_cell_work(sweep.cells[0])
    nominal = CELL_OVERHEAD_SECONDS + 40 * work * status.DEFAULT_SECONDS_PER_WORK
    seconds = nominal * rng.uniform(0.7, 1.3, size=(len(sweep.blocks), 2))
    finished = replay_schedule(len(sweep.blocks), seconds.sum(axis=1), 2, overhead=0.5 * nominal)
    order = np.argsort(finished)
    n_done = int(np.ceil(fraction * len(sweep.blocks)))
    for index in order[:n_done]:
        write_timed_block(
            plan,
            tmp_path / "unit" / "grid",
            sweep.blocks[index],
            seconds[index],
            EPOCH + finished[index],
        )
    now = finished[order[n_done - 1]]
    real_remaining = finished.max() - now

    stopped = status.run_status(
        plan, tmp_path / "unit", now=EPOCH + now, window_seconds=10 * finished.max()
    )
    assert stopped.live is False  # no Snakemake holds a liveness token: a stopped run
    assert stopped.total.eta_seconds is None and "ETA unknown" in status.progress_line(stopped)
    # the same files while a Snakemake works in the run's directory (since the replay began)
    monkeypatch.setattr(status, "live_run_since", lambda workdir: (True, EPOCH))
    result = status.run_status(
        plan, tmp_path / "unit", now=EPOCH + now, window_seconds=10 * finished.max()
    )

    assert result.live is True and result.calibrated
    assert result.total.done == 2 * n_done
    assert result.total.eta_seconds is not None
    assert 1 / 1.5 <= result.total.eta_seconds / real_remaining <= 1.5


def test_running_counts_the_cells_the_busy_cores_compute() -> None:
    """All cells of the blocks in flight are submitted to Dask, but only as many run as
    cores are busy (one core per cell): 2.4 busy cores run 2 cells, the first sweep's;
    the rest of the in-flight cells are queued. Totals are kept; unmeasured: unchanged."""
    splits = [(6, 10, 0), (4, 0, 0), (None, None, None)]
    assert status.computing_split(splits, 2.4) == [(2, 14, 0), (0, 4, 0), (None, None, None)]
    assert status.computing_split(splits, 7.0) == [(6, 10, 0), (1, 3, 0), (None, None, None)]
    assert status.computing_split(splits, 0.2)[0] == (1, 15, 0)  # a busy core runs a cell
    assert status.computing_split(splits, None) == splits


def test_recalibration_follows_measured_compute_seconds() -> None:
    timings = [
        status.FragmentTiming(
            mtime=EPOCH, n_cells=4, computed_seconds=4 * 1.002, computed_work=4 * 1e9, n_computed=4
        )
    ]
    assert status.recalibrated_seconds_per_work(timings) == pytest.approx(1e-9)
    assert status.recalibrated_seconds_per_work([], fallback=3.0) == 3.0
    overhead_only = [
        status.FragmentTiming(
            mtime=EPOCH, n_cells=2, computed_seconds=0.001, computed_work=2e6, n_computed=2
        )
    ]
    assert status.recalibrated_seconds_per_work(overhead_only, fallback=3.0) == 0.0


def test_throughput_uses_only_the_window_and_needs_two_fragments() -> None:
    def timing(mtime: float) -> status.FragmentTiming:
        return status.FragmentTiming(
            mtime=mtime, n_cells=10, computed_seconds=20.0, computed_work=1.0, n_computed=10
        )

    timings = [timing(EPOCH), timing(EPOCH + 1000), timing(EPOCH + 1010), timing(EPOCH + 1020)]
    cells_per_second, busy_cores = status.throughput(timings, now=EPOCH + 1030, window_seconds=100)
    assert cells_per_second == pytest.approx(20 / 20)  # fragments 2..3 over t_3 - t_1
    assert busy_cores == pytest.approx(40 / 20)
    assert status.throughput(timings[:2], now=EPOCH + 1030, window_seconds=100) == (None, None)
    assert status.eta_seconds(100.0, None) is None


def test_a_stalled_run_has_no_eta(tmp_path: Path) -> None:
    plan = plan_run(uniform_config(n_snr=3, block_size=2))
    sweep = plan.sweeps["grid"]
    for index, block in enumerate(sweep.blocks[:3]):
        write_timed_block(plan, tmp_path / "unit" / "grid", block, np.full(2, 1.0), EPOCH + index)
    result = status.run_status(plan, tmp_path / "unit", now=EPOCH + 2 + 10 * 3600)
    assert result.total.pending == 6
    assert result.total.eta_seconds is None
    assert "ETA unknown" in status.progress_line(result)


def test_progress_line_is_printed_at_most_once_per_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(status, "_last_progress", [0.0, 0.0])
    plan = plan_run(uniform_config(n_snr=3, block_size=2))
    write_timed_block(
        plan, tmp_path / "unit" / "grid", plan.sweeps["grid"].blocks[0], np.full(2, 1.0), EPOCH
    )
    stream = io.StringIO()
    first = status.print_progress(plan, tmp_path / "unit", interval_seconds=3600, stream=stream)
    second = status.print_progress(plan, tmp_path / "unit", interval_seconds=3600, stream=stream)
    assert first is not None and first.startswith("attnrmt: progress unit: 2/12 cells (16.7%)")
    assert second is None
    assert stream.getvalue() == first + "\n"
    assert status._last_progress[1] > 0.0  # the line's CPU cost, which spaces the next


def test_progress_lines_keep_to_their_share_of_a_core() -> None:
    """A line that cost c CPU seconds delays the next by c / PROGRESS_CPU_SHARE (so the
    progress of a 10^6-cell run cannot eat the driving process), never by less than the
    interval."""
    share = status.PROGRESS_CPU_SHARE
    assert status.next_progress_wait(0.0, 30.0) == 30.0
    assert status.next_progress_wait(0.1, 30.0) == 30.0  # cheap lines: the interval
    assert status.next_progress_wait(5.0, 30.0) == pytest.approx(5.0 / share)
    assert status.next_progress_wait(5.0, 30.0, cpu_share=0.5) == 30.0


@pytest.fixture
def claimed_run(tmp_path: Path) -> tuple[Path, Path, Any]:
    """A config file, its run directory (claimed, two blocks done) and its plan."""
    config = uniform_config(n_snr=3, block_size=2)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    plan = plan_run(config)
    run_dir = tmp_path / "results" / plan.run
    claim_run_dir(run_dir, config_file)
    for block in plan.sweeps["grid"].blocks[:2]:
        write_timed_block(plan, run_dir / "grid", block, np.full(2, 1.0), EPOCH)
    return config_file, run_dir, plan


def test_status_command_reads_a_run_directory_or_a_config(
    claimed_run: tuple[Path, Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    config_file, run_dir, _ = claimed_run
    assert cli.main(["status", str(run_dir), "--json"]) == cli.EXIT_OK
    by_dir = json.loads(capsys.readouterr().out)
    assert by_dir["total"]["done"] == 4 and by_dir["total"]["cells"] == 12
    assert by_dir["sweeps"][0]["pending"] == 8
    args = ["status", str(config_file), "--results", str(run_dir.parent)]
    assert cli.main(args) == cli.EXIT_OK
    table = capsys.readouterr().out
    assert "grid" in table and "33.3" in table and "no live Snakemake" in table


def test_status_command_refuses_a_folder_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status", str(tmp_path)]) == cli.EXIT_USAGE
    assert ".attnrmt-run.json" in capsys.readouterr().err


def test_status_watch_refreshes_until_interrupted(claimed_run: tuple[Path, Path, Any]) -> None:
    _, run_dir, plan = claimed_run
    watcher = subprocess.Popen(
        [sys.executable, "-m", "attnrmt.cli", "status", str(run_dir), "--json", "--watch", "0.1"],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_environment(),
    )
    try:
        first = json.loads(watcher.stdout.readline())
        write_timed_block(
            plan, run_dir / "grid", plan.sweeps["grid"].blocks[2], np.full(2, 1.0), EPOCH
        )
        seen = [first["total"]["done"]]
        for _ in range(600):  # refreshes until the new block shows (bounded: no hang)
            seen.append(json.loads(watcher.stdout.readline())["total"]["done"])
            if seen[-1] == 6:
                break
    finally:
        watcher.kill()
        watcher.wait()
        watcher.stdout.close()
    assert seen[0] == 4 and seen[-1] == 6


def test_remaining_work_by_block_equals_the_cell_by_cell_sum() -> None:
    """status.remaining_work costs a sweep block by block (one cell built per block); it
    must equal costing every cell, for any done/failed split."""
    config = store_config(d=[10, 24], T=[4, 8], weights=["mean", "harmonic"], replicates=3)
    config["execution"] = {"block_size": 5}
    sweep = next(iter(plan_run(config).sweeps.values()))
    cells = list(sweep.cells)
    keys = [cell.key for cell in cells]
    rng = np.random.default_rng(0)
    done = {key for key in keys if rng.random() < 0.4}
    failed = {key for key in keys if key not in done and rng.random() < 0.2}
    seconds = status.remaining_work(sweep, done, failed, 1e-9)
    expected = sum(
        status.CELL_OVERHEAD_SECONDS + status.planned_cell_work(cell) * 1e-9
        for cell in cells
        if cell.key not in done and cell.key not in failed
    )
    assert seconds == pytest.approx(expected, rel=1e-12)


def test_status_watch_shows_the_run_bar_until_nothing_is_left(
    claimed_run: tuple[Path, Path, Any],
) -> None:
    """Without --json, --watch prints the table once, then the progress bar of attnrmt run
    (without a terminal: one plain line per refresh); once no live run has cells pending
    it prints the final state and exits by itself."""
    _, run_dir, plan = claimed_run
    watcher = subprocess.Popen(
        [sys.executable, "-m", "attnrmt", "status", str(run_dir), "--watch", "0.1"],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_environment(),
    )
    try:
        lines = [watcher.stdout.readline() for _ in range(3)]
        assert lines[0].startswith(f"run {plan.run!r} -> {run_dir} at ")
        while not (line := watcher.stdout.readline()).startswith("attnrmt: progress"):
            lines.append(line)
        assert "4/12 cells (33.3%)" in line and line.rstrip().endswith("; no live run")
        for block in plan.sweeps["grid"].blocks[2:]:
            write_timed_block(plan, run_dir / "grid", block, np.full(2, 1.0), EPOCH)
        rest = watcher.communicate(timeout=60)[0].splitlines()
        assert watcher.returncode == 0
        assert "12/12 cells (100.0%)" in rest[-1]
        assert all(line.startswith("attnrmt: progress") for line in rest)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.communicate()


def test_status_watch_exits_when_only_failed_cells_are_left(
    claimed_run: tuple[Path, Path, Any],
) -> None:
    """A failed cell is not pending: with every other cell done and no live run,
    ``attnrmt status --watch`` prints the final state and exits (it waits for pending 0)."""
    _, run_dir, plan = claimed_run
    blocks = plan.sweeps["grid"].blocks
    for block in blocks[2:-1]:
        write_timed_block(plan, run_dir / "grid", block, np.full(2, 1.0), EPOCH)
    failing = blocks[-1]
    record_block_failures(
        run_dir / "grid" / fragments.FRAGMENTS_DIRNAME / f"{failing.key}.npz",
        [
            {"key": cell.key, "seed": "[]", "params": {}, "error": "boom", "cause": "numerical"}
            for cell in failing.cells
        ],
    )
    done = subprocess.run(
        [sys.executable, "-m", "attnrmt", "status", str(run_dir), "--watch", "0.1"],
        capture_output=True,
        text=True,
        env=subprocess_environment(),
        timeout=30,  # it exits within a second or two; a pending failed cell never exits
    )
    assert done.returncode == 0, done.stderr
    assert "10/12 cells (83.3%)" in done.stdout.splitlines()[-1]
    assert "2 failed" in done.stdout.splitlines()[-1]


def test_a_shrunk_sweep_counts_only_the_cells_its_plan_holds(tmp_path: Path) -> None:
    """Fragments of a larger earlier plan stay in the sweep's folder; the shrunk plan's
    counts (status, the one counter) hold only its own cells: 100 %, never more."""
    full = plan_run(uniform_config(n_snr=3, block_size=2))
    shrunk = plan_run(uniform_config(n_snr=2, block_size=2))
    for block in full.sweeps["grid"].blocks:
        write_timed_block(full, tmp_path / "unit" / "grid", block, np.full(2, 1.0), EPOCH)
    result = status.run_status(shrunk, tmp_path / "unit", now=EPOCH + 1)
    cells = shrunk.sweeps["grid"].n_cells
    assert (result.total.cells, result.total.done, result.total.pending) == (cells, cells, 0)
    assert result.total.percent_done == 100.0


def test_the_eta_under_one_busy_core_is_the_remaining_work_over_that_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay: one worker, 1 s of compute per cell and as much wall overhead per block as
    compute (0.5 busy cores): half the blocks done, the ETA is within a factor 1.5 of the
    real remaining time (dividing by at least one core makes it half of it)."""
    plan = plan_run(uniform_config(n_snr=10, block_size=2))
    sweep = plan.sweeps["grid"]
    seconds = np.ones((len(sweep.blocks), 2))
    finished = replay_schedule(len(sweep.blocks), seconds.sum(axis=1), 1, overhead=2.0)
    n_done = len(sweep.blocks) // 2
    for index in range(n_done):
        write_timed_block(
            plan,
            tmp_path / "unit" / "grid",
            sweep.blocks[index],
            seconds[index],
            EPOCH + finished[index],
        )
    monkeypatch.setattr(status, "live_run_since", lambda workdir: (True, EPOCH))
    now = finished[n_done - 1]
    result = status.run_status(plan, tmp_path / "unit", now=EPOCH + now, window_seconds=1e6)
    real_remaining = finished[-1] - now
    assert result.total.eta_seconds is not None
    assert 1 / 1.5 <= result.total.eta_seconds / real_remaining <= 1.5
