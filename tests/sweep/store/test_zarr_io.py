"""Zarr's clean exit (attnrmt.sweep.store.zarr_io): its I/O thread stopped before the
process exits, without a traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ZARR_EXIT = textwrap.dedent("""
    import asyncio, sys, time
    import zarr
    from zarr.core.sync import loop
    from attnrmt.sweep.store.zarr_io import stop_zarr_io

    zarr.open_group(sys.argv[1], mode="w").create_array("a", shape=(2,), dtype="f8")

    async def busy():
        time.sleep(1.0)  # Zarr's I/O thread is still busy as the process exits

    asyncio.run_coroutine_threadsafe(busy(), loop[0])
    time.sleep(0.05)
    if sys.argv[2] == "stop":
        print(stop_zarr_io())
""")


@pytest.mark.parametrize("how", ["plain", "stop"])
def test_zarr_io_is_stopped_before_exit_without_a_traceback(tmp_path: Path, how: str) -> None:
    """Zarr's own exit handler waits 0.2 s for its I/O thread and then closes a running
    loop ("Exception ignored in atexit callback ... Cannot close a running event loop",
    what `snakemake stores` printed); stop_zarr_io (the Snakefile's onsuccess) waits."""
    done = subprocess.run(
        [sys.executable, "-c", ZARR_EXIT, str(tmp_path / "g"), how],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    broken = "RuntimeError: Cannot close a running event loop" in done.stderr
    assert broken == (how == "plain"), done.stderr
    if how == "stop":
        assert done.stdout.strip() == "True"
        assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
