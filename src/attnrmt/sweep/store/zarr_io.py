"""A clean end for Zarr's I/O thread, so that a successful run ends without a traceback.

Zarr 3 runs its asynchronous I/O on an event loop in one background thread
(``zarr.core.sync``) and closes it at exit (``atexit``): it asks the loop to stop, waits
**0.2 s** for the thread, then closes the loop. On a busy machine (the Snakemake process
that also hosts the run's Dask scheduler, at the end of a run) the thread can take longer
to stop, and Python then prints ``Exception ignored in atexit callback ... RuntimeError:
Cannot close a running event loop`` after an otherwise successful command.
:func:`stop_zarr_io` does the same stop but waits for the thread (up to
``timeout_seconds``) before closing the loop; the Snakefile's ``onsuccess``/``onerror``
call it, and Zarr's own handler then finds nothing to close.

Cost: O(1), plus the wait for the thread (normally milliseconds).
"""

from __future__ import annotations

import sys

STOP_TIMEOUT_SECONDS = 30.0
"""How long :func:`stop_zarr_io` waits for Zarr's I/O thread to stop."""


def stop_zarr_io(timeout_seconds: float = STOP_TIMEOUT_SECONDS) -> bool:
    """Stop and close Zarr's event loop if this process started one; whether it did.

    Nothing happens when Zarr was not imported or its loop never started; when the
    thread does not stop within ``timeout_seconds`` the loop is left to Zarr's own exit
    handler (False). Zarr starts a new loop if it is used again afterwards.
    """
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


__all__ = ["STOP_TIMEOUT_SECONDS", "stop_zarr_io"]
