"""The run's Dask cluster: sizing, settings, credentials, batch-system job scripts, pending
reasons, stale Snakemake locks. Real distributed and dask-jobqueue objects (in-process
schedulers on loopback); nothing is submitted here (tests/e2e/test_slurm.py submits)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import dask
import pytest

from attnrmt.sweep import runlock
from attnrmt.sweep.cluster import (
    ClusterSettings,
    allocation_cores,
    dashboard_address,
    jobqueue,
    parse_walltime,
    security,
    slurm,
    usable_cores,
    worker_layout,
    worker_lifetime,
)
from tests.e2e.helpers import assert_locked_out, intruder_report, require_other_user

# --------------------------------------------------------------------------- sizing


@pytest.mark.parametrize(
    ("cores", "n_workers", "threads", "expected"),
    [
        (2, None, 1, (2, 1, 1)),
        (2, 1, 1, (1, 1, 2)),
        (8, None, 2, (4, 2, 1)),
        (8, 2, 1, (2, 1, 4)),
        (1, 4, 1, (4, 1, 1)),
    ],
)
def test_worker_layout_never_oversubscribes(cores, n_workers, threads, expected) -> None:
    layout = worker_layout(cores, n_workers, threads)
    assert (layout.n_workers, layout.threads_per_worker, layout.blas_threads) == expected
    if layout.n_workers * layout.threads_per_worker <= cores:
        assert layout.n_workers * layout.threads_per_worker * layout.blas_threads <= cores


def test_allocation_cores_prefers_slurm() -> None:
    assert allocation_cores({"SLURM_CPUS_PER_TASK": "6"}) == 6
    assert allocation_cores({}) == usable_cores()


@pytest.mark.parametrize(
    ("walltime", "seconds"),
    [("30", 1800), ("10:00", 600), ("01:00:00", 3600), ("1-02", 93600), ("2-00:30:00", 174600)],
)
def test_parse_walltime(walltime: str, seconds: int) -> None:
    assert parse_walltime(walltime) == seconds


@pytest.mark.parametrize("walltime", [600, 3600, 86400])
def test_worker_lifetime_ends_before_the_walltime(walltime: int) -> None:
    lifetime, stagger = worker_lifetime(walltime)
    assert 0 < lifetime and lifetime + stagger < walltime


# --------------------------------------------------------------------------- settings


def test_settings_defaults_come_from_the_schema_and_bind_to_loopback() -> None:
    settings = ClusterSettings.from_config({})
    assert (settings.mode, settings.n_workers, settings.threads_per_worker) == ("local", None, 1)
    assert settings.dashboard == "127.0.0.1:0"
    assert settings.jobqueue == {"n_workers": 2}  # the schema's only jobqueue default
    assert ClusterSettings.from_config({"dashboard": False}).dashboard is None
    with pytest.raises(ValueError, match=r"dask\.mode"):
        ClusterSettings.from_config({"mode": "cloud"})


@pytest.mark.parametrize(
    ("setting", "address"),
    [
        (True, "127.0.0.1:0"),
        (8787, "127.0.0.1:8787"),
        ("8787", "127.0.0.1:8787"),
        (":8787", "127.0.0.1:8787"),
        ("0.0.0.0:8787", "0.0.0.0:8787"),
        ("off", None),
        (False, None),
    ],
)
def test_dashboard_address_is_loopback_unless_an_address_is_given(setting, address) -> None:
    assert dashboard_address(setting) == address


# --------------------------------------------------------------------------- credentials


def test_credentials_are_private_files_in_a_private_directory(tmp_path: Path) -> None:
    dask_dir = tmp_path / ".dask"
    run_security = security.new_run_credentials(dask_dir)
    cert, key = security.credential_paths(dask_dir)
    assert dask_dir.stat().st_mode & 0o777 == 0o700
    assert cert.parent.stat().st_mode & 0o777 == 0o700
    assert cert.stat().st_mode & 0o777 == 0o600 and key.stat().st_mode & 0o777 == 0o600
    assert "PRIVATE KEY" in key.read_text() and "CERTIFICATE" in cert.read_text()
    assert run_security.require_encryption
    assert run_security.tls_client_key == str(key)  # paths, never the key in a log line
    assert str(security.run_security(dask_dir).tls_ca_file) == str(cert)
    again = security.new_run_credentials(dask_dir)  # a new cluster: new key
    assert key.read_text() != "" and again.tls_client_cert == str(cert)


def test_owner_connects_and_another_user_cannot(tmp_path: Path) -> None:
    """Against a TLS LocalCluster with the run's credentials the owner runs code, the other
    user gets nowhere; against the same cluster without TLS the other user runs code (the
    check bites when TLS is off)."""
    from distributed import Client, LocalCluster

    require_other_user()
    dask_dir = tmp_path / ".dask"
    run_security = security.new_run_credentials(dask_dir)
    common = {
        "n_workers": 1,
        "processes": False,
        "host": "127.0.0.1",
        "dashboard_address": "127.0.0.1:0",
    }
    with LocalCluster(protocol="tls://", security=run_security, **common) as cluster:
        with Client(cluster.scheduler_address, security=run_security) as client:
            assert client.run_on_scheduler(os.getpid) == os.getpid()
        files = security.credential_paths(dask_dir)
        assert_locked_out(intruder_report(cluster.scheduler_address, files))
    with LocalCluster(protocol="tcp://", **common) as exposed:
        report = intruder_report(exposed.scheduler_address, [])
    assert report["plain_tcp"] == "ran", report


# --------------------------------------------------------------------------- batch systems


@pytest.fixture(scope="module", autouse=True)
def jobqueue_defaults() -> None:
    """dask-jobqueue's configuration registered before any dask.config.set of it (its
    import also sets a SIGINT handler: undone)."""
    before = signal.getsignal(signal.SIGINT)
    import dask_jobqueue  # noqa: F401

    signal.signal(signal.SIGINT, before)


SYSTEM_DIRECTIVES = {
    "slurm": ("#SBATCH --cpus-per-task=2", "#SBATCH -t 00:20:00"),
    "pbs": ("#PBS -l select=1:ncpus=2", "#PBS -l walltime=00:20:00"),
    "lsf": ("#BSUB -n 2", "#BSUB -W 00:20"),
    "sge": ("#$ -l h_rt=00:20:00",),
    "htcondor": ("RequestCpus = MY.DaskWorkerCores",),
    "oar": ("#OAR -l /nodes=1/core=2,walltime=00:20:00",),
}


@pytest.mark.parametrize("system", sorted(SYSTEM_DIRECTIVES))
def test_generated_job_scripts_use_tls_lifetime_and_site_walltime(
    system: str, tmp_path: Path
) -> None:
    """Every batch system's worker job script (real dask-jobqueue class): the profile's
    cores and memory, the site configuration's walltime (the profile sets none), TLS
    with the run's credential files, a lifetime below the walltime, one BLAS thread."""
    settings = ClusterSettings.from_config(
        {
            "mode": system,
            "dashboard": False,
            "jobqueue": {"cores": 2, "memory": "2GB", "interface": "lo", "n_workers": 1},
        }
    )
    run_security = security.new_run_credentials(tmp_path)
    cert, key = security.credential_paths(tmp_path)
    site = {  # what a site's jobqueue.yaml says (htcondor and oar need a word more)
        f"jobqueue.{system}.walltime": "00:20:00",
        "jobqueue.htcondor.disk": "1GB",
        "jobqueue.oar.memory-per-core-property-name": "memcore",
    }
    with dask.config.set(site):
        kwargs = jobqueue.cluster_kwargs(settings, run_security, cert.parent, tmp_path / "logs")
        cluster = jobqueue.new_jobqueue_cluster(settings, kwargs)
        try:
            script = cluster.job_script()
            assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
        finally:
            cluster.close()
    for directive in SYSTEM_DIRECTIVES[system]:
        assert directive in script, script
    assert f"--tls-key {key}" in script and f"--tls-ca-file {cert}" in script, script
    lifetime, stagger = worker_lifetime(parse_walltime("00:20:00"))
    assert f"--lifetime {lifetime}s --lifetime-stagger {stagger}s" in script, script
    assert "export OMP_NUM_THREADS=1" in script
    assert "PRIVATE KEY" not in script


def test_profile_values_win_over_site_values(tmp_path: Path) -> None:
    settings = ClusterSettings.from_config(
        {"mode": "slurm", "jobqueue": {"walltime": "01:00:00", "queue": "debug"}}
    )
    with dask.config.set(
        {
            "jobqueue.slurm.walltime": "00:20:00",
            "jobqueue.slurm.job-script-prologue": ["module load site"],
        }
    ):
        kwargs = jobqueue.cluster_kwargs(settings, None, tmp_path, tmp_path / "logs")
        described = jobqueue.describe_request(settings)
    assert kwargs["walltime"] == "01:00:00" and kwargs["queue"] == "debug"
    assert kwargs["job_script_prologue"][0] == "module load site"  # site's, extended
    assert "cores" not in kwargs and "memory" not in kwargs  # left to dask-jobqueue's config
    assert kwargs["protocol"] == "tls://"
    assert "walltime=01:00:00" in described and "partition/queue=debug" in described


# --------------------------------------------------------------------------- SLURM reasons


def test_squeue_output_and_reasons_that_never_clear() -> None:
    states = slurm.parse_squeue(
        "12|PENDING|PartitionConfig\n13|PENDING|Resources\n14|RUNNING|None\n"
        "15|PENDING|ReqNodeNotAvail, UnavailableNodes:ghost\n"
    )
    assert states["12"].reason == "PartitionConfig" and states["14"].state == "RUNNING"
    assert slurm.pending_summary(states) == {
        "PartitionConfig": 1,
        "Resources": 1,
        "ReqNodeNotAvail, UnavailableNodes:ghost": 1,
    }
    nodes = {"vm"}
    assert slurm.is_unsatisfiable("PartitionConfig", nodes)
    assert slurm.is_unsatisfiable("InvalidAccount", nodes)
    assert not slurm.is_unsatisfiable("Resources", nodes)
    assert not slurm.is_unsatisfiable("Priority", nodes)
    assert slurm.is_unsatisfiable("ReqNodeNotAvail, UnavailableNodes:ghost", nodes)
    assert not slurm.is_unsatisfiable("ReqNodeNotAvail, UnavailableNodes:vm", nodes)


def test_block_jobs_of_the_run_are_found_and_an_unsatisfiable_one_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """profiles/slurm: the run's jobs are the SLURM executor's (comment rule_*) submitted
    from its directory; one pending with PartitionConfig makes one message naming the
    request; Resources only makes the periodic line."""
    from attnrmt.sweep.cluster import blockwatch

    here, elsewhere = tmp_path / "run", tmp_path / "other"
    lines = [
        f"21|PENDING|rule_simulate_block_wildcards_grid|{here}|64|1000M|10:00|debug|Resources",
        f"22|PENDING|rule_simulate_block_wildcards_grid|{here}|64|1000M|10:00|debug|"
        "PartitionConfig",
        f"23|PENDING|rule_simulate_block|{elsewhere}|64|1000M|10:00|debug|PartitionConfig",
        f"24|RUNNING|(null)|{here}|2|4G|2:00:00|debug|None",  # a driver job: no rule_ comment
        "garbage line",
    ]
    states = blockwatch.parse_block_jobs("\n".join(lines), here)
    assert sorted(states) == ["21", "22"]
    assert states["22"].request == (
        "rule=simulate_block, cores=64, memory=1000M, walltime=10:00, partition=debug"
    )
    message = blockwatch.fatal_block_message(states)
    assert message is not None and message.startswith(
        "SLURM will never run the job 22 of this run (rule=simulate_block, cores=64, "
        "memory=1000M, walltime=10:00, partition=debug): pending with reason PartitionConfig."
    )
    queue_load = {"21": states["21"]}
    assert blockwatch.fatal_block_message(queue_load) is None
    watch = blockwatch.BlockJobWatch(here, on_fatal=lambda message: None)
    line = watch.report_pending(queue_load)
    assert line is not None and line.startswith("attnrmt: 1 block jobs pending: Resources x1, ")
    assert line in capsys.readouterr().err


def test_the_block_job_watch_starts_only_under_the_slurm_executor() -> None:
    """Only the Snakemake SLURM executor gets a watch (other executors have no block
    jobs in the queue); the workflow's executor plugin names it."""
    from types import SimpleNamespace

    from attnrmt.sweep.cluster import blockwatch

    for plugin in (None, SimpleNamespace(name="local"), SimpleNamespace(name="dryrun")):
        assert blockwatch.start_block_job_watch(SimpleNamespace(executor_plugin=plugin)) is None


# --------------------------------------------------------------------------- stale locks

HOLDER = textwrap.dedent(
    """
    import sys, time
    from attnrmt.sweep import runlock
    runlock.hold_liveness_token(sys.argv[1])
    print("holding", flush=True)
    time.sleep(600)
    """
)


def make_locks(workdir: Path) -> Path:
    """Snakemake's lock files as a run leaves them."""
    locks = workdir / ".snakemake" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "0.input.lock").write_text("config.yaml\n")
    (locks / "0.output.lock").write_text("results/run/x\n")
    return locks


def test_locks_of_a_live_snakemake_stay_and_of_a_killed_one_go(tmp_path: Path) -> None:
    locks = make_locks(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        assert not runlock.remove_stale_locks(tmp_path)  # a live holder: untouched
        assert (locks / "0.input.lock").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()
    assert runlock.remove_stale_locks(tmp_path)  # its owner died: removed
    assert not locks.exists()
    assert runlock.prune_dead_tokens(tmp_path) == 1  # the dead holder's token
    assert not list((tmp_path / ".snakemake" / runlock.LIVE_DIRNAME).glob("*"))
    assert not runlock.remove_stale_locks(tmp_path)  # nothing left to remove


def test_no_locks_nothing_to_do(tmp_path: Path) -> None:
    assert not runlock.remove_stale_locks(tmp_path)
    held: Any = runlock.hold_liveness_token(tmp_path)
    assert held.is_file()


# --------------------------------------------------------------------------- stopping


def test_stop_run_ends_a_block_waiting_for_workers_that_never_come(tmp_path: Path) -> None:
    """A block job's client waits on a cluster without workers; stop_run (what SIGINT and
    SIGTERM call) ends the wait and refuses new block jobs of that run."""
    import threading

    from distributed import LocalCluster

    from attnrmt.sweep.cluster import RunStopped, run_client, run_stop_reason, stop_run

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

    from attnrmt.sweep.cluster import run_client, stop_run
    from attnrmt.sweep.cluster.lifecycle import _RUNS, _key

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
        from attnrmt.sweep.cluster import stop_on_signals
        stop_on_signals(batch_workers={batch_workers})
        print("dask_jobqueue" in sys.modules, signal.getsignal(signal.SIGINT).__module__)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imported, handler_module = done.stdout.split()
    assert imported == str(batch_workers)
    assert handler_module == "attnrmt.sweep.cluster.lifecycle"  # ours, not dask-jobqueue's


def test_a_stopped_run_that_does_not_wind_down_exits_after_the_grace_period(
    tmp_path: Path,
) -> None:
    """The safety net of stop_on_signals: a process still alive STOP_GRACE_SECONDS after a
    stop signal exits with 128 + signal (here a 0.5 s grace on a process that would sleep
    30 s), saying so, after releasing its locks (here: removing a file, as Snakemake's
    persistence.unlock removes its lock files); a SIGKILLed run resumes the same way
    (tests/e2e/test_pipeline.py)."""
    lock = tmp_path / "0.output.lock"
    lock.write_text("")
    code = (
        "import os, signal, time\n"
        "from attnrmt.sweep.cluster.lifecycle import _exit_if_still_running_after\n"
        f"_exit_if_still_running_after(0.5, signal.SIGTERM, lambda: os.remove({str(lock)!r}))\n"
        "time.sleep(30)\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 128 + 15, done.stderr
    assert "exiting now" in done.stderr and "rerun the same command" in done.stderr
    assert time.monotonic() - started < 25  # not the 30 s sleep
    assert not lock.exists()


# --------------------------------------------------------------------------- overhead


def test_blocks_left_reports_the_last_fragment_once(tmp_path: Path) -> None:
    """BlocksLeft: fragments on disk when built are not waited for; finished() is True
    exactly once, for the last missing fragment (paths compared normalised); a run whose
    fragments all exist never releases its cluster early."""
    from attnrmt.sweep.cluster import BlocksLeft

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
        from attnrmt.sweep.cluster.lifecycle import spawning_without_main_script

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

    from attnrmt.sweep.cluster import cancel_rate_limiter_wakeups
    from attnrmt.sweep.cluster.lifecycle import RATE_LIMITER_WAKEUP

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
