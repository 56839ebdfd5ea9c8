"""The one atomic-write helper (``attnrmt.sweep.store.atomic``): a reader sees the old
content or the new, a failed write leaves nothing behind, permissions are set at creation,
and only dead writers' temporaries are swept."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnrmt.sweep.store import atomic


def temporaries(directory: Path) -> list[Path]:
    return [path for path in directory.rglob("*") if atomic.is_temporary(path)]


def test_a_write_replaces_the_target_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "record.json"  # the parent is created
    atomic.write_json_atomically(target, {"b": 2, "a": Path("x")})
    assert json.loads(target.read_text()) == {"a": "x", "b": 2}
    assert target.read_text().index('"a"') < target.read_text().index('"b"')  # sorted
    atomic.write_text_atomically(target, "new", durable=True)
    assert target.read_text() == "new"
    assert temporaries(tmp_path) == []


def test_a_failed_write_keeps_the_old_content_and_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "table.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="disk on fire"):
        with atomic.atomic_path(target) as tmp:
            tmp.write_text("half")
            assert atomic.is_temporary(tmp) and tmp.parent == tmp_path
            raise RuntimeError("disk on fire")
    assert target.read_text() == "old"
    assert temporaries(tmp_path) == []


def test_a_tree_is_published_whole_over_an_old_tree(tmp_path: Path) -> None:
    target = tmp_path / "store.zarr"
    target.mkdir()
    (target / "stale").write_text("1")
    with atomic.atomic_path(target, replace_tree=True) as tmp:
        (tmp / "chunks").mkdir(parents=True)
        (tmp / "chunks" / "0").write_bytes(b"\x00" * 8)
        assert not (target / "chunks").exists()  # nothing visible before the rename
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*")) == [
        "chunks",
        "chunks/0",
    ]
    assert temporaries(tmp_path) == []


def test_the_mode_is_set_at_creation(tmp_path: Path) -> None:
    old_umask = os.umask(0)  # the mode must not depend on a permissive umask
    try:
        path = atomic.write_bytes_atomically(tmp_path / "key.pem", b"secret", mode=0o600)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == b"secret"


def test_temporary_names_are_unique_and_recognised(tmp_path: Path) -> None:
    target = tmp_path / "a.npz"
    names = {atomic.temporary_sibling(target) for _ in range(100)}
    assert len(names) == 100
    assert all(atomic.is_temporary(name) and str(os.getpid()) in name.name for name in names)
    assert not atomic.is_temporary(target)
    assert not atomic.is_temporary(tmp_path / ".hidden")  # a dot name that is no temporary


def dead_pid() -> int:
    """The pid of a process that has exited (reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_only_the_temporaries_of_dead_writers_are_removed(tmp_path: Path) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = tmp_path / "sweep" / f".a.npz.{dead_pid()}.0123abcd.tmp"
        dead_tree = tmp_path / f".cells.zarr.{dead_pid()}.4567abcd.tmp"
        alive = tmp_path / f".b.npz.{live.pid}.89abcdef.tmp"
        dead.parent.mkdir()
        dead.write_text("x")
        (dead_tree / "c").mkdir(parents=True)
        alive.write_text("x")
        fresh = tmp_path / f".c.npz.{dead_pid()}.fedcba98.tmp"
        fresh.write_text("x")
        old = time.time() - 3600
        for path in (dead, dead_tree, alive):
            os.utime(path, (old, old))
        kept = tmp_path / "result.npz"
        kept.write_text("x")

        removed = atomic.remove_stale_temporaries(tmp_path, older_than_seconds=60)

        assert removed == 2
        assert not dead.exists() and not dead_tree.exists()
        assert alive.exists(), "a live writer's temporary was removed"
        assert fresh.exists(), "a temporary younger than the limit was removed"
        assert kept.exists()
        assert atomic.remove_stale_temporaries(tmp_path / "absent") == 0
    finally:
        live.kill()
        live.wait()


def test_a_non_recursive_sweep_leaves_subdirectories_alone(tmp_path: Path) -> None:
    nested = tmp_path / "sub" / f".a.npz.{dead_pid()}.0123abcd.tmp"
    nested.parent.mkdir()
    nested.write_text("x")
    top = tmp_path / f".b.npz.{dead_pid()}.0123abcd.tmp"
    top.write_text("x")
    assert atomic.remove_stale_temporaries(tmp_path, recursive=False) == 1
    assert nested.exists() and not top.exists()
