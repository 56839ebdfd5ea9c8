"""Start, clients, stop and signals of a run's cluster (run/cluster/lifecycle.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from attnrmt.sweep.compute.cluster import (
    ClusterSettings,
)


def test_stop_run_ends_a_block_waiting_for_workers_that_never_come(tmp_path: Path) -> None:
    """A block job's client waits on a cluster without workers; stop_run (what SIGINT and
    SIGTERM call) ends the wait and refuses new block jobs of that run."""
    import threading

    from distributed import LocalCluster

    from attnrmt.sweep.compute.cluster import RunStopped, run_client, run_stop_reason, stop_run

    run_dir = tmp_path / "results" / "stopped"
    outcome: dict[str, BaseException] = {}
    with LocalCluster(
        n_workers=0,
        processes=False,
        host="127.0.0.1",
        protocol="tcp://",
        dashboard_address="127.0.0.1:0",
    ) as cluster:
        settings = ClusterSettings.from_config(
            {"mode": "address", "address": cluster.scheduler_address}
        )

        def block() -> None:
            with run_client(run_dir, settings) as client:
                try:
                    client.submit(sum, [1, 2]).result()
                except BaseException as exc:  # the cancelled future
                    outcome["error"] = exc

        waiting = threading.Thread(target=block)
        waiting.start()
        for _ in range(600):  # until the task reached the scheduler (it can never run)
            if cluster.scheduler.tasks:
                break
            waiting.join(0.05)
        assert cluster.scheduler.tasks, "the block never submitted"
        stop_run(run_dir, "test stop")
        waiting.join(timeout=60)
        assert not waiting.is_alive(), "the block kept waiting after stop_run"
        assert "error" in outcome
        assert run_stop_reason(run_dir) == "test stop"
        with pytest.raises(RunStopped, match="test stop"), run_client(run_dir, settings):
            pass


def test_block_jobs_of_a_run_share_one_client_and_a_stop_ends_them_all(tmp_path: Path) -> None:
    """Block jobs (threads of one Snakemake process) use the run's one client
    (RunCluster.shared_client) of its real local TLS cluster; stop_run closes it, which ends
    every block waiting on it, and the cluster closes with it."""
    import threading

    from attnrmt.sweep.compute.cluster import run_client, stop_run
    from attnrmt.sweep.compute.cluster.lifecycle import _RUNS, _key

    run_dir = tmp_path / "results" / "shared"
    settings = ClusterSettings.from_config({"mode": "local", "dashboard": False}, max_cores=1)
    clients: list[Any] = []
    errors: list[BaseException] = []
    submitted = threading.Barrier(3)

    def block(seconds: float) -> None:
        with run_client(run_dir, settings) as client:
            clients.append(client)
            future = client.submit(time.sleep, seconds, pure=False)
            submitted.wait(timeout=120)
            try:
                future.result()
            except BaseException as exc:  # cancelled by the stop
                errors.append(exc)

    blocks = [threading.Thread(target=block, args=(600,)) for _ in range(2)]
    for thread in blocks:
        thread.start()
    submitted.wait(timeout=120)
    assert len(clients) == 2 and clients[0] is clients[1], "each block opened its own client"
    cluster = _RUNS[_key(run_dir)].cluster
    stop_run(run_dir, "test stop")
    for thread in blocks:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in blocks), "a block kept waiting"
    assert len(errors) == 2
    assert clients[0].status in ("closing", "closed")
    for _ in range(1200):  # the cluster closes in the background after its client
        if str(cluster.status) == "Status.closed":
            break
        time.sleep(0.05)
    assert str(cluster.status) == "Status.closed"
    assert _key(run_dir) not in _RUNS


@pytest.mark.parametrize("batch_workers", [False, True])
def test_stop_on_signals_imports_dask_jobqueue_only_for_batch_workers(batch_workers: bool) -> None:
    """dask-jobqueue's import-time SIGINT handler is pre-empted only when the run will use
    it; a local run does not pay for the import (fresh interpreter, clean sys.modules)."""
    code = textwrap.dedent(f"""
        import signal, sys
        from attnrmt.sweep.compute.cluster import stop_on_signals
        stop_on_signals(batch_workers={batch_workers})
        print("dask_jobqueue" in sys.modules, signal.getsignal(signal.SIGINT).__module__)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imported, handler_module = done.stdout.split()
    assert imported == str(batch_workers)
    assert handler_module == "attnrmt.sweep.compute.cluster.lifecycle"  # ours, not dask-jobqueue's


def test_a_stopped_run_that_does_not_wind_down_exits_after_the_grace_period(
    tmp_path: Path,
) -> None:
    """The safety net of stop_on_signals: a process still alive STOP_GRACE_SECONDS after a
    stop signal exits with 128 + signal (here a 0.5 s grace on a process that would sleep
    30 s), saying so, after storing the finished cells (here: writing a file) and then
    releasing its locks (here: removing a file, as Snakemake's persistence.unlock removes
    its lock files); a second start is refused (the exit is already on its way); a
    SIGKILLed run resumes the same way (tests/e2e/test_pipeline.py)."""
    lock = tmp_path / "0.output.lock"
    lock.write_text("")
    stored = tmp_path / "stored"
    code = (
        "import os, signal, time\n"
        "from attnrmt.sweep.compute.cluster.lifecycle import _exit_if_still_running_after\n"
        f"store = lambda: open({str(stored)!r}, 'w').write(\n"
        f"    str(os.path.exists({str(lock)!r})))\n"
        f"assert _exit_if_still_running_after(0.5, signal.SIGTERM, "
        f"lambda: os.remove({str(lock)!r}), store)\n"
        "assert not _exit_if_still_running_after(0.5, signal.SIGTERM)\n"
        "time.sleep(30)\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 128 + 15, done.stderr
    assert "storing the finished cells and exiting" in done.stderr, done.stderr
    assert "rerun the same command" in done.stderr
    assert time.monotonic() - started < 25  # not the 30 s sleep
    assert stored.read_text() == "True"  # stored first, while the lock was still held
    assert not lock.exists()


# --------------------------------------------------------------------------- overhead


def test_blocks_left_reports_the_last_fragment_once(tmp_path: Path) -> None:
    """BlocksLeft: fragments on disk when built are not waited for; finished() is True
    exactly once, for the last missing fragment (paths compared normalised); a run whose
    fragments all exist never releases its cluster early."""
    from attnrmt.sweep.compute.cluster import BlocksLeft

    paths = [tmp_path / "fragments" / f"{name}.npz" for name in ("a", "b", "c")]
    paths[0].parent.mkdir()
    paths[0].write_bytes(b"")  # already finished: not waited for
    left = BlocksLeft(str(path) for path in paths)
    assert left.finished(tmp_path / "other.npz") is False  # not one of the run's blocks
    assert left.finished(str(paths[1])) is False
    assert left.finished(f"{tmp_path}/fragments/./c.npz") is True
    assert left.finished(str(paths[2])) is False  # once only
    assert BlocksLeft(paths[:1]).finished(paths[0]) is False


def test_workers_spawned_inside_do_not_rerun_the_main_script(tmp_path: Path) -> None:
    """spawning_without_main_script: a process spawned inside the block does not execute
    the parent's main file (a marker file proves each execution as ``__mp_main__``); one
    spawned outside does (so the check can fail); ``__main__.__file__`` is restored."""
    markers = tmp_path / "markers"
    markers.mkdir()
    script = tmp_path / "main_script.py"
    script.write_text(
        textwrap.dedent(f"""
        import multiprocessing, os, sys
        from pathlib import Path
        if __name__ == "__mp_main__":
            Path({str(markers)!r}, str(os.getpid())).touch()
        from attnrmt.sweep.compute.cluster.lifecycle import spawning_without_main_script

        def spawn_one():
            child = multiprocessing.get_context("spawn").Process(target=os.getpid)
            child.start()
            child.join()
            return child.pid

        if __name__ == "__main__":
            with spawning_without_main_script():
                inside = spawn_one()
            outside = spawn_one()
            print(inside, outside, sys.modules["__main__"].__file__ == {str(script)!r})
    """)
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=120
    )
    inside, outside, restored = done.stdout.split()
    assert sorted(path.name for path in markers.iterdir()) == [outside]
    assert inside != outside
    assert restored == "True"


def test_cancel_rate_limiter_wakeups_cancels_only_snakemakes_timers() -> None:
    """Only pending timers armed by Snakemake's job rate limiter (recognised by the
    callback's qualified name) are cancelled; other timers keep running. The installed
    Snakemake still arms them there (a rename would silently undo the fix)."""
    import inspect
    import threading

    from snakemake.scheduling.job_scheduler import JobScheduler as SnakemakeScheduler

    from attnrmt.sweep.compute.cluster import cancel_rate_limiter_wakeups
    from attnrmt.sweep.compute.cluster.lifecycle import RATE_LIMITER_WAKEUP

    method = RATE_LIMITER_WAKEUP.split(".")[1]
    assert "threading.Timer(" in inspect.getsource(getattr(SnakemakeScheduler, method))

    class JobScheduler:  # the callback Snakemake 9 arms: a lambda in this method
        def _schedule_reevalutation(self, fired: list[str]) -> threading.Timer:
            return threading.Timer(60, lambda: fired.append("snakemake"))

    fired: list[str] = []
    snakemake_timer = JobScheduler()._schedule_reevalutation(fired)
    other_timer = threading.Timer(0.2, lambda: fired.append("other"))
    snakemake_timer.start()
    other_timer.start()
    try:
        assert cancel_rate_limiter_wakeups() == 1
        snakemake_timer.join(timeout=5)
        other_timer.join(timeout=5)
        assert not snakemake_timer.is_alive()
        assert fired == ["other"]
    finally:
        snakemake_timer.cancel()
        other_timer.cancel()


def test_the_run_clusters_servers_run_the_quieter_housekeeping(tmp_path: Path) -> None:
    """A run's real local cluster: the scheduler and each spawned worker run with the
    HOUSEKEEPING intervals (the settings reach worker processes), and the workers' BLAS
    pools have the layout's thread count."""
    from attnrmt.sweep.compute.cluster import run_client, shutdown_run_cluster
    from attnrmt.sweep.compute.cluster.sizing import HOUSEKEEPING

    def settings_here() -> dict[str, Any]:
        import os

        import dask

        return {
            "config": {key: dask.config.get(key) for key in HOUSEKEEPING},
            "blas": os.environ.get("OPENBLAS_NUM_THREADS"),
        }

    run_dir = tmp_path / "results" / "quiet"
    settings = ClusterSettings.from_config({"mode": "local", "dashboard": False}, max_cores=1)
    ours = {key: value for key, (_, value) in HOUSEKEEPING.items()}
    try:
        with run_client(run_dir, settings) as client:
            on_workers = client.run(settings_here)
            on_scheduler = client.run_on_scheduler(settings_here)
    finally:
        shutdown_run_cluster(run_dir)
    assert len(on_workers) == 1
    for where in [*on_workers.values(), on_scheduler]:
        assert where["config"] == ours
    assert [where["blas"] for where in on_workers.values()] == ["1"]
