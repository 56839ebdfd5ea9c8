"""Faults a real sweep meets: lost workers, a lost cluster, a failing cell, a full or
read-only results directory. Real Snakemake, Dask and filesystems; nothing monkeypatched.

* A Dask worker SIGKILLed while it computes a cell (proved: the nanny logs "killed by
  signal 9", and the scheduler, when it removes the dead worker, still has a task
  processing on it that it had there, unchanged, just before the kill, and sends that
  task to a worker again; a kill of an idle worker proves nothing and is retried): the nanny
  restarts the worker, Dask recomputes the task, the block completes without Snakemake
  noticing, the numbers are identical.
* Every worker process of the run's cluster SIGKILLed at once while a block runs: the
  same, and finished blocks are not recomputed. (The scheduler lives in the Snakemake
  process: killing it is killing Snakemake, then resuming, covered by
  tests/e2e/test_pipeline.py.)
* A cell that fails for a real reason: ``d = 5,000,000`` passes validation but no machine
  can allocate its 364 TiB embedding table, so ``simulate_cell`` raises ``MemoryError``
  at once. With ``--keep-going`` its block fails with a log naming the cell and the
  error, every other sweep finishes, and ``attnrmt plan`` shows what is missing.
* ``kill -9`` of the whole run (Snakemake and its workers) in the middle of a block of
  slow cells: the block's finished tasks are on disk (``salvage/<block>/``), so the rerun
  computes only the cells that were in flight or not started; a second run of the same
  results folder while the first lives is refused naming the live run (pid, host, start)
  without Snakemake's advice to ``--unlock``; a killed writer's temporaries are removed
  by the next run.
* A full filesystem (a small tmpfs mounted on ``results/``) and a read-only one (a
  read-only bind mount; root ignores file permissions, so ``chmod`` would prove nothing):
  a clear error, no partial fragment, nothing already there modified; once the space is
  back (or the mount writable) a rerun completes the sweep with identical numbers.

The mount tests need root (CI runs as root); elsewhere they are skipped, but under
``CI=true`` they fail instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import xarray as xr
import yaml

from attnrmt.sweep.compute.cluster import connect
from tests.e2e.helpers import (
    Workdir,
    count_cells,
    fragment_files,
    numeric_variables,
    tiny_config,
    wait_for_scheduler_file,
    wait_until,
    written_since,
)
from tests.sweep.oracles import read_fragment

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

N_CELLS = 12  # 2 weights x 3 snr x 2 replicates
POISON_D = 5_000_000
#: A sweep of one cell that cannot be allocated (MemoryError at once: out_of_memory).
POISON_SWEEP: dict[str, Any] = {
    "d": [POISON_D],
    "T": [4],
    "positional": ["iid"],
    "weights": ["mean"],
    "snr": [1.0],
    "replicates": 1,
    "top_k": 2,
}


def fault_config(run: str = "faults", **sweeps: dict[str, Any]) -> dict[str, Any]:
    """The tiny sweep at d = 400 (cells of a few tenths of a second) in 6 blocks of 2."""
    config = tiny_config(run=run, execution={"block_size": 2})
    config["sweeps"]["grid"].update(d=[400])
    config["sweeps"].update(sweeps)
    return config


def background_log(workdir: Workdir) -> str:
    """Output of the Snakemake runs started with :meth:`Workdir.start`."""
    return (workdir.path / "snakemake-background.log").read_text(errors="replace")


def wait_for(process: subprocess.Popen, workdir: Workdir, timeout: float = 300) -> int:
    """Wait for a background Snakemake; its return code."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"snakemake did not finish in {timeout} s:\n{background_log(workdir)[-4000:]}")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workdir, xr.Dataset]:
    """The fault config run without faults: its workdir (daemon stopped) and its cells."""
    workdir = Workdir.create(tmp_path_factory.mktemp("reference"), fault_config())
    try:
        result = workdir.run()
        assert result.computed == N_CELLS
        return workdir, numeric_variables(workdir.open_cells())
    finally:
        workdir.close()


# --------------------------------------------------------------------------- Dask faults


def processing_snapshot(client: Any, address: str) -> tuple[float, list[str]]:
    """(scheduler time, keys) the scheduler has processing on the worker at ``address``."""

    def snapshot(dask_scheduler: Any, address: str) -> tuple[float, list[str]]:
        from distributed.metrics import time as scheduler_time

        worker = dask_scheduler.workers.get(address)
        keys = [] if worker is None else [str(task.key) for task in worker.processing]
        return scheduler_time(), keys

    moment, keys = client.run_on_scheduler(snapshot, address=address)
    return float(moment), list(keys)


def kill_outcome(
    client: Any, address: str, since: float, keys: list[str]
) -> tuple[bool, list[str], list[str]]:
    """What the scheduler made of a kill of the worker at ``address`` made after ``since``.

    Returns ``(removed, in_flight, resent)``: whether the scheduler has removed that worker
    (its ``remove-worker`` event, logged after ``since``); the keys of ``keys`` its event
    lists as processing on that worker when it was removed and whose transition log shows
    no transition between ``since`` and the removal (so each was processing on the victim,
    unfinished, from before the kill until the worker was lost); and those of them that
    the scheduler has since sent to a worker again (a transition to ``processing`` after
    the removal).
    """

    def outcome(
        dask_scheduler: Any, address: str, since: float, keys: list[str]
    ) -> tuple[bool, list[str], list[str]]:
        removals = [
            (stamp, event)
            for stamp, event in dask_scheduler.get_events(address)
            if isinstance(event, dict) and event.get("action") == "remove-worker" and stamp >= since
        ]
        if not removals:
            return False, [], []
        removed_at, event = removals[0]
        lost = {str(key) for key in event.get("processing-tasks", ())} & set(keys)
        in_flight, resent = [], []
        for key in sorted(lost):
            story = dask_scheduler.story(key)
            if any(since <= entry[-1] < removed_at for entry in story):
                continue  # it moved or finished between our look and the removal
            in_flight.append(key)
            if any(entry[2] == "processing" and entry[-1] > removed_at for entry in story):
                resent.append(key)
        return True, in_flight, resent

    removed, in_flight, resent = client.run_on_scheduler(
        outcome, address=address, since=since, keys=keys
    )
    return bool(removed), list(in_flight), list(resent)


def kill_busy_worker(
    workdir: Workdir, process: subprocess.Popen, attempts: int = 5
) -> tuple[int, list[str]]:
    """SIGKILL a worker of the run's cluster while it computes a cell; return its pid and
    the keys the kill interrupted.

    Proof that the kill hit work in flight, per key (:func:`kill_outcome`): the scheduler,
    when it removed the dead worker, still had the key processing on it, unchanged since
    our look just before the kill, and then sent that key to a worker again. A kill that
    lands on an idle worker (its cells finished between our look and the kill) is a miss:
    the next busy worker is tried.
    """
    wait_for_scheduler_file(workdir, process)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client = connect(workdir.run_dir, timeout="30s")
    misses: list[str] = []
    try:
        for _ in range(attempts):
            found = busy_worker(client, process)
            if found is None:
                break  # the run ended (or never got busy) before a kill hit work in flight
            address, victim = found
            since, keys = processing_snapshot(client, address)
            if not keys:
                continue  # it finished its cells between the two looks
            os.kill(victim, signal.SIGKILL)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and process.poll() is None:
                with contextlib.suppress(OSError):  # a comm dropped: ask again
                    removed, in_flight, resent = kill_outcome(client, address, since, keys)
                    if resent:
                        return victim, resent  # a task lost in flight went to a worker again
                    if removed and not in_flight:
                        break  # a miss: nothing of ours was in flight on the victim
                time.sleep(0.05)
            misses.append(f"pid {victim} ({address}) processing {keys}")
        pytest.fail(
            f"no kill hit a task in flight (killed: {misses}; snakemake exit code "
            f"{process.poll()}):\n{background_log(workdir)[-4000:]}"
        )
    finally:
        client.close()


def busy_worker(
    client: Any, process: subprocess.Popen, timeout: float = 120
) -> tuple[str, int] | None:
    """Address and pid of a Dask worker computing a cell right now; None when the run ends
    (or ``timeout`` passes) first.

    The pid is asked of that worker alone: another one may be dead (killed by an earlier
    attempt) and not yet removed, or a new one just starting.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError):  # a comm dropped, or the run's cluster closed
            busy = [worker for worker, keys in client.processing().items() if keys]
            for worker in busy:
                pid = client.run(os.getpid, workers=[worker], on_error="return").get(worker)
                if isinstance(pid, int):
                    return worker, pid
        time.sleep(0.01)
    return None


def test_killed_worker_block_completes_with_identical_numbers(
    reference: tuple[Workdir, xr.Dataset], tmp_path: Path
) -> None:
    """SIGKILL a worker mid-task: its nanny restarts it, Dask reruns the task elsewhere,
    the block and the run complete with the same numbers."""
    workdir = Workdir.create(tmp_path / "work", fault_config())
    try:
        process = workdir.start(cores=2)
        victim, interrupted = kill_busy_worker(workdir, process)
        assert interrupted  # keys processing on the victim at the kill, sent again after
        assert wait_for(process, workdir) == 0, background_log(workdir)[-6000:]
        output = background_log(workdir)
        # the nanny saw its worker die of our signal
        cluster_log = (workdir.run_dir / ".dask" / "cluster.log").read_text()
        assert f"Worker process {victim} was killed by signal 9" in cluster_log, cluster_log
        # Dask absorbed the loss: no block failed, no Snakemake retry
        assert "Error in rule" not in output and "Trying to restart" not in output, output
        assert count_cells(fragment_files(workdir.path)).computed == N_CELLS
        xr.testing.assert_identical(numeric_variables(workdir.open_cells()), reference[1])
    finally:
        workdir.close()


def test_every_worker_killed_mid_block_finished_blocks_kept(
    reference: tuple[Workdir, xr.Dataset], tmp_path: Path
) -> None:
    """SIGKILL every worker process of the run's cluster at once, mid-block: the nannies
    start new ones, the lost tasks are recomputed, finished blocks are not."""
    workdir = Workdir.create(tmp_path / "work", fault_config())
    try:
        process = workdir.start(cores=2)
        wait_for_scheduler_file(workdir, process)
        with connect(workdir.run_dir, timeout="30s") as client:
            # a block is computing right now
            assert busy_worker(client, process) is not None, background_log(workdir)[-4000:]
        finished = fragment_files(workdir.path)
        victims = workdir.worker_pids()
        for pid in victims.values():
            os.kill(pid, signal.SIGKILL)
        assert wait_for(process, workdir) == 0, background_log(workdir)[-6000:]
        cluster_log = (workdir.run_dir / ".dask" / "cluster.log").read_text()
        for pid in victims.values():
            assert f"Worker process {pid} was killed by signal 9" in cluster_log, cluster_log
        after = fragment_files(workdir.path)
        assert all(after[path] == mtime for path, mtime in finished.items())
        for path in after:  # every fragment is complete and readable
            assert len(read_fragment(path).cell_keys) >= 1
        assert count_cells(after).computed == N_CELLS  # no finished cell computed twice
        xr.testing.assert_identical(numeric_variables(workdir.open_cells()), reference[1])
    finally:
        workdir.close()


# --------------------------------------------------------------------------- kill -9

SLOW_CELLS = 24


def slow_block_config(run: str = "salvage") -> dict[str, Any]:
    """One block of 24 cells at d = 1000: ~0.8 s each on a quiet machine (long enough that
    the refused second run of the test ends well before the block), so two cells make a
    task (12 tasks) and reach the disk together as the task finishes."""
    config = tiny_config(run=run, execution={"block_size": SLOW_CELLS})
    config["sweeps"]["grid"].update(
        d=[1000],
        weights=["mean"],
        replicates=2,
        snr=[0.25 * index for index in range(SLOW_CELLS // 2)],
    )
    return config


def test_sigkill_mid_block_loses_only_cells_in_flight_and_a_second_run_is_refused(
    tmp_path: Path,
) -> None:
    """SIGKILL of the whole run while its one block is half done: the rerun computes only
    the cells that had not reached ``salvage/<block>/``. Before the kill, a second run of
    the same folder is refused with the live run's pid and host. The killed writers'
    temporaries are gone after the rerun."""
    workdir = Workdir.create(tmp_path / "work", slow_block_config())
    salvage = workdir.sweep_dir() / "salvage"
    try:
        process = workdir.start(cores=2)
        wait_for_scheduler_file(workdir, process)
        second = workdir.run(check=False)  # while the first computes
        assert second.returncode != 0, second.output[-3000:]
        assert "is being written by a live run" in second.output, second.output[-3000:]
        assert f"pid {process.pid} on host {socket.gethostname()}, started" in second.output
        # refused before Snakemake's own lock, whose message advises --unlock
        assert "LockException" not in second.output
        assert "removed with the --unlock argument" not in second.output
        wait_until(
            lambda: len(list(salvage.glob("*/*.npz"))) >= 3, 240, "3 salvaged tasks", process
        )
        workdir.kill(process)  # SIGKILL of Snakemake's process group (workers included)
        assert not list((workdir.sweep_dir() / "fragments").glob("*.npz")), (
            "the block finished before the kill"
        )
        salvaged = count_cells(salvage.glob("*/*.npz")).computed
        assert 3 <= salvaged < SLOW_CELLS
        dead = subprocess.Popen(["true"])  # a pid that is no longer alive
        dead.wait()
        stale = [
            workdir.sweep_dir() / "fragments" / f".x.npz.{dead.pid}.0123abcd.tmp",
            workdir.sweep_dir() / f".analysis.zarr.{dead.pid}.89abcdef.tmp",
        ]
        stale[0].write_bytes(b"PK partial")
        stale[1].mkdir()
        resumed = workdir.run()
        assert (resumed.computed, resumed.reused) == (SLOW_CELLS - salvaged, salvaged)
        removed = re.search(r"removed (\d+) temporaries left by killed writers", resumed.output)
        assert removed and int(removed.group(1)) >= 2, resumed.output[-3000:]
        assert not any(path.exists() for path in stale)
        assert not list(salvage.glob("*/*.npz"))  # the completed block's salvage is cleared
        assert workdir.open_cells().attrs["cells_present"] == SLOW_CELLS
    finally:
        workdir.close()


# --------------------------------------------------------------------------- failing cell


def _plan(workdir: Workdir) -> Any:
    from attnrmt.sweep import load_config, plan_run

    return plan_run(load_config(workdir.config))


def test_failing_cell_fails_its_block_clearly_and_others_finish(
    reference: tuple[Workdir, xr.Dataset], tmp_path: Path
) -> None:
    """A cell that cannot be allocated fails its block; --keep-going finishes the rest."""
    config = fault_config(poison=POISON_SWEEP)
    config["execution"]["max_failures"] = None  # finish everything else, however many fail
    workdir = Workdir.create(tmp_path / "work", config)
    try:
        result = workdir.run("--keep-going", check=False)
        assert result.returncode != 0
        output = result.output
        # Snakemake names the failed rule and its log; the log names the cell and the error
        assert "Error in rule simulate_block" in output
        logs = sorted((workdir.run_dir / "logs" / "simulate_block" / "poison").glob("*.log"))
        assert len(logs) == 1, logs
        log_text = logs[0].read_text()
        poison_keys = [block.cells[0].key for block in _plan(workdir).sweeps["poison"].blocks]
        assert f"cell {poison_keys[0]} failed" in log_text and "MemoryError" in log_text, log_text
        assert str(logs[0].relative_to(workdir.path)) in output
        # the failed block left no fragment; the healthy sweep is complete and correct
        assert not list((workdir.sweep_dir("poison") / "fragments").glob("*.npz"))
        assert not (workdir.sweep_dir("poison") / "cells.zarr").exists()
        assert result.computed == N_CELLS
        xr.testing.assert_identical(numeric_variables(workdir.open_cells()), reference[1])

        # `attnrmt plan` shows what is missing and lists what failed, with the error
        def plan(*options: str) -> str:
            return subprocess.run(
                [
                    str(Path(sys.executable).with_name("attnrmt")),
                    "plan",
                    "--no-calibrate",
                    *options,
                    "config.yaml",
                ],
                capture_output=True,
                text=True,
                cwd=workdir.path,
                timeout=120,
                check=True,
            ).stdout

        rows = {row["sweep"]: row for row in json.loads(plan("--json"))["sweeps"]}
        assert rows["grid"]["done_cells"] == rows["grid"]["cells"] == N_CELLS, rows
        assert rows["poison"]["done_cells"] == 0 and rows["poison"]["cells"] == 1, rows
        assert rows["grid"]["failed_cells"] == []
        (failure,) = rows["poison"]["failed_cells"]
        assert failure["key"] == poison_keys[0] and "MemoryError" in failure["error"]
        assert failure["cause"] == "out_of_memory"
        assert f"cell {poison_keys[0][:12]}  d={POISON_D}" in plan()
        # skip_failed: what finished is analysed and reported, the failure listed beside it
        partial = workdir.run("--config", "skip_failed=true", targets=())
        assert partial.computed == 0
        assert "leaving out blocks whose last attempt failed (poison: 1)" in partial.output
        failed = pd.read_csv(workdir.run_dir / "failed_cells.csv")
        assert failed["cell_key"].tolist() == poison_keys and failed["d"].tolist() == [POISON_D]
        assert failed["sweep"].tolist() == ["poison"] and "MemoryError" in failed["error"][0]
        assert failed["cause"].tolist() == ["out_of_memory"]
        assert not (workdir.sweep_dir("poison") / "cells.zarr").exists()
        assert (workdir.run_dir / "grid" / "figures" / "spectra.png").is_file()
        report = workdir.run_dir / "report.html"
        workdir.run("--config", "skip_failed=true", "--report", str(report), targets=())
        assert "failed_cells.csv" in report.read_text(encoding="utf-8")
    finally:
        workdir.close()


def test_out_of_memory_block_is_retried_with_the_slurm_profiles_larger_memory(
    tmp_path: Path,
) -> None:
    """profiles/slurm's attempt-scaled ``mem_mb`` and ``retries``, under the local
    executor: the block fails out_of_memory on attempt 1 and Snakemake's retry is granted
    more memory (the block records what it was granted)."""
    from tests.e2e.helpers import REPO_ROOT

    profile = yaml.safe_load((REPO_ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    expression = str(profile["set-resources"]["simulate_block"]["mem_mb"])
    retries = int(profile["retries"])
    assert retries >= 1
    # what Snakemake grants at each attempt (it evaluates the string with `attempt`)
    granted = [eval(expression, {"attempt": attempt}) for attempt in range(1, retries + 2)]
    assert granted == sorted(set(granted)), granted  # strictly more memory each attempt
    config = fault_config(run="oom")
    config["sweeps"] = {"poison": POISON_SWEEP}
    workdir = Workdir.create(tmp_path / "work", config)
    try:
        compact = "".join(expression.split())  # the command line splits at spaces
        # (--set-resources takes several values: an option after it ends them)
        result = workdir.run(
            "--set-resources",
            f"simulate_block:mem_mb={compact}",
            "--retries",
            str(retries),
            check=False,
        )
        assert result.returncode != 0
        for mem_mb in granted:  # Snakemake's job lines of each attempt
            assert f"mem_mb={mem_mb}," in result.output, result.output[-4000:]
        (record_path,) = (workdir.sweep_dir("poison") / "failures").glob("*.json")
        record = json.loads(record_path.read_text())
        assert (record["attempt"], record["mem_mb"]) == (retries + 1, granted[-1])
        assert [cell["cause"] for cell in record["cells"]] == ["out_of_memory"]
    finally:
        workdir.close()


def test_max_failures_stops_new_blocks_with_one_message_and_the_rerun_resumes(
    tmp_path: Path,
) -> None:
    """max_failures 2: the first poison block (2 cells) reaches it; Snakemake's retry of
    that block still runs, every block after computes nothing, the run ends non-zero with
    one message; the rerun after the fix resumes."""
    poison = dict(POISON_SWEEP, snr=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])  # 3 blocks of 2
    config = fault_config(run="budget", poison=poison)
    config["execution"]["max_failures"] = 2
    workdir = Workdir.create(tmp_path / "work", config)
    try:
        # one block at a time, so that "blocks that start afterwards" is exact
        stopped = workdir.run("--resources", "dask_clients=1", "--keep-going", check=False)
        assert stopped.returncode != 0
        message = (
            "attnrmt: max_failures reached: 2 of 18 cells failed (2 out_of_memory); "
            "stopping. Fix and rerun the same command to resume."
        )
        assert stopped.output.count("max_failures reached: ") == 1, stopped.output[-6000:]
        assert message in stopped.output
        assert "not computed: execution.max_failures reached" in stopped.output
        # only the first poison block computed (twice: Snakemake's retry); the others not
        records = list((workdir.sweep_dir("poison") / "failures").glob("*.json"))
        assert len(records) == 1
        assert json.loads(records[0].read_text())["attempt"] == 2

        def refused(sweep: str) -> int:
            logs = (workdir.run_dir / "logs" / "simulate_block" / sweep).glob("*.log")
            return sum("not computed: execution.max_failures" in log.read_text() for log in logs)

        assert refused("poison") == 2
        # each grid block either ran before the limit (2 cells) or was refused
        kept = fragment_files(workdir.path)
        assert stopped.computed + 2 * refused("grid") == N_CELLS
        # the fix (the poison sweep removed) and the same command: only what is missing
        fixed = fault_config(run="budget")
        fixed["execution"]["max_failures"] = 2
        workdir.write_config(fixed)
        resumed = workdir.run("--resources", "dask_clients=1", "--keep-going")
        assert resumed.computed == N_CELLS - stopped.computed
        after = fragment_files(workdir.path)
        assert all(after[path] == mtime for path, mtime in kept.items())
    finally:
        workdir.close()


# --------------------------------------------------------------------------- filesystems


def _need_root() -> None:
    if os.geteuid() != 0:
        reason = "mounting a tmpfs / read-only bind mount needs root"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason} (CI must run as root)")
        pytest.skip(reason)


@contextlib.contextmanager
def mounted(*mount_args: str, target: Path) -> Iterator[Path]:
    """``mount ... target`` for the duration of the block; always unmounted after."""
    _need_root()
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", *mount_args, str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        message = f"mount {' '.join(mount_args)} failed: {done.stderr.strip()}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield target
    finally:
        if subprocess.run(["umount", str(target)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(target)], capture_output=True)


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (relative path -> digest)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_full_disk_fails_clearly_and_a_rerun_completes(
    reference: tuple[Workdir, xr.Dataset], tmp_path: Path
) -> None:
    """results/ on a 4 MiB tmpfs with 40 KiB free: ENOSPC, nothing corrupt, then resume."""
    workdir = Workdir.create(tmp_path / "work", fault_config())
    results = workdir.path / "results"
    with mounted("-t", "tmpfs", "-o", "size=4m", "tmpfs", target=results):
        filler = results / ".filler"
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={filler}", "bs=1k", f"count={4096 - 40}"],
            capture_output=True,
            check=True,
        )
        try:
            failed = workdir.run(check=False)
            assert failed.returncode != 0, "the run fitted in 40 KiB: the disk was not full"
            assert "No space left on device" in failed.output, failed.output[-4000:]
            kept = fragment_files(workdir.path)
            for path in kept:  # whatever was written at a final path is a whole fragment
                assert len(read_fragment(path).cell_keys) == 2
            assert not (workdir.sweep_dir() / "cells.zarr").exists()
            workdir.close()
            # space comes back: the rerun computes only what is missing
            filler.unlink()
            resumed = workdir.run()
            assert resumed.computed == N_CELLS - 2 * len(kept)
            after = fragment_files(workdir.path)
            assert all(after[path] == mtime for path, mtime in kept.items())
            xr.testing.assert_identical(numeric_variables(workdir.open_cells()), reference[1])
        finally:
            workdir.close()


def test_read_only_results_fail_clearly_and_change_nothing(
    reference: tuple[Workdir, xr.Dataset], tmp_path: Path
) -> None:
    """Extending a finished sweep whose results are read-only: a clear error, no change."""
    workdir = reference[0].copy_to(tmp_path / "work")
    extended = fault_config()
    extended["sweeps"]["grid"]["snr"] = [0.0, 1.0, 2.0, 3.0]
    workdir.write_config(extended)
    results = workdir.path / "results"
    before = tree_digest(results)
    try:
        with mounted("--bind", str(results), target=results):
            remount = ["mount", "-o", "remount,bind,ro", str(results)]
            subprocess.run(remount, check=True, capture_output=True)
            failed = workdir.run(check=False)
            workdir.close()
            assert failed.returncode != 0
            # Snakemake sees the outputs are not writable before running anything (or the
            # first write fails); either way the message names the path
            output = failed.output
            assert "Write-protected output" in output or "Read-only file system" in output, output[
                -4000:
            ]
            assert "results/faults/grid" in output, output[-4000:]
        assert tree_digest(results) == before, "a failed run on read-only results changed them"
        finished = fragment_files(workdir.path)
        resumed = workdir.run()
        assert resumed.computed == 4  # only the new snr value: 2 weights x 2 replicates
        after = fragment_files(workdir.path)
        assert all(after[path] == mtime for path, mtime in finished.items())
        assert len(written_since(finished, after)) == 2  # the two new blocks (one per weights)
    finally:
        workdir.close()
