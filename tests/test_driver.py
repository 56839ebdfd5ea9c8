"""The driver (attnrmt.driver): attnrmt run and attnrmt submit without SLURM: the steps of
a run, the driver's batch script, and signals reaching the running step
(tests/e2e/test_submit.py submits for real)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from attnrmt import driver

CHILD = textwrap.dedent(
    """
    import pathlib, signal, sys, time
    ready, got = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    def stop(number, frame):
        got.write_text(str(number))
        sys.exit(int(sys.argv[3]))
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ready.write_text("ready")
    time.sleep(60)
    """
)


def test_pipeline_is_the_sweep_then_its_report(tmp_path: Path) -> None:
    from attnrmt.workflow import PROFILES_DIR, SNAKEFILE

    profile = tmp_path / "x"
    profile.mkdir()
    sweep, report = driver.pipeline_commands("my.yaml", "mysweep", profile)
    assert sweep[:5] == [sys.executable, "-m", "snakemake", "--snakefile", str(SNAKEFILE)]
    assert sweep[-4:] == ["--workflow-profile", str(profile), "--configfile", "my.yaml"]
    assert "--cores" not in sweep  # the profile decides unless --cores is given
    assert report[5:7] == ["--report", "results/mysweep/report.html"]
    assert report[-2:] == ["--configfile", "my.yaml"]  # it takes every name after it
    with_cores = driver.pipeline_commands("my.yaml", "mysweep", cores=3, snakefile="S")[0]
    assert with_cores[3:7] == ["--snakefile", "S", "--cores", "3"]
    assert with_cores[-3] == str(PROFILES_DIR / "default")  # a shipped profile by name
    with pytest.raises(ValueError, match="no such directory, and not a shipped profile"):
        driver.pipeline_commands("my.yaml", "mysweep", tmp_path / "nosuch")
    (only,) = driver.pipeline_commands("my.yaml", "mysweep", profile, thresholds_only=True)
    assert only[5:7] == ["results/mysweep/thresholds.csv", "--workflow-profile"]  # a round's


def test_driver_script_execs_the_run_with_its_request() -> None:
    command = [sys.executable, "-m", "attnrmt.cli", "run", "/w/my sweep.yaml"]
    request = driver.DriverRequest(
        time="1-00:00:00", cpus_per_task=4, partition="long", extra=("--qos=normal",)
    )
    script = driver.driver_script(command, "mysweep", Path("/w"), Path("/w/d/driver.log"), request)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    directives = [line.removeprefix("#SBATCH ") for line in lines if line.startswith("#SBATCH")]
    assert directives == [
        "--job-name=attnrmt-mysweep",
        "--chdir=/w",
        "--output=/w/d/driver.log",
        "--open-mode=append",
        f"--signal=B:TERM@{driver.STOP_LEAD_SECONDS}",
        "--time=1-00:00:00",
        "--cpus-per-task=4",
        "--partition=long",
        "--qos=normal",
    ]
    assert lines[-1] == f"exec {shlex.join(command)}"  # the shell becomes the run
    assert driver.DriverRequest().directives() == []  # nothing set: the site decides


def test_a_signal_reaches_the_running_step_and_stops_the_rest(tmp_path: Path) -> None:
    """SIGTERM to `attnrmt run` (here: this process) is forwarded once to the running
    Snakemake step (here: a child that records it and exits 7); later steps do not run."""
    ready, got, later = tmp_path / "ready", tmp_path / "got", tmp_path / "later"
    first = [sys.executable, "-c", CHILD, str(ready), str(got), "7"]
    second = [sys.executable, "-c", f"open({str(later)!r}, 'w')"]

    def signal_when_ready() -> None:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=signal_when_ready, daemon=True).start()
    before = signal.getsignal(signal.SIGTERM)
    assert driver.run_steps([first, second], {}) == 7
    assert got.read_text() == str(int(signal.SIGTERM))
    assert not later.exists()
    assert signal.getsignal(signal.SIGTERM) is before  # the handlers are restored


def test_a_closed_terminal_stops_the_running_step_as_sigterm(tmp_path: Path) -> None:
    """SIGHUP (the terminal of `make run` closed) reaches the step as SIGTERM: a clean
    stop, not Snakemake's default death on SIGHUP."""
    ready, got = tmp_path / "ready", tmp_path / "got"

    def hang_up_when_ready() -> None:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGHUP)

    threading.Thread(target=hang_up_when_ready, daemon=True).start()
    code = driver.run_steps([[sys.executable, "-c", CHILD, str(ready), str(got), "0"]], {})
    assert got.read_text() == str(int(signal.SIGTERM))
    assert code == 128 + signal.SIGHUP  # the step exited 0, but the run was stopped


def test_steps_run_in_order_and_the_first_failure_ends_them(tmp_path: Path) -> None:
    marker = tmp_path / "env"
    record = [
        sys.executable,
        "-c",
        f"import os; open({str(marker)!r}, 'a').write(os.environ.get('X', '-'))",
    ]
    assert driver.run_steps([record, record], {"X": "1"}) == 0
    assert marker.read_text() == "1-"  # the sweep step's environment only
    failing = [sys.executable, "-c", "raise SystemExit(3)"]
    assert driver.run_steps([failing, record], {}) == 3
    assert marker.read_text() == "1-"


def test_driver_record_is_read_back_or_none(tmp_path: Path) -> None:
    run_dir = tmp_path / "results" / "r"
    assert driver.read_driver_record(run_dir) is None
    assert driver.driver_status_line(run_dir) is None
    paths = driver.driver_paths(run_dir)
    paths.directory.mkdir(parents=True)
    paths.record.write_text("{not json")
    assert driver.read_driver_record(run_dir) is None
    paths.record.write_text(json.dumps({"job_id": "42", "submitted": 0.0, "log": "l"}))
    assert driver.read_driver_record(run_dir)["job_id"] == "42"
