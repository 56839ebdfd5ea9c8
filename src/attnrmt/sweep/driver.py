"""What a run is, and the whole run as one SLURM batch job: submit and log out.

A run (``attnrmt run CONFIG``; ``make run`` and the driver job both call it, so its steps
are written once, in :func:`pipeline_commands`): validate the config, run Snakemake with a
workflow profile (``ATTNRMT_END_SUMMARY=later``), build the report (``snakemake --report
results/<run>/report.html``), print the end summary (:func:`attnrmt.summary.run_summary`).
:func:`run_pipeline` runs the Snakemake steps as child processes in their own session and
forwards SIGINT, SIGTERM and SIGHUP (as SIGTERM) to the one running, once: Snakemake
then stops within seconds, keeping what finished
(:func:`attnrmt.sweep.cluster.stop_on_signals`), and the later steps are skipped.

``attnrmt submit CONFIG`` (:func:`submit`) writes, under ``results/<run>/driver/`` (a 0700
folder; files 0600, like the cluster credentials):

- ``driver.sbatch``: the batch script (:func:`driver_script`): ``#SBATCH`` lines from
  :class:`DriverRequest`, ``--signal=B:TERM@`` :data:`STOP_LEAD_SECONDS` so that the run
  is told to stop before the walltime ends, and ``exec`` of ``attnrmt run`` (the batch
  shell becomes the run: SLURM's signal reaches it);
- ``driver.log``: the job's output, appended to by every submission;
- ``job.json``: the job id, submission time, script, log and command.

Before submitting it refuses when the run's last driver job is still queued or alive
(:func:`active_driver`: one ``squeue``; concurrent submits take turns on a POSIX lock of
``driver/.submit.lock``), so rerunning the command never starts a second driver; when
that job is gone, the same command submits a new one, which resumes the run
(finished cells are kept). SLURM's objection to the request (``sbatch --test-only``:
a walltime above the partition's limit, more cores than any node has) is reported at once
instead of a job that pends forever.

Cost: O(1) files and three SLURM commands per submission; memory O(1).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnrmt.sweep.cluster import security, slurm

DRIVER_DIRNAME = "driver"
SCRIPT_FILENAME = "driver.sbatch"
LOG_FILENAME = "driver.log"
RECORD_FILENAME = "job.json"
RESULTS_DIRNAME = "results"
"""Where the Snakefile writes runs (``results/<run>/``, relative to the working directory)."""
DEFAULT_PROFILE = "profiles/default"
DEFAULT_DRIVER_CPUS = 2
"""Cores of a driver job unless ``attnrmt submit --cpus-per-task`` says otherwise (enough
for Snakemake with ``profiles/slurm`` or ``profiles/slurm-dask``; with ``profiles/default``
the cells run inside the driver's allocation: ask for more)."""
STOP_LEAD_SECONDS = 120
"""SLURM sends SIGTERM to the driver this many seconds before its walltime ends (time for
the run to stop and for Snakemake to release its lock)."""
END_SUMMARY_VARIABLE = "ATTNRMT_END_SUMMARY"
"""Set to ``later`` for the sweep step: the summary is printed after the report."""


# --------------------------------------------------------------------------- a run


def snakemake_command(
    config: str | os.PathLike[str],
    profile: str | os.PathLike[str],
    snakefile: str | os.PathLike[str] | None = None,
    cores: int | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """Snakemake with this interpreter's ``snakemake``, a config file and a workflow
    profile; ``cores`` (``--cores``) only when given (else the profile decides)."""
    command = [str(Path(sys.executable).with_name("snakemake"))]
    if snakefile is not None:
        command += ["--snakefile", str(snakefile)]
    if cores is not None:
        command += ["--cores", str(cores)]
    # targets and options before --configfile, which takes every file name after it
    return [*command, *extra, "--workflow-profile", str(profile), "--configfile", str(config)]


def pipeline_commands(
    config: str | os.PathLike[str],
    run_name: str,
    profile: str | os.PathLike[str] = DEFAULT_PROFILE,
    snakefile: str | os.PathLike[str] | None = None,
    cores: int | None = None,
) -> list[list[str]]:
    """The Snakemake steps of a run: the sweep, then its report
    (``results/<run>/report.html``). The config is validated before and the summary
    printed after (:func:`run_pipeline`)."""
    report = Path(RESULTS_DIRNAME) / run_name / "report.html"
    return [
        snakemake_command(config, profile, snakefile, cores),
        snakemake_command(config, profile, snakefile, cores, ["--report", str(report)]),
    ]


FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals :func:`run_steps` passes to the running step (SIGHUP as SIGTERM)."""


@dataclass
class _Forwarder:
    """Forwards :data:`FORWARDED_SIGNALS` to the running child, once per signal received;
    remembers the first."""

    child: subprocess.Popen | None = None
    received: int | None = None
    previous: dict[int, Any] = field(default_factory=dict)

    def __call__(self, signum: int, frame: Any) -> None:
        if self.received is None:
            self.received = signum
        if self.child is not None and self.child.poll() is None:
            # a closed terminal (SIGHUP) stops the run as cleanly as SIGTERM
            self.child.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    def install(self) -> None:
        for signum in FORWARDED_SIGNALS:
            self.previous[signum] = signal.signal(signum, self)

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


def run_steps(commands: Sequence[Sequence[str]], sweep_env: dict[str, str]) -> int:
    """Run ``commands`` in order (the first with ``sweep_env`` added to the environment),
    stopping at the first failure or signal; return the exit code (``128 + signal`` when
    stopped by one and the child's code does not say otherwise)."""
    forwarder = _Forwarder()
    forwarder.install()
    try:
        for index, command in enumerate(commands):
            env = {**os.environ, **(sweep_env if index == 0 else {})}
            # own session: a Ctrl-C reaches the child once, through the forwarder
            forwarder.child = subprocess.Popen(list(command), env=env, start_new_session=True)
            while True:
                try:
                    code = forwarder.child.wait()
                    break
                except KeyboardInterrupt:  # pragma: no cover - handler replaced above
                    continue
            if forwarder.received is not None:
                return code if code != 0 else 128 + forwarder.received
            if code != 0:
                return code
        return 0
    finally:
        forwarder.restore()


def run_pipeline(
    config: str | os.PathLike[str],
    profile: str | os.PathLike[str] = DEFAULT_PROFILE,
    snakefile: str | os.PathLike[str] | None = None,
    cores: int | None = None,
) -> int:
    """``attnrmt run``: validate, sweep, report, summary (module docstring); exit code.

    Raises
    ------
    attnrmt.sweep.config.ConfigError
        An invalid config (before anything runs).
    """
    from attnrmt.summary import run_summary
    from attnrmt.sweep import plan_run
    from attnrmt.sweep.config import load_valid_config

    valid = load_valid_config(config)
    for warning in valid.warnings:
        print(f"attnrmt run: warning: {warning}", file=sys.stderr)
    run_plan = plan_run(valid.config, valid.sweeps)
    started = time.time()
    commands = pipeline_commands(config, run_plan.run, profile, snakefile, cores)
    code = run_steps(commands, {END_SUMMARY_VARIABLE: "later"})
    if code == 0:
        for line in run_summary(run_plan, RESULTS_DIRNAME, started, str(config)):
            print(line, flush=True)
    return code


# --------------------------------------------------------------------------- driver job


@dataclass(frozen=True)
class DriverPaths:
    """Files of a run's driver job (module docstring)."""

    directory: Path
    script: Path
    log: Path
    record: Path


def driver_paths(run_dir: str | os.PathLike[str]) -> DriverPaths:
    """``results/<run>/driver/`` and its files."""
    directory = Path(run_dir) / DRIVER_DIRNAME
    return DriverPaths(
        directory,
        directory / SCRIPT_FILENAME,
        directory / LOG_FILENAME,
        directory / RECORD_FILENAME,
    )


@dataclass(frozen=True)
class DriverRequest:
    """The driver job's own SLURM request; ``None`` leaves a value to the site's default.

    The driver runs Snakemake (and, with ``profiles/default``, the Dask cluster computing
    the cells inside its allocation); with ``profiles/slurm`` and ``profiles/slurm-dask``
    the cells run in other jobs and a couple of cores suffice.
    """

    time: str | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    partition: str | None = None
    account: str | None = None
    extra: tuple[str, ...] = ()
    """More ``sbatch`` options, as written on sbatch's command line (``--qos=normal``)."""

    def directives(self) -> list[str]:
        """``--option=value`` of every value set, then :attr:`extra`."""
        values = {
            "time": self.time,
            "cpus-per-task": self.cpus_per_task,
            "mem": self.mem,
            "partition": self.partition,
            "account": self.account,
        }
        return [f"--{name}={value}" for name, value in values.items() if value is not None] + [
            *self.extra
        ]


def driver_script(
    run_command: Sequence[str], run_name: str, workdir: Path, log: Path, request: DriverRequest
) -> str:
    """The batch script of a driver job: ``#SBATCH`` lines, then ``exec`` of the run."""
    directives = [
        f"--job-name=attnrmt-{run_name}",
        f"--chdir={workdir}",
        f"--output={log}",
        "--open-mode=append",
        f"--signal=B:TERM@{STOP_LEAD_SECONDS}",
        *request.directives(),
    ]
    lines = ["#!/bin/bash", *(f"#SBATCH {shlex.quote(item)}" for item in directives)]
    lines += [
        f"# attnrmt submit: the whole run {run_name!r} as one job. SLURM sends SIGTERM",
        f"# {STOP_LEAD_SECONDS} s before the walltime; `exec` makes the run this shell's",
        "# process, so the signal reaches it and it stops cleanly, keeping what finished.",
        "# Rerun the same `attnrmt submit` command to resume.",
        "set -eu",
        'echo "attnrmt driver: job ${SLURM_JOB_ID:-?} on $(hostname), '
        'started $(date -u +%Y-%m-%dT%H:%M:%SZ)"',
        f"exec {shlex.join(run_command)}",
        "",
    ]
    return "\n".join(lines)


def run_command(
    config: Path, profile: Path, snakefile: Path | None, cores: int | None
) -> list[str]:
    """``attnrmt run`` with this interpreter, absolute paths (the job's view)."""
    command = [sys.executable, "-m", "attnrmt.cli", "run", str(config), "--profile", str(profile)]
    if snakefile is not None:
        command += ["--snakefile", str(snakefile)]
    if cores is not None:
        command += ["--cores", str(cores)]
    return command


def read_driver_record(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``results/<run>/driver/job.json``, or ``None`` when missing or unreadable."""
    try:
        record = json.loads(driver_paths(run_dir).record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("job_id") else None


def driver_state(record: dict[str, Any]) -> slurm.JobState | None:
    """The recorded driver job as squeue lists it, or ``None`` when it is gone (ended)."""
    return slurm.job_states([str(record["job_id"])]).get(str(record["job_id"]))


def active_driver(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], slurm.JobState] | None:
    """``(record, state)`` of the run's driver job while it is queued or alive, else None."""
    record = read_driver_record(run_dir)
    if record is None:
        return None
    state = driver_state(record)
    return (record, state) if state is not None and state.active else None


def job_start_time(job_id: str) -> str | None:
    """When a job started (squeue ``%S``, the cluster's local time), or ``None``."""
    done = subprocess.run(
        ["squeue", "-h", "-j", str(job_id), "-o", "%S"],
        capture_output=True,
        text=True,
        timeout=slurm.COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    text = done.stdout.strip()
    return text if done.returncode == 0 and text and text not in ("N/A", "Unknown") else None


def follow_hint(config: str | os.PathLike[str], record: dict[str, Any]) -> str:
    """How to follow and stop a driver job."""
    return (
        f"follow it with `attnrmt status {config}` (progress, ETA, driver job state) and "
        f"`tail -f {record['log']}`; stop it with `scancel {record['job_id']}` "
        "(finished cells are kept; the same submit command resumes)"
    )


def _utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


class DriverAlive(RuntimeError):
    """The run's driver job is still queued or running: no second one is submitted."""


def submit(
    config: str | os.PathLike[str],
    profile: str | os.PathLike[str] = DEFAULT_PROFILE,
    request: DriverRequest | None = None,
    snakefile: str | os.PathLike[str] | None = None,
    cores: int | None = None,
) -> dict[str, Any]:
    """``attnrmt submit``: write the driver job's files and submit it; return its record.

    Run in the workflow's working directory (the job runs there). O(1).

    Raises
    ------
    attnrmt.sweep.config.ConfigError
        An invalid config, or a run folder that belongs to another config file.
    DriverAlive
        The run's last driver job is still queued or running (the message says which,
        since when, and how to follow it).
    ValueError
        No ``sbatch`` here, or SLURM refuses the request (``sbatch --test-only``) or the
        submission (nothing is queued).
    """
    from attnrmt.sweep.config import claim_run_dir, load_valid_config

    valid = load_valid_config(config)
    if shutil.which("sbatch") is None:
        raise ValueError(
            "sbatch not found: attnrmt submit needs SLURM's commands on PATH "
            "(run it on a login node of the cluster)"
        )
    run_name = str(valid.config["run"])
    run_dir = Path(RESULTS_DIRNAME) / run_name
    claim_run_dir(run_dir, config)
    paths = driver_paths(run_dir)
    security.private_directory(paths.directory)
    with _submission_lock(paths.directory):  # two submits at once: the second sees the first
        refuse_if_alive(run_dir, run_name, config)
        command = run_command(
            Path(config).resolve(),
            Path(profile).resolve(),
            None if snakefile is None else Path(snakefile).resolve(),
            cores,
        )
        script = driver_script(
            command, run_name, Path.cwd(), paths.log.resolve(), request or DriverRequest()
        )
        write_driver_files(paths, script)
        objection = slurm.dry_run_submission(script, paths.directory)
        if objection is not None:
            raise ValueError(f"SLURM cannot run the driver job ({paths.script}): {objection}")
        record = {
            "job_id": sbatch(paths.script),
            "run": run_name,
            "submitted": time.time(),
            "host": socket.gethostname(),
            "workdir": str(Path.cwd()),
            "config": str(config),
            "profile": str(profile),
            "script": str(paths.script),
            "log": str(paths.log),
            "command": command,
        }
        security.write_private_file(paths.record, json.dumps(record, indent=1))
    return record


@contextlib.contextmanager
def _submission_lock(directory: Path) -> Iterator[None]:
    """An exclusive POSIX lock on ``directory/.submit.lock`` while a submit decides."""
    descriptor = os.open(
        directory / ".submit.lock", os.O_WRONLY | os.O_CREAT, security.PRIVATE_FILE_MODE
    )
    try:
        fcntl.lockf(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def refuse_if_alive(run_dir: Path, run_name: str, config: str | os.PathLike[str]) -> None:
    """Raise :class:`DriverAlive` when the run's driver job is queued or alive."""
    alive = active_driver(run_dir)
    if alive is None:
        return
    record, state = alive
    started = job_start_time(state.job_id) if state.state == "RUNNING" else None
    since = f" since {started}" if started else ""
    raise DriverAlive(
        f"driver job {record['job_id']} of run {run_name!r} is {state.state}{since} "
        f"(submitted {_utc(record['submitted'])}); {follow_hint(config, record)}"
    )


def write_driver_files(paths: DriverPaths, script: str) -> None:
    """The batch script (0600) and the log it appends to (created 0600 here, so that SLURM
    appends to a private file instead of creating one with the default umask)."""
    security.write_private_file(paths.script, script)
    descriptor = os.open(
        paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, security.PRIVATE_FILE_MODE
    )
    os.close(descriptor)
    os.chmod(paths.log, security.PRIVATE_FILE_MODE)


def sbatch(script: Path) -> str:
    """Submit a batch script (``sbatch --parsable``); its job id.

    Raises
    ------
    ValueError
        sbatch failed (its message).
    """
    done = subprocess.run(
        ["sbatch", "--parsable", str(script)],
        capture_output=True,
        text=True,
        timeout=slurm.COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    job_id = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not job_id:
        raise ValueError(
            f"sbatch {script} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}"
        )
    return job_id


def driver_status_line(run_dir: str | os.PathLike[str]) -> tuple[str, dict[str, Any]] | None:
    """For ``attnrmt status``: one line on the run's driver job and its JSON form, or
    ``None`` when the run has no driver record. One ``squeue``."""
    record = read_driver_record(run_dir)
    if record is None:
        return None
    try:
        state = driver_state(record)
        text = "not in the queue (ended; see its log)" if state is None else state.state
        if state is not None and state.state == "PENDING":
            text += f" ({state.reason})"
        state_name = None if state is None else state.state
    except (OSError, subprocess.SubprocessError):
        text, state_name = "unknown (squeue unavailable here)", None
    line = (
        f"driver job {record['job_id']} (submitted {_utc(record['submitted'])}): {text}; "
        f"log {record['log']}"
    )
    return line, {
        "job_id": record["job_id"],
        "state": state_name,
        "log": record["log"],
        "submitted": record["submitted"],
    }
