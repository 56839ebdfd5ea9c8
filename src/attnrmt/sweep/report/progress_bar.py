"""The live progress of a run: one bar on a terminal, a line every so often elsewhere.

``attnrmt run`` (:mod:`attnrmt.driver`), :func:`attnrmt.run` and ``attnrmt status --watch``
show a run's progress through one :class:`ProgressTicker`: a thread that reads
:func:`attnrmt.sweep.report.status.run_status` (read-only, the files under
``results/<run>``) and redraws a display. What is shown, for the whole run
(:attr:`RunStatus.total <attnrmt.sweep.report.status.RunStatus>`)::

    tiny [##########----------] 4/8 cells 50% | 2.1 cells/s | ETA 3 s | 0 failed | step 3/11 theory

cells done / planned, the measured throughput, the ETA from the measured cost
(:func:`attnrmt.sweep.report.status.eta_seconds`), the failed cells so far and, when the
caller knows it, the Snakemake step (``N of M steps``, the rule last started).

Displays (:func:`choose_display`):

- :class:`TerminalBar`: a terminal (``isatty``, ``TERM`` not ``dumb``): one line redrawn
  in place (carriage return, erase to end of line) every :data:`BAR_INTERVAL_SECONDS`;
  messages (errors, warnings) are printed above it.
- :class:`NotebookBar`: inside a Jupyter kernel: an HTML ``<progress>`` element updated in
  place through IPython's display ids (no widget extension needed).
- :class:`PeriodicLines`: anything else (CI logs, SLURM job output): a plain
  ``attnrmt: progress ...`` line every :data:`LINE_INTERVAL_SECONDS`, and the final one.

A bar of our own (a few dozen lines) instead of tqdm or rich: the numbers come from
``run_status`` polled at our own pace (tqdm counts increments), no dependency, and the same
text serves terminal, notebook and plain lines.

Cost: each refresh is one ``run_status`` call, O(fragments + planned cells); the ticker
waits at least that call's CPU time over
:data:`~attnrmt.sweep.report.status.PROGRESS_CPU_SHARE` between two calls
(:func:`~attnrmt.sweep.report.status.next_progress_wait`), so a 10^6-cell run is polled
every few minutes and a small one every second.
"""

from __future__ import annotations

import html
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

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


# --------------------------------------------------------------------------- text


def bar_text(status: RunStatus, stage: str | None = None, width: int | None = None) -> str:
    """One line: run, bar, done/planned cells, percent, rate, ETA, failed, stage.

    Cut to ``width`` characters when given (a terminal's width). O(1).
    """
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


# --------------------------------------------------------------------------- displays


class ProgressDisplay(Protocol):
    """Where a ticker draws: the live progress, messages between, the final state."""

    def show(self, status: RunStatus, stage: str | None) -> None:
        """Draw the current progress (a display may skip a draw)."""

    def message(self, line: str) -> None:
        """Print a line (an error, a warning) without losing the progress."""

    def finish(self, status: RunStatus | None, stage: str | None) -> None:
        """Draw the final state and leave the display."""


class TerminalBar:
    """One line redrawn in place on a terminal stream (module docstring)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._drawn = ""

    def _width(self) -> int:
        return max(shutil.get_terminal_size((100, 24)).columns - 1, 20)

    def show(self, status: RunStatus, stage: str | None) -> None:
        self._drawn = bar_text(status, stage, self._width())
        self.stream.write(f"\r{self._drawn}\033[K")
        self.stream.flush()

    def message(self, line: str) -> None:
        self.stream.write(f"\r\033[K{line}\n")
        if self._drawn:
            self.stream.write(self._drawn)
        self.stream.flush()

    def finish(self, status: RunStatus | None, stage: str | None) -> None:
        if status is not None:
            self._drawn = bar_text(status, stage, self._width())
        if self._drawn:
            self.stream.write(f"\r{self._drawn}\033[K\n")
            self.stream.flush()
        self._drawn = ""


class PeriodicLines:
    """A plain progress line every ``interval_seconds`` (module docstring)."""

    def __init__(
        self,
        stream: Any,
        interval_seconds: float = LINE_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.interval_seconds = interval_seconds
        self._clock = clock
        self._last: float | None = None

    def show(self, status: RunStatus, stage: str | None) -> None:
        now = self._clock()
        if self._last is not None and now - self._last < self.interval_seconds:
            return
        self._last = now
        self.message(plain_text(status, stage))

    def message(self, line: str) -> None:
        self.stream.write(f"{line}\n")
        self.stream.flush()

    def finish(self, status: RunStatus | None, stage: str | None) -> None:
        if status is not None:
            self.message(plain_text(status, stage))


class NotebookBar:
    """An HTML ``<progress>`` bar updated in place in a Jupyter output cell.

    ``display`` is :func:`IPython.display.display` (any callable with its
    ``display_id=True`` contract: returns a handle with ``update``); messages go to
    ``stream`` (the kernel's ``sys.stderr``, shown in the cell).
    """

    def __init__(
        self, display: Callable[..., Any], html_type: Callable[[str], Any], stream: Any
    ) -> None:
        self._display = display
        self._html = html_type
        self.stream = stream
        self._handle: Any = None

    @staticmethod
    def markup(status: RunStatus, stage: str | None) -> str:
        """``<progress>`` of the done cells and the bar's text (escaped). O(1)."""
        total = status.total
        text = html.escape(bar_text(status, stage).split("] ", 1)[-1])
        return (
            f"<div><code>{html.escape(status.run)}</code> "
            f"<progress value='{total.done}' max='{max(total.cells, 1)}' "
            f"style='width: 16em'></progress> <code>{text}</code></div>"
        )

    def show(self, status: RunStatus, stage: str | None) -> None:
        content = self._html(self.markup(status, stage))
        if self._handle is None:
            self._handle = self._display(content, display_id=True)
        else:
            self._handle.update(content)

    def message(self, line: str) -> None:
        self.stream.write(f"{line}\n")
        self.stream.flush()

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


def choose_display(stream: Any = None) -> ProgressDisplay:
    """:class:`NotebookBar` in a Jupyter kernel, :class:`TerminalBar` on a terminal,
    else :class:`PeriodicLines`; ``stream`` defaults to ``sys.stderr``."""
    stream = sys.stderr if stream is None else stream
    if in_notebook():
        from IPython.display import HTML, display

        return NotebookBar(display, HTML, stream)
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty() and os.environ.get("TERM") != "dumb":
        return TerminalBar(stream)
    return PeriodicLines(stream)


# --------------------------------------------------------------------------- ticker


class ProgressTicker:
    """A thread redrawing ``display`` from ``run_status(run_plan, run_dir)``.

    ``stage`` (set by the caller at any time) is shown after the numbers. :meth:`message`
    prints a line through the display (safe from any thread); :meth:`stop` ends the
    thread and draws the final state. A failing status read skips a refresh; it never
    ends the ticker.
    """

    def __init__(
        self,
        run_plan: Any,
        run_dir: str | os.PathLike[str],
        display: ProgressDisplay,
        interval_seconds: float = BAR_INTERVAL_SECONDS,
        status: Callable[[Any, Path], RunStatus] = run_status,
    ) -> None:
        self.run_plan = run_plan
        self.run_dir = Path(run_dir)
        self.display = display
        self.interval_seconds = interval_seconds
        self.stage: str | None = None
        self.last_status: RunStatus | None = None
        self._status = status
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="attnrmt-progress", daemon=True)

    def start(self) -> ProgressTicker:
        """Start the thread (one refresh at once); return self."""
        self._thread.start()
        return self

    def refresh(self) -> RunStatus | None:
        """Read the status and draw it; the status (None when it could not be read)."""
        try:
            status = self._status(self.run_plan, self.run_dir)
        except Exception:  # a progress display must never fail the run
            return None
        with self._lock:
            self.last_status = status
            self.display.show(status, self.stage)
        return status

    def message(self, line: str) -> None:
        """Print ``line`` through the display (above a terminal bar)."""
        with self._lock:
            self.display.message(line)

    def _loop(self) -> None:
        cost = 0.0
        while not self._stopped.is_set():
            started = time.thread_time()
            self.refresh()
            cost = time.thread_time() - started
            self._stopped.wait(next_progress_wait(cost, self.interval_seconds))

    def stop(self, final: bool = True) -> RunStatus | None:
        """End the thread; with ``final``, read the status once more and draw it as the
        display's final state. The last status read."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        status = None
        if final:
            try:
                status = self._status(self.run_plan, self.run_dir)
            except Exception:
                status = self.last_status
        with self._lock:
            self.display.finish(status, self.stage)
            if status is not None:
                self.last_status = status
        return self.last_status


__all__ = [
    "BAR_INTERVAL_SECONDS",
    "BAR_WIDTH",
    "LINE_INTERVAL_SECONDS",
    "NotebookBar",
    "PeriodicLines",
    "ProgressDisplay",
    "ProgressTicker",
    "TerminalBar",
    "bar_text",
    "choose_display",
    "in_notebook",
    "plain_text",
]
