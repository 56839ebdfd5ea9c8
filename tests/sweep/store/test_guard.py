"""The one guard of a run folder (store/guard.py): liveness tokens and stale Snakemake
locks, the writer lock, the run record."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from attnrmt.sweep.store import guard as runlock

HOLDER = textwrap.dedent(
    """
    import sys, time
    from attnrmt.sweep.store import guard as runlock
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
    from attnrmt.sweep.store import guard as runlock
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


def test_run_dir_belongs_to_one_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "results" / "r"
    runlock.claim_run_dir(run_dir, "a.yaml", write=False)
    assert not run_dir.exists()  # a check writes nothing
    runlock.claim_run_dir(run_dir, "a.yaml")
    assert json.loads((run_dir / runlock.RUN_RECORD).read_text()) == {
        "config_file": "a.yaml",
        "config_path": str(tmp_path / "a.yaml"),
    }
    runlock.claim_run_dir(run_dir, tmp_path / "a.yaml")  # same file, given absolute
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    runlock.claim_run_dir(run_dir, "../a.yaml", write=False)  # same file from another directory
    monkeypatch.chdir(tmp_path)
    with pytest.raises(runlock.RunDirConflict) as caught:
        runlock.claim_run_dir(run_dir, "b.yaml", write=False)
    message = str(caught.value)
    for needle in ("'a.yaml'", "'b.yaml'", runlock.RUN_RECORD, "run name", "delete"):
        assert needle in message, message
    legacy = tmp_path / "results" / "old"
    legacy.mkdir()
    runlock.claim_run_dir(legacy, "b.yaml")  # made before records existed: adopted
    assert json.loads((legacy / runlock.RUN_RECORD).read_text())["config_file"] == "b.yaml"


def test_ownership_survives_a_deleted_record_and_the_right_config_recreates_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each gathered sweep keeps a copy of the record: with ``.attnrmt-run.json`` deleted,
    another config under the same run name is still refused (naming the copy), and a run
    of the owning config writes the record again."""
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "results" / "r"
    runlock.claim_run_dir(run_dir, "a.yaml")
    (run_dir / "grid").mkdir()
    runlock.copy_run_record(run_dir / "grid")
    (run_dir / runlock.RUN_RECORD).unlink()
    with pytest.raises(runlock.RunDirConflict, match=f"grid/{runlock.RUN_RECORD}"):
        runlock.claim_run_dir(run_dir, "b.yaml")
    assert not (run_dir / runlock.RUN_RECORD).exists()
    runlock.claim_run_dir(run_dir, "a.yaml")
    assert json.loads((run_dir / runlock.RUN_RECORD).read_text())["config_file"] == "a.yaml"
