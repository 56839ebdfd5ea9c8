"""The live progress of a run (docs/cluster.md, "Long sweeps"):
:class:`ProgressTicker` polls :func:`attnrmt.sweep.report.status.run_status` and draws it
on a terminal (:class:`TerminalBar`), in Jupyter (:class:`NotebookBar`) or as plain lines
(:class:`PeriodicLines`). One ``run_status`` per refresh, at most
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
    RunStatus,
    format_duration,
    next_progress_wait,
    progress_line,
    rate_text,
    run_status,
)

BAR_INTERVAL_SECONDS = 1.0
"""A terminal or notebook bar is redrawn this often (at most)."""
LINE_INTERVAL_SECONDS = 30.0
"""Without a terminal, a progress line is printed this often (at most)."""
BAR_WIDTH = 20
"""Characters of the bar itself (``[####----]``)."""


def bar_text(status: RunStatus, stage: str | None = None, width: int | None = None) -> str:
    """One line: run, bar, done/planned cells, percent, rate, ETA, failed, stage; cut to
    ``width`` when given. O(1)."""
    total = status.total
    filled = round(BAR_WIDTH * total.done / total.cells) if total.cells else BAR_WIDTH
    rate = total.cells_per_second
    parts = [
        f"{status.run} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] "
        f"{total.done:,}/{total.cells:,} cells {total.percent_done:.0f}%",
        "rate -" if rate is None else rate_text(rate),
        f"ETA {format_duration(total.eta_seconds) if total.eta_seconds is not None else '-'}",
        f"{total.failed:,} failed",
    ]
    if stage:
        parts.append(stage)
    text = " | ".join(parts)
    return text if width is None or len(text) <= width else text[: max(width - 1, 0)] + "…"


def plain_text(status: RunStatus, stage: str | None = None) -> str:
    """:func:`~attnrmt.sweep.report.status.progress_line` and the stage. O(1)."""
    line = progress_line(status)
    return f"{line}; {stage}" if stage else line


class PeriodicLines:
    """The display protocol (``show``, ``message``, ``finish``): a plain progress line every
    ``interval_seconds``, and the final state."""

    def __init__(
        self,
        stream: Any,
        interval_seconds: float = LINE_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream, self.interval_seconds, self._clock = stream, interval_seconds, clock
        self._last: float | None = None

    def show(self, status: RunStatus, stage: str | None) -> None:
        """Draw the current progress (this display skips draws within its interval)."""
        now = self._clock()
        if self._last is None or now - self._last >= self.interval_seconds:
            self._last = now
            self.message(plain_text(status, stage))

    def message(self, line: str) -> None:
        """Print a line (an error, a warning) without losing the progress."""
        self.stream.write(f"{line}\n")
        self.stream.flush()

    def finish(self, status: RunStatus | None, stage: str | None) -> None:
        """Draw the final state and leave the display."""
        if status is not None:
            self.message(plain_text(status, stage))


class TerminalBar(PeriodicLines):
    """One line redrawn in place on a terminal; messages are printed above it."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._drawn = ""

    def _draw(self, status: RunStatus | None, stage: str | None, end: str = "") -> None:
        if status is not None:
            width = max(shutil.get_terminal_size((100, 24)).columns - 1, 20)
            self._drawn = bar_text(status, stage, width)
        if self._drawn:
            self.stream.write(f"\r{self._drawn}\033[K{end}")
            self.stream.flush()

    def show(self, status: RunStatus, stage: str | None) -> None:
        self._draw(status, stage)

    def message(self, line: str) -> None:
        self.stream.write(f"\r\033[K{line}\n{self._drawn}")
        self.stream.flush()

    def finish(self, status: RunStatus | None, stage: str | None) -> None:
        self._draw(status, stage, "\n")
        self._drawn = ""


class NotebookBar(PeriodicLines):
    """An HTML ``<progress>`` updated in place in a Jupyter output cell
    (``display(content, display_id=True)``'s handle); messages go to ``stream``."""

    def __init__(
        self, display: Callable[..., Any], html_type: Callable[[str], Any], stream: Any
    ) -> None:
        super().__init__(stream)
        self._display, self._html, self._handle = display, html_type, None

    def show(self, status: RunStatus, stage: str | None) -> None:
        total = status.total
        text = html.escape(bar_text(status, stage).split("] ", 1)[-1])
        content = self._html(
            f"<div><code>{html.escape(status.run)}</code> "
            f"<progress value='{total.done}' max='{max(total.cells, 1)}' "
            f"style='width: 16em'></progress> <code>{text}</code></div>"
        )
        if self._handle is None:
            self._handle = self._display(content, display_id=True)
        else:
            self._handle.update(content)

    def finish(self, status: RunStatus | None, stage: str | None) -> None:
        if status is not None:
            self.show(status, stage)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel attached). O(1)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def choose_display(stream: Any = None) -> PeriodicLines:
    """:class:`NotebookBar` in Jupyter, :class:`TerminalBar` on a terminal, else
    :class:`PeriodicLines`; ``stream`` defaults to ``sys.stderr``."""
    stream = sys.stderr if stream is None else stream
    if in_notebook():
        from IPython.display import HTML, display

        return NotebookBar(display, HTML, stream)
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty() and os.environ.get("TERM") != "dumb":
        return TerminalBar(stream)
    return PeriodicLines(stream)


class ProgressTicker:
    """A thread redrawing ``display`` from ``status(run_plan, run_dir)`` with the current
    ``stage``; a failing status read skips a refresh."""

    def __init__(
        self,
        run_plan: Any,
        run_dir: str | os.PathLike[str],
        display: PeriodicLines,
        interval_seconds: float = BAR_INTERVAL_SECONDS,
        status: Callable[[Any, Path], RunStatus] = run_status,
    ) -> None:
        self.run_plan, self.run_dir, self.display = run_plan, Path(run_dir), display
        self.interval_seconds, self._status = interval_seconds, status
        self.stage: str | None = None
        self.last_status: RunStatus | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="attnrmt-progress", daemon=True)

    def start(self) -> ProgressTicker:
        """Start the thread; return self."""
        self._thread.start()
        return self

    def _read(self) -> RunStatus | None:
        try:
            return self._status(self.run_plan, self.run_dir)
        except Exception:  # a progress display must never fail the run
            return None

    def refresh(self) -> RunStatus | None:
        """Read the status and draw it; the status (None when it could not be read)."""
        status = self._read()
        if status is not None:
            with self._lock:
                self.last_status = status
                self.display.show(status, self.stage)
        return status

    def message(self, line: str) -> None:
        """Print ``line`` through the display (safe from any thread)."""
        with self._lock:
            self.display.message(line)

    def _loop(self) -> None:
        while not self._stopped.is_set():
            started = time.thread_time()
            self.refresh()
            cost = time.thread_time() - started
            self._stopped.wait(next_progress_wait(cost, self.interval_seconds))

    def stop(self, final: bool = True) -> RunStatus | None:
        """End the thread; with ``final``, draw a last read as the final state. The last status."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        status = self._read() if final else None
        with self._lock:
            self.display.finish(status or (self.last_status if final else None), self.stage)
            self.last_status = status or self.last_status
        return self.last_status


__all__ = [
    "BAR_INTERVAL_SECONDS",
    "BAR_WIDTH",
    "LINE_INTERVAL_SECONDS",
    "NotebookBar",
    "PeriodicLines",
    "ProgressTicker",
    "TerminalBar",
    "bar_text",
    "choose_display",
    "in_notebook",
    "plain_text",
]
