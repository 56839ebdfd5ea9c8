"""A run (``attnrmt run``, :func:`attnrmt.run`; :func:`execute_run`) and the whole run as one
SLURM batch job (``attnrmt submit``; :func:`submit`): docs/cluster.md, "Progress during a
run" and "Submit and log out"; docs/architecture.md, "What `attnrmt run` shows".

A run validates the config, runs the Snakemake steps of :func:`pipeline_commands` as
children in their own session (their output to the run's log, our messages and errors to
the screen under :mod:`attnrmt.sweep.report.progress_bar`; SIGINT, SIGTERM and SIGHUP
forwarded once), then prints the end summary. A submission writes the driver job's files
under ``results/<run>/driver/`` (0600 in 0700) and refuses while the run's last driver job
is queued or alive. Cost: O(1) files and three SLURM commands per submission.
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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnrmt.sweep.compute.cluster import security, slurm
from attnrmt.sweep.store.layout import RESULTS_DIRNAME, RunLayout

_SCRIPT_FILENAME = "driver.sbatch"
_LOG_FILENAME = "driver.log"
_RECORD_FILENAME = "job.json"
DEFAULT_PROFILE = "default"
"""The shipped profile ``attnrmt run`` uses unless ``--profile`` names another
(:func:`attnrmt.workflow.profile_path`)."""
DEFAULT_DRIVER_CPUS = 2
"""Cores of a driver job unless ``attnrmt submit --cpus-per-task`` says otherwise (enough
for Snakemake with ``profiles/slurm`` or ``profiles/slurm-dask``; with ``profiles/default``
the cells run inside the driver's allocation: ask for more)."""
STOP_LEAD_SECONDS = 120
"""SLURM sends SIGTERM to the driver this many seconds before its walltime ends (time for
the run to stop and for Snakemake to release its lock)."""
END_SUMMARY_VARIABLE = "ATTNRMT_END_SUMMARY"
"""Set to ``later`` for the sweep step: the summary is printed after the report."""
_RUN_LOG_DIR = ("logs",)
"""Where under ``results/<run>`` a run's log (every line Snakemake printed) is written."""


# --------------------------------------------------------------------------- a run


def snakemake_command(
    config: str | os.PathLike[str],
    profile: str | os.PathLike[str],
    snakefile: str | os.PathLike[str] | None = None,
    cores: int | str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """Snakemake (``python -m snakemake`` of this interpreter: any venv, conda or pipx
    install) on ``snakefile`` (default: the shipped workflow) with a config file and a
    workflow profile; ``cores`` (``--cores``) only when given (else the profile decides)."""
    from attnrmt.workflow import SNAKEFILE

    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(SNAKEFILE if snakefile is None else snakefile),
    ]
    if cores is not None:
        command += ["--cores", str(cores)]
    # targets and options before --configfile, which takes every file name after it
    return [*command, *extra, "--workflow-profile", str(profile), "--configfile", str(config)]


def pipeline_commands(
    config: str | os.PathLike[str],
    run_name: str,
    profile: str | os.PathLike[str] = DEFAULT_PROFILE,
    snakefile: str | os.PathLike[str] | None = None,
    cores: int | str | None = None,
    thresholds_only: bool = False,
) -> list[list[str]]:
    """The Snakemake steps of a run: the sweep, then its report
    (``results/<run>/report.html``); ``thresholds_only``: one step whose target is
    ``thresholds.csv`` (cells and analysis, no figure or report: a round that is not the
    last, docs/architecture.md "Rounds"). The config is validated before and the summary
    printed after (:func:`execute_run`). ``profile``: a directory or a shipped profile's
    name (:func:`attnrmt.workflow.profile_path`)."""
    from attnrmt.workflow import profile_path

    layout, folder = RunLayout.of(run_name), profile_path(profile)
    if thresholds_only:
        thresholds = str(layout.root / "thresholds.csv")
        return [snakemake_command(config, folder, snakefile, cores, [thresholds])]
    report = layout.report
    return [
        snakemake_command(config, folder, snakefile, cores),
        snakemake_command(config, folder, snakefile, cores, ["--report", str(report)]),
    ]


_FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals :func:`run_steps` passes to the running step (SIGHUP as SIGTERM)."""


@dataclass
class _Forwarder:
    """Forwards :data:`_FORWARDED_SIGNALS` to the running child, once per signal received;
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
        for signum in _FORWARDED_SIGNALS:
            self.previous[signum] = signal.signal(signum, self)

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous.clear()


def _plain_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class StepOutput:
    """Where a step's output goes: every line to ``log`` (binary, or None: nowhere),
    the lines :attr:`splitter` keeps to ``show`` (all lines when ``splitter`` is None)."""

    log: Any = None
    show: Any = _plain_line
    splitter: Any = None


def _stream(child: subprocess.Popen, output: StepOutput, forwarder: _Forwarder) -> int:
    """Copy the child's output line by line (module docstring) until it exits; its exit
    code. A KeyboardInterrupt meanwhile (no handler installed) is forwarded as SIGINT."""
    assert child.stdout is not None
    while True:
        try:
            raw = child.stdout.readline()
        except KeyboardInterrupt:
            forwarder(signal.SIGINT, None)
            continue
        if not raw:
            break
        if output.log is not None:
            output.log.write(raw)
            output.log.flush()
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        shown = line if output.splitter is None else output.splitter.screen_line(line)
        if shown is not None:
            output.show(shown)
    child.stdout.close()
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            forwarder(signal.SIGINT, None)


def run_steps(
    commands: Sequence[Sequence[str]],
    sweep_env: dict[str, str],
    output: StepOutput | None = None,
    signal_handlers: bool = True,
) -> int:
    """Run ``commands`` in order (the first with ``sweep_env`` added to the environment),
    each child's output through ``output`` (default: every line to stderr), stopping at
    the first failure or signal; the exit code (``128 + signal`` when stopped by one and
    the child's code does not say otherwise). ``signal_handlers``: forward
    :data:`_FORWARDED_SIGNALS` (main thread only); without, only a KeyboardInterrupt."""
    return _run_steps(commands, sweep_env, output, signal_handlers)[0]


def _run_steps(
    commands: Sequence[Sequence[str]],
    sweep_env: dict[str, str],
    output: StepOutput | None,
    signal_handlers: bool,
) -> tuple[int, int | None]:
    """:func:`run_steps` and the signal received (None: none)."""
    output = StepOutput() if output is None else output
    forwarder = _Forwarder()
    if signal_handlers:
        forwarder.install()
    try:
        for index, command in enumerate(commands):
            env = {**os.environ, "PYTHONUNBUFFERED": "1", **(sweep_env if index == 0 else {})}
            # own session: a Ctrl-C reaches the child once, through the forwarder
            forwarder.child = subprocess.Popen(
                list(command),
                env=env,
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            code = _stream(forwarder.child, output, forwarder)
            if code < 0:  # ended by a signal (before its handlers were installed)
                code = 128 - code
            if forwarder.received is not None:
                return (code if code != 0 else 128 + forwarder.received), forwarder.received
            if code != 0:
                return code, None
        return 0, None
    finally:
        forwarder.restore()


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: exit code, where its results and log are, the errors shown."""

    code: int
    run_dir: Path
    log: Path
    errors: tuple[str, ...]
    interrupted: bool = False
    """True when the run was stopped by a signal or a KeyboardInterrupt."""


def _run_log_path(run_dir: Path, started: float) -> Path:
    """``results/<run>/logs/run-YYYYmmddTHHMMSSZ.log`` for a run started at ``started``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    return run_dir.joinpath(*_RUN_LOG_DIR, f"run-{stamp}.log")


def execute_run(
    config: str | os.PathLike[str],
    profile: str | os.PathLike[str] = DEFAULT_PROFILE,
    snakefile: str | os.PathLike[str] | None = None,
    cores: int | str | None = None,
    display: Any = None,
    signal_handlers: bool = True,
    summary_stream: Any = None,
) -> RunOutcome:
    """Validate, sweep, report, summary (module docstring), the progress on ``display``
    (default :class:`attnrmt.sweep.report.progress_bar.LiveProgress`); then the summary to
    ``summary_stream`` (default stdout), or after a failure a line naming the exit code and
    the run's log. The config's warnings are left to the caller. Raises ``ConfigError``
    (an invalid config, a run folder of another config file; before anything runs) and
    ``MissingExtra`` (no Snakemake: the ``workflow`` extra)."""
    from attnrmt.extras import require_extra
    from attnrmt.sweep import plan_run
    from attnrmt.sweep.compute.rounds import targeted
    from attnrmt.sweep.spec.config import load_valid_config
    from attnrmt.sweep.store.guard import (
        RunInProgress,
        claim_run_dir,
        hold_writer_lock,
        release_writer_lock,
    )
    from attnrmt.workflow import profile_extras, profile_path

    require_extra("workflow", "attnrmt run")
    for extra in profile_extras(profile_path(profile)):
        require_extra(extra, f"attnrmt run --profile {profile}")
    valid = load_valid_config(Path(config))
    run_plan = plan_run(valid.config, valid.sweeps)
    commands = pipeline_commands(config, run_plan.run, profile, snakefile, cores)
    run_dir = RunLayout.of(run_plan.run).root
    # refused before any folder is made; an existing folder's deleted record is rewritten
    claim_run_dir(run_dir, Path(config), write=run_dir.is_dir())
    started = time.time()
    log_path = _run_log_path(run_dir, started)
    try:  # one writer for all the steps (attnrmt.sweep.store.guard)
        hold_writer_lock(run_dir)
    except RunInProgress as busy:
        print(f"attnrmt run: {busy}", file=sys.stderr, flush=True)
        return RunOutcome(1, run_dir, log_path, (str(busy),))

    def steps(plan: Any, valid: Any, commands: list, source: Any) -> RunOutcome:
        return _execute_steps(
            plan,
            valid.warnings,
            commands,
            run_dir,
            started,
            log_path,
            source,
            display,
            signal_handlers,
            summary_stream,
            valid.config.get("analysis"),
        )

    try:
        targets = targeted(valid)
        if not targets:
            return steps(run_plan, valid, commands, config)
        return _execute_rounds(  # docs/architecture.md, "Rounds"
            targets,
            config,
            run_dir,
            run_plan.run,
            lambda plan, valid, path, last: steps(
                plan,
                valid,
                pipeline_commands(path, run_plan.run, profile, snakefile, cores, not last),
                path,
            ),
        )
    finally:
        release_writer_lock(run_dir)


def _execute_rounds(
    targets: Mapping[str, Any], config: Any, run_dir: Path, run_name: str, steps: Any
) -> RunOutcome:
    """The rounds of a run whose sweeps state a target (:mod:`attnrmt.sweep.compute.rounds`):
    from the current round on, run its config to its thresholds (an incremental rerun) and
    plan the next, until every target is met or its budget is spent; then the last round's
    figures and report. O(rounds) Snakemake runs."""
    from attnrmt.sweep import plan_run
    from attnrmt.sweep.compute.rounds import advance, current_round, round_status_lines
    from attnrmt.sweep.spec.config import load_valid_config
    from attnrmt.sweep.store.guard import claim_run_dir

    n, path = current_round(run_dir, config, run_name)
    claim_run_dir(run_dir, Path(config))  # the rounds' configs run under the config's claim
    while True:
        valid = load_valid_config(path)
        print(f"attnrmt run: {run_name!r} round {n} ({path})", flush=True)
        plan = plan_run(valid.config, valid.sweeps)
        outcome = steps(plan, valid, path, False)
        if outcome.code != 0:
            return outcome
        following = advance(run_dir, n, valid, targets)
        if following is None:
            print("\n".join(round_status_lines(run_dir)), flush=True)
            return steps(plan, valid, path, True)
        n, path = n + 1, following


def _execute_steps(
    run_plan: Any,
    warnings: Sequence[str],
    commands: Sequence[Sequence[str]],
    run_dir: Path,
    started: float,
    log_path: Path,
    config: str | os.PathLike[str],
    display: Any,
    signal_handlers: bool,
    summary_stream: Any,
    analysis_settings: Mapping[str, Any] | None = None,
) -> RunOutcome:
    """:func:`execute_run`'s steps, with the run folder's writer lock held; first the
    stores are checked against their records and the config (docs/data-contract.md,
    "Integrity")."""
    from attnrmt.analysis.pipeline import settings_sha256
    from attnrmt.log_filter import OutputSplitter, message_key
    from attnrmt.sweep.report.progress_bar import LiveProgress, ProgressTicker
    from attnrmt.sweep.report.summary import run_summary
    from attnrmt.sweep.store.guard import writer_env
    from attnrmt.sweep.store.integrity import heal_run, outdated_run

    log_path.parent.mkdir(parents=True, exist_ok=True)
    ticker = ProgressTicker(run_plan, run_dir, LiveProgress() if display is None else display)
    splitter = OutputSplitter(seen={message_key(f"attnrmt: warning: {w}") for w in warnings})
    ticker.message(f"attnrmt run: {run_plan.run!r} -> {run_dir}/; Snakemake's output: {log_path}")
    expected = {name: sweep.config_sha256 for name, sweep in run_plan.sweeps.items()}
    for line in [  # docs/data-contract.md, "Integrity"
        *heal_run(run_dir, run_plan.sweeps),
        *outdated_run(run_dir, expected, settings_sha256(analysis_settings)),
    ]:
        ticker.message(line)
    ticker.start()
    code, interrupted = 1, False
    try:
        with open(log_path, "ab") as log:
            for index, command in enumerate(commands):
                splitter.showing = True
                if index == 1:
                    splitter.steps_done = splitter.steps_total = splitter.rule = None
                ticker.stage = "starting Snakemake" if index == 0 else "report"
                log.write(f"$ {shlex.join(command)}\n".encode())
                output = StepOutput(log, ticker.message, _StageSplitter(splitter, ticker, index))
                env = {
                    **writer_env(run_dir),
                    **({END_SUMMARY_VARIABLE: "later"} if index == 0 else {}),
                }
                code, received = _run_steps([command], env, output, signal_handlers)
                if code != 0:
                    interrupted = received is not None
                    break
    except KeyboardInterrupt:  # pragma: no cover - forwarded in _stream
        code, interrupted = 130, True
    finally:
        ticker.stage = "done" if code == 0 else "stopped" if interrupted else "failed"
        ticker.stop()
    stream = sys.stdout if summary_stream is None else summary_stream
    if code == 0:
        for line in run_summary(run_plan, RESULTS_DIRNAME, started, str(config)):
            print(line, file=stream, flush=True)
    elif interrupted:
        ticker.message(
            f"attnrmt run: {run_plan.run!r} stopped (exit {code}); finished "
            f"cells are kept in {run_dir}/, the same command resumes; "
            f"log {log_path}"
        )
    else:
        ticker.message(
            f"attnrmt run: {run_plan.run!r} failed (exit {code}); the errors "
            f"are above, every line Snakemake printed is in {log_path}"
        )
    return RunOutcome(code, run_dir, log_path, tuple(splitter.error_lines), interrupted)


@dataclass
class _StageSplitter:
    """The run's :class:`~attnrmt.log_filter.OutputSplitter`, also telling the ticker
    the stage (``step N/M rule``, or ``report``) after each line."""

    splitter: Any
    ticker: Any
    index: int

    def screen_line(self, line: str) -> str | None:
        shown = self.splitter.screen_line(line)
        stage = self.splitter.stage()
        if self.index == 0 and stage is not None:
            self.ticker.stage = stage
        return shown


def run_pipeline(
    config: str | os.PathLike[str],
    profile: str | os.PathLike[str] = DEFAULT_PROFILE,
    snakefile: str | os.PathLike[str] | None = None,
    cores: int | str | None = None,
) -> int:
    """``attnrmt run``: :func:`execute_run` with signal forwarding; the exit code
    (``ConfigError`` for an invalid config, before anything runs)."""
    return execute_run(config, profile, snakefile, cores).code


# --------------------------------------------------------------------------- driver job


@dataclass(frozen=True)
class DriverPaths:
    """Files of a run's driver job (module docstring)."""

    directory: Path
    script: Path
    log: Path
    record: Path


def driver_paths(run_dir: str | os.PathLike[str]) -> DriverPaths:
    """``results/<run>/driver/`` (:attr:`attnrmt.sweep.store.layout.RunLayout.driver_dir`)
    and its files."""
    directory = RunLayout(run_dir).driver_dir
    return DriverPaths(
        directory,
        directory / _SCRIPT_FILENAME,
        directory / _LOG_FILENAME,
        directory / _RECORD_FILENAME,
    )


@dataclass(frozen=True)
class DriverRequest:
    """The driver job's own SLURM request; ``None`` leaves a value to the site's default
    (docs/cluster.md, "Submit and log out": how many cores each profile needs)."""

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
    config: Path, profile: Path, snakefile: Path | None, cores: int | str | None
) -> list[str]:
    """``attnrmt run`` with this interpreter, absolute paths (the job's view)."""
    command = [sys.executable, "-m", "attnrmt", "run", str(config), "--profile", str(profile)]
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


def _driver_state(record: dict[str, Any]) -> slurm.JobState | None:
    """The recorded driver job as squeue lists it, or ``None`` when it is gone (ended)."""
    return slurm.job_states([str(record["job_id"])]).get(str(record["job_id"]))


def _active_driver(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], slurm.JobState] | None:
    """``(record, state)`` of the run's driver job while it is queued or alive, else None."""
    record = read_driver_record(run_dir)
    if record is None:
        return None
    state = _driver_state(record)
    return (record, state) if state is not None and state.active else None


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
    cores: int | str | None = None,
) -> dict[str, Any]:
    """``attnrmt submit``, run in the workflow's working directory (the job runs there):
    write the driver job's files and submit it; its record. Raises ``ConfigError`` (an
    invalid config, a run folder of another config file), :class:`DriverAlive` (the run's
    last driver job is queued or running: which, since when, how to follow it) and
    ValueError (no ``sbatch``, or SLURM refuses the request or the submission). O(1)."""
    from attnrmt.sweep.spec.config import load_valid_config
    from attnrmt.sweep.store.guard import claim_run_dir
    from attnrmt.workflow import profile_path

    valid = load_valid_config(config)
    if shutil.which("sbatch") is None:
        raise ValueError(
            "sbatch not found: attnrmt submit needs SLURM's commands on PATH "
            "(run it on a login node of the cluster)"
        )
    run_name = str(valid.config["run"])
    run_dir = RunLayout.of(run_name).root
    claim_run_dir(run_dir, config)
    paths = driver_paths(run_dir)
    security.private_directory(paths.directory)
    with _submission_lock(paths.directory):  # two submits at once: the second sees the first
        _refuse_if_alive(run_dir, run_name, config)
        command = run_command(
            Path(config).resolve(),
            profile_path(profile).resolve(),
            None if snakefile is None else Path(snakefile).resolve(),
            cores,
        )
        script = driver_script(
            command, run_name, Path.cwd(), paths.log.resolve(), request or DriverRequest()
        )
        security.write_private_file(paths.script, script)
        # the log SLURM appends to, made 0600 here (not with SLURM's default umask)
        flags, mode = os.O_WRONLY | os.O_CREAT | os.O_APPEND, security.PRIVATE_FILE_MODE
        os.close(os.open(paths.log, flags, mode))
        os.chmod(paths.log, security.PRIVATE_FILE_MODE)
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


def _refuse_if_alive(run_dir: Path, run_name: str, config: str | os.PathLike[str]) -> None:
    """Raise :class:`DriverAlive` when the run's driver job is queued or alive."""
    alive = _active_driver(run_dir)
    if alive is None:
        return
    record, state = alive
    since = ""
    if state.state == "RUNNING":  # squeue's %S: the start, in the cluster's local time
        done = slurm.slurm_command("squeue", "-h", "-j", str(state.job_id), "-o", "%S")
        started = done.stdout.strip() if done.returncode == 0 else ""
        since = f" since {started}" if started not in ("", "N/A", "Unknown") else ""
    raise DriverAlive(
        f"driver job {record['job_id']} of run {run_name!r} is {state.state}{since} "
        f"(submitted {_utc(record['submitted'])}); {follow_hint(config, record)}"
    )


def sbatch(script: Path) -> str:
    """Submit a batch script (``sbatch --parsable``); its job id (ValueError with sbatch's
    message when it fails)."""
    done = slurm.slurm_command("sbatch", "--parsable", str(script))
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
        state = _driver_state(record)
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
