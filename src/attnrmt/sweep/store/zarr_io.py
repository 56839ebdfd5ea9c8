"""A clean end for Zarr's I/O thread: Zarr's ``atexit`` handler waits only 0.2 s for its
event-loop thread, and a busy process then prints "Cannot close a running event loop"
after a successful run. :func:`stop_zarr_io` (the Snakefile's ``onsuccess``/``onerror``)
waits for the thread before closing the loop. O(1) plus the wait."""

from __future__ import annotations

import sys

_STOP_TIMEOUT_SECONDS = 30.0
"""How long :func:`stop_zarr_io` waits for Zarr's I/O thread to stop."""


def stop_zarr_io(timeout_seconds: float = _STOP_TIMEOUT_SECONDS) -> bool:
    """Stop and close Zarr's event loop if this process started one; whether it did (False
    when the thread outlives ``timeout_seconds``: left to Zarr's handler)."""
    sync = sys.modules.get("zarr.core.sync")
    if sync is None or getattr(sync, "loop", [None])[0] is None:
        return False
    with sync._get_lock():
        loop, thread = sync.loop[0], sync.iothread[0]
        if loop is None:
            return False
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout_seconds)
            if thread.is_alive():
                return False
        loop.close()
        sync.loop[0] = None
        sync.iothread[0] = None
    return True
