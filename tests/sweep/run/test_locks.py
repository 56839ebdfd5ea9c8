"""Liveness tokens and stale Snakemake locks (run/locks.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from attnrmt.sweep.run import locks as runlock

HOLDER = textwrap.dedent(
    """
    import sys, time
    from attnrmt.sweep.run import locks as runlock
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


WRITER = textwrap.dedent(
    """
    import sys
    from attnrmt.sweep.run import locks as runlock
    try:
        runlock.hold_writer_lock(sys.argv[1])
    except runlock.RunInProgress as busy:
        print("refused:", busy)
    else:
        print("holding")
    """
)


def _writer_child(run_dir: Path, env: dict[str, str] | None = None) -> str:
    """What a child process says when it asks for ``run_dir``'s writer lock."""
    import os

    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(run_dir)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )
    return done.stdout.strip()


def test_the_driver_holds_the_writer_lock_for_its_snakemake_children_only(
    tmp_path: Path,
) -> None:
    """``attnrmt run`` holds the lock across its steps: its own child (told through
    WRITER_ENV) goes on, any other process is refused naming the holder; after
    release_writer_lock the next run takes it."""
    run_dir = tmp_path / "results" / "r"
    runlock.hold_writer_lock(run_dir)
    try:
        assert _writer_child(run_dir, runlock.writer_env(run_dir)) == "holding"
        refused = _writer_child(run_dir)
        assert refused.startswith("refused:"), refused
        assert f"pid {__import__('os').getpid()}" in refused
        # a forged holder (not the child's parent) does not count
        assert _writer_child(run_dir, {runlock.WRITER_ENV: f"1:{run_dir.resolve()}"}) != "holding"
    finally:
        runlock.release_writer_lock(run_dir)
    assert _writer_child(run_dir) == "holding"
