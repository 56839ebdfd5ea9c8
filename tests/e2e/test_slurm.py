"""Both SLURM profiles end to end on a real single-node SLURM (tests/harness/slurm.sh).

* ``profiles/slurm-dask``: Snakemake runs locally, the cells run on Dask workers that are
  SLURM jobs (dask-jobqueue).
* ``profiles/slurm``: Snakemake's SLURM executor; every block is its own SLURM job that
  computes its cells with an in-process Dask cluster sized to the allocation.

Each runs the same tiny sweep as a local run and must give numerically identical cells.
The shipped profiles are used as they are, except for the site settings that a user edits
for their cluster (partition, sizes, walltime, the network interface) and the polling
intervals (shortened so the test does not wait on defaults made for real clusters).

SLURM is started with ``tests/harness/slurm.sh start`` when it is not up. If it cannot be
started the tests are skipped on a developer machine, but fail under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import xarray as xr
import yaml

from attnrmt import workflow
from attnrmt.sweep.compute.cluster import connect
from tests.e2e.helpers import (
    REPO_ROOT,
    Workdir,
    assert_locked_out,
    assert_private_modes,
    credential_files,
    intruder_report,
    numeric_variables,
    require_other_user,
    tiny_config,
    wait_for_scheduler_file,
)

pytestmark = [pytest.mark.slurm, pytest.mark.e2e, pytest.mark.slow]

HARNESS = REPO_ROOT / "tests" / "harness" / "slurm.sh"
PROFILES = workflow.PROFILES_DIR
N_CELLS = 12  # tiny_config: 2 weights x 3 snr x 2 replicates
BLOCK_SIZE = 6  # one block per weights line: 2 blocks
USABLE_STATES = ("idle", "mixed", "allocated", "completing")
SITE_WALLTIME = "00:14:00"  # in the test's jobqueue.yaml, not in the profile
SCHEDULER_DASHBOARD_PREFIX = "http://127.0.0.1:"
STOP_BOUND_SECONDS = 60
"""A stopped or failing run must have exited by then (seconds; this only catches a hang)."""
UNSATISFIABLE_BLOCK_BOUND_SECONDS = 180
"""A run whose block jobs can never run must have ended by then: SLURM names the pending
reason at its next scheduling pass, the watch polls every 15 s, then 30 s at most to stop
(seconds; this only catches a hang)."""


# --------------------------------------------------------------------------- SLURM


def slurm_state() -> str:
    """State of the first node per ``sinfo`` ('' when SLURM does not answer)."""
    if shutil.which("sinfo") is None:
        return ""
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = out.stdout.split()
    return lines[0].strip("*~#!%$@^-") if out.returncode == 0 and lines else ""


def default_partition() -> str:
    """Name of the default partition (``sinfo`` marks it with ``*``)."""
    out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=20)
    names = out.stdout.split()
    for name in names:
        if name.endswith("*"):
            return name.rstrip("*")
    return names[0]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"SLURM is required under CI=true but unavailable: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def slurm() -> str:
    """A usable single-node SLURM (started through the harness if needed); its partition."""
    if slurm_state() not in USABLE_STATES:
        if shutil.which("slurmctld") is None and not Path("/usr/sbin/slurmctld").exists():
            _unavailable("SLURM is not installed (run tests/harness/system-deps.sh)")
        try:
            started = subprocess.run(
                ["bash", str(HARNESS), "start"], capture_output=True, text=True, timeout=180
            )
        except subprocess.TimeoutExpired:
            _unavailable("tests/harness/slurm.sh start timed out")
        if started.returncode != 0 or slurm_state() not in USABLE_STATES:
            _unavailable(
                f"tests/harness/slurm.sh start failed ({started.returncode}): "
                f"{(started.stdout + started.stderr)[-1500:]}"
            )
    return default_partition()


# --------------------------------------------------------------------------- profiles


def slurm_dask_profile(directory: Path, **jobqueue: Any) -> Path:
    """profiles/slurm-dask with this machine's site settings (small workers, loopback);
    ``jobqueue`` entries replace (``None``: remove) the profile's ``dask.jobqueue`` keys."""
    profile = yaml.safe_load((PROFILES / "slurm-dask" / "config.yaml").read_text())
    assert profile["config"]["dask"]["mode"] == "slurm"
    profile["cores"] = 2
    settings = profile["config"]["dask"]["jobqueue"]
    settings.update(cores=1, memory="1GB", walltime="00:15:00", n_workers=2, interface="lo")
    settings.update(jobqueue)
    for key in [key for key, value in settings.items() if value is None]:
        del settings[key]
    return _write_profile(directory, profile)


def slurm_executor_profile(directory: Path, partition: str, **block_resources: Any) -> Path:
    """profiles/slurm with this cluster's partition, small jobs and fast status polling;
    ``block_resources`` replace simulate_block's resources (e.g. ``cpus_per_task=64``)."""
    profile = yaml.safe_load((PROFILES / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "slurm"
    assert profile["config"]["dask"]["mode"] == "job"
    assert profile["slurm-status-command"] == "squeue"
    profile["default-resources"].update(slurm_partition=partition, mem_mb=500, runtime=10)
    profile["set-resources"]["simulate_block"].update(cpus_per_task=1, mem_mb=1000, runtime=10)
    profile["set-resources"]["simulate_block"].update(block_resources)
    profile["jobs"] = 4
    # the defaults (20 s) suit a real cluster, not a test; no accounting on this cluster
    profile["slurm-init-seconds-before-status-checks"] = 1
    profile["seconds-between-status-checks"] = 1
    profile["slurm-no-account"] = True
    return _write_profile(directory, profile)


def _write_profile(directory: Path, profile: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return directory


@contextlib.contextmanager
def cancel_on_exit(job_ids: set[str]) -> Iterator[set[str]]:
    """Cancel SLURM jobs whose ids are collected in ``job_ids`` (left by a failed test)."""
    try:
        yield job_ids
    finally:
        if job_ids:
            subprocess.run(["scancel", *sorted(job_ids)], capture_output=True, timeout=30)


# --------------------------------------------------------------------------- tests


def sweep_config(run: str) -> dict[str, Any]:
    """The tiny sweep in 2 blocks of 6 cells."""
    return tiny_config(run=run, execution={"block_size": BLOCK_SIZE})


@pytest.fixture(scope="module")
def local_cells(tmp_path_factory: pytest.TempPathFactory) -> xr.Dataset:
    """The sweep computed locally (default profile): the reference numbers."""
    workdir = Workdir.create(tmp_path_factory.mktemp("local"), sweep_config("slurmtest"))
    try:
        result = workdir.run()
        assert result.computed == N_CELLS
        return numeric_variables(workdir.open_cells())
    finally:
        workdir.close()


def test_slurm_dask_profile_matches_local_run(
    slurm: str, local_cells: xr.Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local Snakemake + Dask workers as SLURM jobs: same cells as a local run. The
    profile sets no walltime: the site's jobqueue.yaml decides it."""
    profile = slurm_dask_profile(tmp_path / "profile", walltime=None)
    site = tmp_path / "dask-config"
    site.mkdir()
    (site / "jobqueue.yaml").write_text(
        yaml.safe_dump({"jobqueue": {"slurm": {"walltime": SITE_WALLTIME}}})
    )
    monkeypatch.setenv("DASK_CONFIG", str(site))
    workdir = Workdir.create(tmp_path / "work", sweep_config("slurmtest"))
    try:
        result = workdir.run("--workflow-profile", str(profile), timeout=240, check=False)
        assert result.returncode == 0, result.output[-6000:]
        assert result.computed == N_CELLS
        xr.testing.assert_identical(numeric_variables(workdir.open_cells()), local_cells)
        # the cells really ran on dask-jobqueue workers submitted to SLURM
        dask_dir = workdir.run_dir / ".dask"
        worker_logs = list((dask_dir / "slurm-logs").glob("dask-worker-*.err"))
        assert worker_logs, f"no SLURM worker job logs in {dask_dir}"
        cluster_log = (dask_dir / "cluster.log").read_text()
        assert f"#SBATCH -t {SITE_WALLTIME}" in cluster_log, cluster_log[-3000:]
        assert "--tls-key" in cluster_log  # workers speak TLS with the run's credentials
        assert f"dashboard {SCHEDULER_DASHBOARD_PREFIX}" in result.output
    finally:
        workdir.close()


def test_slurm_executor_profile_matches_local_run(
    slurm: str, local_cells: xr.Dataset, tmp_path: Path
) -> None:
    """Snakemake's SLURM executor, one SLURM job per block: same cells as a local run."""
    profile = slurm_executor_profile(tmp_path / "profile", slurm)
    workdir = Workdir.create(tmp_path / "work", sweep_config("slurmtest"))
    with cancel_on_exit(set()) as job_ids:
        try:
            result = workdir.run("--workflow-profile", str(profile), timeout=300, check=False)
            job_ids.update(re.findall(r"submitted with SLURM jobid (\d+)", result.output))
            assert result.returncode == 0, result.output[-6000:]
            assert result.computed == N_CELLS
            xr.testing.assert_identical(numeric_variables(workdir.open_cells()), local_cells)
            # every block (2 of them) ran as its own SLURM job: the executor names each
            # submission's log after its rule, so the job ids are tied to simulate_block
            block_job_ids = set(
                re.findall(
                    r"submitted with SLURM jobid (\d+) \(log: [^)]*simulate_block[^)]*\)",
                    result.output,
                )
            )
            assert len(block_job_ids) == N_CELLS // BLOCK_SIZE, result.output[-4000:]
            assert block_job_ids <= job_ids
        finally:
            workdir.close()


# --------------------------------------------------------------------------- fail fast, stop


def node_cores() -> int:
    """Cores of the (single) test node."""
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%c"], capture_output=True, text=True)
    return int(out.stdout.split()[0])


def test_unsatisfiable_worker_request_stops_the_run_fast(slurm: str, tmp_path: Path) -> None:
    """Worker jobs asking more cores than any node has: one message naming the request
    and SLURM's reason, the run ends (before, it waited forever with PartitionConfig)."""
    too_many = node_cores() * 2
    profile = slurm_dask_profile(tmp_path / "profile", cores=too_many)
    workdir = Workdir.create(tmp_path / "work", sweep_config("unsat"))
    try:
        result = workdir.run(
            "--workflow-profile", str(profile), timeout=STOP_BOUND_SECONDS * 2, check=False
        )
        assert result.returncode != 0
        message = (
            f"SLURM cannot run the Dask worker jobs (cores={too_many}, memory=1GB, "
            "walltime=00:15:00"
        )
        assert message in result.output, result.output[-4000:]
        assert "Requested node configuration is not available" in result.output
        assert result.computed == 0
        # nothing was queued: no worker job ever wrote a log
        assert not list((workdir.run_dir / ".dask" / "slurm-logs").glob("*")), "jobs queued"
    finally:
        workdir.close()


def test_pending_reason_that_never_clears_is_recognised(slurm: str, tmp_path: Path) -> None:
    """A real job pending with PartitionConfig (more cores than the node): the watch of a
    running cluster names it as fatal; a job held for later is only reported."""
    from attnrmt.sweep.compute.cluster import ClusterSettings
    from attnrmt.sweep.compute.cluster.jobqueue import pending_watch
    from attnrmt.sweep.compute.cluster.slurm import job_states

    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nsleep 1\n")
    settings = ClusterSettings.from_config({"mode": "slurm", "jobqueue": {"cores": 64}})
    watch = pending_watch(settings, cluster=None, on_fatal=lambda message: None)
    with cancel_on_exit(set()) as job_ids:
        for extra in ([f"-c{node_cores() * 2}"], ["-c1", "--begin=now+1hour"]):
            submitted = subprocess.run(
                ["sbatch", "--parsable", "-o", "/dev/null", *extra, str(script)],
                capture_output=True,
                text=True,
                check=True,
            )
            job_ids.add(submitted.stdout.strip().split(";")[0])
        unsatisfiable, held = sorted(job_ids, key=int)
        states: dict = {}
        for _ in range(60):  # SLURM sets the reason at its next scheduling pass
            states = job_states(job_ids)
            if states.get(unsatisfiable) and states[unsatisfiable].reason != "None":
                break
            subprocess.run(["sleep", "1"])
        assert states[unsatisfiable].reason == "PartitionConfig", states
        message = watch.fatal_message(states)
        assert message is not None and f"worker job {unsatisfiable}" in message
        assert "cores=64" in message and "PartitionConfig" in message
        assert watch.fatal_message({held: states[held]}) is None, states[held]


def test_unsatisfiable_block_request_stops_the_run_fast(slurm: str, tmp_path: Path) -> None:
    """profiles/slurm with block jobs asking more cores than any node has: the jobs pend
    with PartitionConfig; the run ends non-zero with one message naming the request and
    SLURM's reason, and leaves no job in the queue (before, it waited forever)."""
    too_many = node_cores() * 2
    profile = slurm_executor_profile(tmp_path / "profile", slurm, cpus_per_task=too_many)
    workdir = Workdir.create(tmp_path / "work", sweep_config("unsatblocks"))
    with cancel_on_exit(set()) as job_ids:
        try:
            result = workdir.run(
                "--workflow-profile",
                str(profile),
                timeout=UNSATISFIABLE_BLOCK_BOUND_SECONDS,
                check=False,
            )
            job_ids.update(re.findall(r"submitted with SLURM jobid (\d+)", result.output))
            assert job_ids, result.output[-4000:]
            assert result.returncode != 0, result.output[-4000:]
            request = (
                f"(rule=simulate_block, cores={too_many}, memory=1000M, walltime=10:00, "
                f"partition={slurm}): pending with reason PartitionConfig"
            )
            assert request in result.output, result.output[-4000:]
            assert result.output.count("SLURM will never run the job") == 1, result.output
            assert result.computed == 0
            assert not queued_jobs(workdir), "jobs left in the queue"
        finally:
            workdir.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_run_whose_workers_never_come_is_private_and_stops_on_signal(
    slurm: str, tmp_path: Path, signum: int
) -> None:
    """Worker jobs that cannot start for an hour (--begin): the scheduler is up and the
    run waits. Another user cannot read its credentials or run code on its scheduler; a
    signal stops the run within the bound, its worker jobs are cancelled and no lock is
    left for the rerun."""
    require_other_user()
    profile = slurm_dask_profile(tmp_path / "profile", job_extra_directives=["--begin=now+1hour"])
    workdir = Workdir.create(tmp_path / "work", sweep_config("never"))
    with cancel_on_exit(set()) as job_ids:
        try:
            process = workdir.start("--workflow-profile", str(profile))
            info = wait_for_scheduler_file(workdir, process)
            assert info["address"].startswith("tls://127.0.0.1:"), info
            assert_private_modes(workdir.run_dir)
            assert_locked_out(intruder_report(info["address"], credential_files(workdir.run_dir)))
            with connect(workdir.run_dir) as client:  # the owner gets in
                assert client.run_on_scheduler(os.getpid) == process.pid
            job_ids.update(queued_jobs(workdir))
            assert job_ids, "no worker job was queued"
            os.kill(process.pid, signum)
            returncode = process.wait(timeout=STOP_BOUND_SECONDS)
            log = (workdir.path / "snakemake-background.log").read_text()
            assert returncode != 0, log[-4000:]
            assert f"stopping the run: {signal.Signals(signum).name} received" in log
            assert not queued_jobs(workdir) & job_ids, "worker jobs left in the queue"
            locks = workdir.path / ".snakemake" / "locks"
            assert not locks.exists() or not list(locks.iterdir()), "stale lock left"
        finally:
            workdir.close()


def queued_jobs(workdir: Workdir) -> set[str]:
    """Ids of queued or running jobs submitted from the run's directory (worker, block or
    driver jobs)."""
    out = subprocess.run(["squeue", "-h", "-o", "%i|%Z"], capture_output=True, text=True)
    lines = [line.split("|", 1) for line in out.stdout.splitlines() if "|" in line]
    return {job for job, directory in lines if Path(directory) == workdir.path}
