"""The live progress of a run (docs/cluster.md, "Long sweeps"; docs/python-api.md, "What it
shows"): one display, :class:`LiveProgress`, draws a
:class:`~attnrmt.sweep.report.status.RunStatus` as a bar redrawn in place on a terminal, an
HTML ``<progress>`` in Jupyter, or a plain line every ``interval_seconds`` elsewhere;
:class:`ProgressTicker` redraws any display (``show``, ``message``, ``finish``) from a
thread. A refresh costs one ``run_status``, spaced to at most
:data:`~attnrmt.sweep.report.status.PROGRESS_CPU_SHARE` of a core."""

from __future__ import annotations

import html
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnrmt.sweep.report.status import (
    PROGRESS_INTERVAL_SECONDS,
    RunStatus,
    format_duration,
    next_progress_wait,
    progress_line,
    rate_text,
    run_status,
)

_BAR_INTERVAL_SECONDS = 1.0
"""The ticker reads the status this often (at most)."""
_BAR_WIDTH = 20
"""Characters of the bar itself (``[####----]``)."""


def bar_text(status: RunStatus, stage: str | None = None, width: int | None = None) -> str:
    """One line: run, bar, done/planned cells, percent, rate, ETA, failed, stage; cut to
    ``width`` when given. O(1)."""
    total = status.total
    filled = round(_BAR_WIDTH * total.done / total.cells) if total.cells else _BAR_WIDTH
    rate, eta = total.cells_per_second, total.eta_seconds
    parts = [
        f"{status.run} [{'#' * filled}{'-' * (_BAR_WIDTH - filled)}] "
        f"{total.done:,}/{total.cells:,} cells {total.percent_done:.0f}%",
        "rate -" if rate is None else rate_text(rate),
        f"ETA {'-' if eta is None else format_duration(eta)}",
        f"{total.failed:,} failed",
        *([stage] if stage else []),
    ]
    text = " | ".join(parts)
    return text if width is None or len(text) <= width else text[: max(width - 1, 0)] + "…"


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel attached). O(1)."""
    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


class LiveProgress:
    """The display: ``mode`` ``"html"`` in Jupyter, ``"bar"`` on a terminal ``stream``,
    else ``"lines"`` (a plain :func:`~attnrmt.sweep.report.status.progress_line` at most
    every ``interval_seconds``); ``message`` prints a line without losing the progress."""

    def __init__(
        self,
        stream: Any = None,
        mode: str | None = None,
        interval_seconds: float = PROGRESS_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        tty = getattr(self.stream, "isatty", lambda: False)() and os.environ.get("TERM") != "dumb"
        self.mode = mode or ("html" if in_notebook() else "bar" if tty else "lines")
        self.interval_seconds, self._clock = interval_seconds, clock
        self._last: float | None = None
        self._drawn, self._handle = "", None

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def show(self, status: RunStatus, stage: str | None) -> None:
        """Draw the current progress (``lines`` skips draws within its interval)."""
        if self.mode == "bar":
            width = max(shutil.get_terminal_size((100, 24)).columns - 1, 20)
            self._drawn = bar_text(status, stage, width)
            self._write(f"\r{self._drawn}\033[K")
        elif self.mode == "html":
            from IPython.display import HTML, display

            text = html.escape(bar_text(status, stage).split("] ", 1)[-1])
            content = HTML(
                f"<div><code>{html.escape(status.run)}</code> <progress value="
                f"'{status.total.done}' max='{max(status.total.cells, 1)}' style='width: "
                f"16em'></progress> <code>{text}</code></div>"
            )
            if self._handle is None:
                self._handle = display(content, display_id=True)
            else:
                self._handle.update(content)
        elif self._last is None or self._clock() - self._last >= self.interval_seconds:
            self._last = self._clock()
            self._write(f"{progress_line(status)}{f'; {stage}' if stage else ''}\n")

    def message(self, line: str) -> None:
        """Print a line (an error, a warning) above the bar."""
        self._write(f"\r\033[K{line}\n{self._drawn}" if self._drawn else f"{line}\n")

    def finish(self, status: RunStatus | None, stage: str | None) -> None:
        """Draw the final state (the last one drawn when None) and leave the display."""
        self._last = None
        if status is not None:
            self.show(status, stage)
        if self._drawn:
            self._write("\n")
            self._drawn = ""


class ProgressTicker:
    """A thread redrawing ``display`` from ``status(run_plan, run_dir)`` with the current
    ``stage``; a failing status read skips a refresh; :meth:`message` is safe from any
    thread."""

    def __init__(
        self,
        run_plan: Any,
        run_dir: str | os.PathLike[str],
        display: Any,
        interval_seconds: float = _BAR_INTERVAL_SECONDS,
        status: Callable[[Any, Path], RunStatus] = run_status,
    ) -> None:
        self.read = lambda: status(run_plan, Path(run_dir))
        self.display, self.interval_seconds = display, interval_seconds
        self.stage: str | None = None
        self.last_status: RunStatus | None = None
        self._lock, self._stopped = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._loop, name="attnrmt-progress", daemon=True)

    def start(self) -> ProgressTicker:
        self._thread.start()
        return self

    def _read(self) -> RunStatus | None:
        try:
            return self.read()
        except Exception:  # a progress display must never fail the run
            return None

    def message(self, line: str) -> None:
        with self._lock:
            self.display.message(line)

    def _loop(self) -> None:
        while not self._stopped.is_set():
            started = time.thread_time()
            status = self._read()
            if status is not None:
                with self._lock:
                    self.last_status = status
                    self.display.show(status, self.stage)
            cost = time.thread_time() - started
            self._stopped.wait(next_progress_wait(cost, self.interval_seconds))

    def stop(self) -> RunStatus | None:
        """End the thread and draw a last read as the final state; that status."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock:
            self.last_status = self._read() or self.last_status
            self.display.finish(self.last_status, self.stage)
        return self.last_status
