"""The progress bar of a run (attnrmt.sweep.report.progress_bar): bar text, the display's
three modes (terminal, plain lines, notebook), the ticker."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from attnrmt.sweep.report import progress_bar as progress
from attnrmt.sweep.report.status import RunStatus, SweepStatus


def status_of(
    done: int, cells: int, failed: int = 0, rate: float | None = None, eta: float | None = None
) -> RunStatus:
    row = SweepStatus(
        sweep="total",
        cells=cells,
        done=done,
        failed=failed,
        pending=cells - done - failed,
        running=None,
        queued=None,
        missing=None,
        cells_per_second=rate,
        remaining_core_seconds=0.0,
        eta_seconds=eta,
        last_fragment_age_seconds=None,
    )
    return RunStatus("tiny", 0.0, [row], row, 1e-9, True, True)


def test_bar_text_shows_cells_rate_eta_failures_and_stage() -> None:
    text = progress.bar_text(status_of(4, 8, failed=1, rate=2.13, eta=3.0), "step 3/11 theory")
    assert text == (
        "tiny [##########----------] 4/8 cells 50% | 2.13 cells/s | ETA 3 s | "
        "1 failed | step 3/11 theory"
    )
    unknown = progress.bar_text(status_of(0, 8))
    assert unknown == "tiny [--------------------] 0/8 cells 0% | rate - | ETA - | 0 failed"
    assert progress.bar_text(status_of(8, 8, eta=0.0), "done").startswith(
        f"tiny [{'#' * 20}] 8/8 cells 100%"
    )
    cut = progress.bar_text(status_of(4, 8), "x" * 200, width=60)
    assert len(cut) == 60 and cut.endswith("…")


def test_terminal_bar_redraws_in_place_and_prints_messages_above() -> None:
    stream = io.StringIO()
    bar = progress.LiveProgress(stream, mode="bar")
    bar.show(status_of(2, 8), None)
    bar.message("attnrmt: something")
    bar.finish(status_of(8, 8), "done")
    text = stream.getvalue()
    assert text.count("\n") == 2  # the message and the final bar: no line per redraw
    assert "\r\033[Kattnrmt: something\n" in text
    assert text.endswith("8/8 cells 100% | rate - | ETA - | 0 failed | done\033[K\n")


def test_without_a_terminal_a_plain_line_every_interval() -> None:
    now = [0.0]
    stream = io.StringIO()
    lines = progress.LiveProgress(stream, "lines", interval_seconds=30.0, clock=lambda: now[0])
    for second in range(0, 61, 5):
        now[0] = float(second)
        lines.show(status_of(second // 10, 8), None)
    lines.finish(status_of(8, 8, eta=0.0), "done")
    printed = stream.getvalue().splitlines()
    assert [line.split(": ", 2)[2].split(" ")[0] for line in printed] == [
        "0/8",
        "3/8",
        "6/8",
        "8/8",
    ]  # at 0, 30, 60 s, then the final state
    assert printed[-1].endswith("8/8 cells (100.0%), rate not yet measured, ETA 0 s; done")
    assert "\r" not in stream.getvalue()


def test_the_notebook_bar_is_one_display_updated_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Handle:
        def __init__(self) -> None:
            self.updates: list[str] = []

        def update(self, content: str) -> None:
            self.updates.append(content)

    handles: list[Handle] = []

    def display(content: str, display_id: bool) -> Handle:
        assert display_id is True
        handles.append(Handle())
        handles[-1].updates.append(content)
        return handles[-1]

    stream = io.StringIO()
    monkeypatch.setitem(sys.modules, "IPython.display", SimpleNamespace(HTML=str, display=display))
    bar = progress.LiveProgress(stream, mode="html")
    bar.show(status_of(2, 8), "step 1/5 theory")
    bar.message("Error in rule x:")
    bar.finish(status_of(8, 8), "done")
    assert len(handles) == 1 and len(handles[0].updates) == 2
    assert "<progress value='2' max='8'" in handles[0].updates[0]
    assert "<progress value='8' max='8'" in handles[0].updates[1]
    assert "done" in handles[0].updates[1] and "&lt;" not in handles[0].updates[1]
    assert stream.getvalue() == "Error in rule x:\n"
    assert not progress.in_notebook()  # pytest is no Jupyter kernel


def test_choose_display_follows_the_stream() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress.LiveProgress(Tty()).mode == "bar"
    assert progress.LiveProgress(io.StringIO()).mode == "lines"


def test_the_ticker_draws_until_stopped_and_survives_a_failing_read(tmp_path: Path) -> None:
    calls = []

    def status(plan: object, run_dir: Path) -> RunStatus:
        calls.append(run_dir)
        if len(calls) == 2:
            raise OSError("a fragment vanished mid-read")
        return status_of(min(len(calls), 8), 8)

    stream = io.StringIO()
    ticker = progress.ProgressTicker(
        None, tmp_path, progress.LiveProgress(stream, "bar"), interval_seconds=0.01, status=status
    ).start()
    while len(calls) < 4:
        time.sleep(0.001)
    ticker.stage = "done"
    final = ticker.stop()
    assert final is not None and final.total.done == min(len(calls), 8)
    assert stream.getvalue().endswith("| done\033[K\n")
