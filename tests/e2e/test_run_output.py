"""What `attnrmt run` shows: a real tiny run on a terminal, a failing run in a log, and
`attnrmt.run` from Python. Real Snakemake, Dask and Zarr, run from a directory outside the
checkout (the shipped workflow; results under ./results/).

* On a terminal (a pseudo-terminal): one bar redrawn in place, a short screen (the
  validation line, the log's path, the Dask cluster, the bar, the summary: at most
  :data:`MAX_SCREEN_LINES`), no traceback, the bar's final state ``8/8 cells 100% ...
  done``; Snakemake's job chatter is in the run's log, not on the screen.
* A run whose one cell cannot be allocated (``d = 5,000,000``: ``MemoryError`` at once,
  as tests/e2e/test_faults.py) without a terminal: plain progress lines, the error in
  full (the rule, the exception, the block's log) and the path of the run's log.
* ``attnrmt.run``: the same run from Python, with a display of our own, no signal handler
  installed while it runs, the results returned (``open_results``).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.helpers import subprocess_environment

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"  # 8 cells, 4 blocks
MAX_SCREEN_LINES = 40
"""The issue's budget for a default run's screen after the install step."""
TIMEOUT_SECONDS = 300.0
CHATTER = (
    "Finished jobid",
    "localrule simulate_block:",
    "Select jobs to execute",
    "distributed.worker",
    "steps (100%) done",
)


def run_on_terminal(argv: list[str], cwd: Path, columns: int = 160) -> tuple[int, str]:
    """Run ``argv`` with stdin, stdout and stderr on a new pseudo-terminal of ``columns``
    columns; its exit code and everything it wrote (the terminal's \\r\\n as \\n)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**subprocess_environment(), "TERM": "xterm", "COLUMNS": str(columns)}
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_SECONDS
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def the_log(run_dir: Path, screen: str) -> Path:
    """The run's log, as the screen names it (``attnrmt run: 'x' -> results/x/;
    Snakemake's output: results/x/logs/run-...log``)."""
    named = re.search(r"Snakemake's output: (results/\S+/logs/run-\d{8}T\d{6}Z\.log)", screen)
    assert named, screen
    assert [path.name for path in (run_dir / "logs").glob("run-*.log")] == [
        Path(named.group(1)).name
    ]
    return run_dir.parent.parent / named.group(1)


def test_a_tiny_run_on_a_terminal_shows_one_bar_and_a_short_screen(tmp_path: Path) -> None:
    shutil.copy(TINY, tmp_path / "tiny.yaml")
    code, screen = run_on_terminal(
        [sys.executable, "-m", "attnrmt", "run", "tiny.yaml", "--cores", "2"], tmp_path
    )
    assert code == 0, screen
    lines = screen.rstrip("\n").split("\n")
    assert len(lines) <= MAX_SCREEN_LINES, screen
    assert "Traceback" not in screen and "Exception ignored" not in screen, screen
    # what the terminal shows of each line: the text after its last carriage return
    visible = [line.split("\r")[-1].replace("\x1b[K", "") for line in lines]
    assert visible[0] == "tiny.yaml: valid (run 'tiny'; sweeps tiny; 8 cells)"
    bars = [index for index, line in enumerate(visible) if line.startswith("tiny [")]
    assert len(bars) == 1, screen  # one bar, redrawn in place
    assert re.fullmatch(
        rf"tiny \[{'#' * 20}\] 8/8 cells 100% \| .+ \| ETA 0 s \| 0 failed "
        r"\| done",
        visible[bars[0]],
    ), visible[bars[0]]
    assert lines[bars[0]].count("\r") >= 3, "the bar was not redrawn while the run lasted"
    assert visible[1].startswith(
        "attnrmt run: 'tiny' -> results/tiny/; Snakemake's output: results/tiny/logs/run-"
    )
    summary = visible[bars[0] + 1 :]
    assert summary[0] == (
        "run 'tiny' (tiny.yaml): results in results/tiny/, report results/tiny/report.html"
    )
    assert summary[1] == "cells: 8 in 1 sweeps; 8 computed by this run, 0 reused, 0 failed"
    for chatter in CHATTER:
        assert chatter not in screen, chatter
    log = the_log(tmp_path / "results" / "tiny", screen).read_text(encoding="utf-8")
    for chatter in CHATTER:  # Snakemake's job chatter went to the run's log instead
        assert chatter in log, chatter
    assert "Report created" in log

    from attnrmt import open_results

    tree = open_results(tmp_path / "results" / "tiny")
    assert tree["tiny/cells"].sizes["snr"] == 2 and tree["tiny/cells"].sizes["replicate"] == 2


POISON = {  # one cell whose 5,000,000 x 10,000,000 embedding table cannot be allocated
    "run": "fail",
    "seed": 1,
    "sweeps": {
        "poison": {
            "d": [5_000_000],
            "delta": [0.5],
            "gamma": [0.5],
            "T": [4],
            "positional": ["iid"],
            "weights": ["mean"],
            "snr": [1.0],
            "replicates": 1,
            "top_k": 2,
        }
    },
}


def test_a_failing_run_shows_the_error_in_full_and_the_log_path(tmp_path: Path) -> None:
    (tmp_path / "fail.yaml").write_text(yaml.safe_dump(POISON), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "attnrmt", "run", "fail.yaml", "--cores", "2", "--force"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        env=subprocess_environment(),
        check=False,
    )
    screen = done.stdout + done.stderr
    assert done.returncode == 1, screen
    assert "\r" not in screen  # no terminal: plain lines
    assert "attnrmt: progress fail: 0/1 cells (0.0%)" in screen
    assert "Error in rule simulate_block:" in screen
    assert "MemoryError" in screen  # the cell's error, from the block's log
    assert "Logfile results/fail/logs/simulate_block/poison/" in screen
    assert "WorkflowError:" in screen and "Traceback" not in screen
    log_path = the_log(tmp_path / "results" / "fail", screen)
    assert (
        f"attnrmt run: 'fail' failed (exit 1); the errors are above, every line "
        f"Snakemake printed is in {log_path.relative_to(tmp_path)}"
    ) in screen
    log = log_path.read_text(encoding="utf-8")
    assert "Error in rule simulate_block:" in log and "localrule simulate_block:" in log
    for chatter in ("Select jobs to execute", "localrule simulate_block:"):
        assert chatter not in screen, chatter


def test_attnrmt_run_from_python_returns_the_results_and_leaves_signals_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import attnrmt
    from attnrmt.sweep.report.status import RunStatus

    shutil.copy(TINY, tmp_path / "tiny.yaml")
    monkeypatch.chdir(tmp_path)
    handlers = {
        signum: signal.getsignal(signum)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    seen: dict[str, list] = {"shown": [], "finished": [], "handlers": []}

    class Recorder:  # a display: show, message, finish (progress_bar.LiveProgress)
        def show(self, status: RunStatus, stage: str | None) -> None:
            seen["shown"].append((status.total.done, stage))
            seen["handlers"].append({s: signal.getsignal(s) for s in handlers})

        def message(self, line: str) -> None:
            print(line, file=sys.stderr)

        def finish(self, status: RunStatus | None, stage: str | None) -> None:
            seen["finished"].append((status and status.total.done, stage))

    tree = attnrmt.run("tiny.yaml", cores=2, display=Recorder())
    assert tree["tiny/cells"].sizes["snr"] == 2
    assert seen["finished"] == [(8, "done")]
    assert len(seen["shown"]) >= 3 and seen["shown"][0][0] < 8
    assert all(during == handlers for during in seen["handlers"])  # none installed
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    out = capsys.readouterr()
    assert "run 'tiny' (tiny.yaml): results in results/tiny/" in out.out
    assert "attnrmt run: 'tiny' -> results/tiny/; Snakemake's output: results/tiny/logs/run-" in (
        out.err
    )


def test_an_interrupted_run_says_what_is_kept_and_how_to_resume(tmp_path: Path) -> None:
    """SIGINT (Ctrl-C) to `attnrmt run` once a block finished: the run stops, and the
    driver's own lines name the run folder, the resume and the log (never "None")."""
    config = yaml.safe_load(TINY.read_text())
    config["run"] = "stopped"
    config["sweeps"]["tiny"].update(d=[1200], snr=[0.25 * index for index in range(12)])
    config["execution"] = {"block_size": 1}  # 48 cells of ~0.4 s: the run outlasts the signal
    (tmp_path / "stopped.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "attnrmt", "run", "stopped.yaml", "--cores", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=subprocess_environment(),
    )
    try:
        fragments = tmp_path / "results" / "stopped" / "tiny" / "fragments"
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while not (fragments.is_dir() and any(fragments.glob("*.npz"))):
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "no block finished"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        screen = process.communicate(timeout=TIMEOUT_SECONDS)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode != 0, screen
    ours = [line for line in screen.splitlines() if line.startswith("attnrmt run:")]
    assert ours and not any("None" in line for line in ours), ours
    assert (
        "attnrmt run: 'stopped' stopped (exit " in ours[-1]
        and "finished cells are kept in results/stopped/, the same command resumes; "
        "log results/stopped/logs/run-"
        in ours[-1]
    ), ours
