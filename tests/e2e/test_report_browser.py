"""The Snakemake report of a tiny run renders its figures in headless Chromium.

Runs the real pipeline (Snakemake, Dask, Zarr) on a tiny config, builds
``results/<run>/report.html`` with ``snakemake --report``, then opens a copy of the report
with a small probe script appended in headless Chromium (``--dump-dom``). The probe clicks
the report's "Figures" category and each figure's view button, and records the natural
size of every PNG the report then shows; every figure of
:data:`attnrmt.contract.FIGURES` must appear with a decoded, non-empty image.

Without a browser the test is skipped, except under ``CI=true`` where it fails (CI
installs Chromium through tests/harness/system-deps.sh).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from attnrmt.contract import FIGURES
from tests.e2e.helpers import Workdir, tiny_config, with_sweep
from tests.e2e.test_classes_pipeline import K_SWEEP

REPORT_MARKS = (pytest.mark.e2e, pytest.mark.browser, pytest.mark.slow)

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

# Appended to a copy of the report: walks Figures -> each figure's "eye" button and stores
# what it saw in <body data-attnrmt-probe="[...]"> for --dump-dom to return.
PROBE = r"""
(function () {
  var results = [];
  function byText(sel, text) {
    return Array.prototype.slice.call(document.querySelectorAll(sel))
      .find(function (e) { return e.textContent.trim() === text; });
  }
  function done() { document.body.setAttribute("data-attnrmt-probe", JSON.stringify(results)); }
  function openCategory(then) {
    var link = byText("a", "Figures");
    if (!link) { results.push({error: "no Figures category"}); return done(); }
    link.click();
    setTimeout(then, 400);
  }
  function visit(i) {
    openCategory(function () {
      var eyes = document.querySelectorAll('a[iconname="eye"]');
      if (i >= eyes.length) { return done(); }
      var row = eyes[i].closest("tr");
      var label = row ? row.querySelector("td").textContent.trim() : "?";
      eyes[i].click();
      setTimeout(function () {
        var imgs = Array.prototype.slice.call(document.querySelectorAll("img"))
          .filter(function (im) { return im.src.indexOf("data:image/png") === 0; });
        results.push({label: label, images: imgs.map(function (im) {
          return [im.naturalWidth, im.naturalHeight];
        })});
        visit(i + 1);
      }, 600);
    });
  }
  window.addEventListener("load", function () { setTimeout(function () { visit(0); }, 300); });
})();
"""


def report_test(func: Callable[..., None]) -> Callable[..., None]:
    """Mark a test that needs the tiny run's report (e2e, browser, slow)."""
    for mark in REPORT_MARKS:
        func = mark(func)
    return func


def find_chromium() -> str | None:
    """Path of a Chromium binary, or None."""
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_chromium() -> str:
    browser = find_chromium()
    if browser is None:
        if os.environ.get("CI", "").lower() == "true":  # as the SLURM and fault gates
            pytest.fail("CI=true but no Chromium: tests/harness/system-deps.sh must install it")
        pytest.skip("headless Chromium not installed (apt-get install chromium)")
    return browser


def run_probe(
    browser: str,
    report: Path,
    probe: str,
    page: Path,
    flags: tuple[str, ...],
    what: str,
) -> Any:
    """Open a copy of ``report`` (at ``page``) with the script ``probe`` appended in headless
    Chromium (``flags`` added) and return what the script stored in
    ``<body data-attnrmt-probe>``; ``what`` names the page in the failure message."""
    text = report.read_text(encoding="utf-8")
    cut = text.rfind("</body>")
    assert cut > 0, "report has no </body>"
    page.write_text(f"{text[:cut]}<script>{probe}</script>{text[cut:]}", encoding="utf-8")
    completed = subprocess.run(
        [browser, *CHROMIUM_FLAGS, *flags, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    match = re.search(r'data-attnrmt-probe="([^"]*)"', completed.stdout)
    assert match, f"the {what} did not finish rendering (no probe result in the DOM)"
    return json.loads(html.unescape(match.group(1)))


def probe_report(browser: str, report: Path, tmp_path: Path) -> list[dict]:
    """Open ``report`` (with :data:`PROBE` appended) in headless Chromium; the probe result."""
    flags = (f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=30000")
    result: list[dict] = run_probe(
        browser, report, PROBE, tmp_path / "probed-report.html", flags, "report's page"
    )
    return result


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.html of a tiny run with data for every figure: thresholds, finite size, causal
    attention, a label model (downstream), both centrings and two table laws (the report
    leaves out figures of analyses without data)."""
    config = tiny_config(
        run="report",
        positional_models={
            "prefix2": {"kind": "prefix", "L": 2},
            "lab": {"kind": "label", "rho0": 0.8, "L": 2},
        },
        weight_models={
            "causal1": {"kind": "causal_limit", "tau": 1.0},
            "att1": {"kind": "causal_attention", "tau": 1.0},
        },
    )
    config = with_sweep(
        config,
        "grid",
        d=[20, 30],
        weights=["mean", "causal1", "att1"],
        positional=["prefix2", "lab"],
        centered=[True, False],
        snr=[0.0, 1.0, 2.0, 3.0, 4.0],  # 5 points: the phase diagram (PHASE_MIN_SNR) is drawn
    )
    # a second table law on a smaller copy of the grid: the universality figure has data
    config["sweeps"]["signs"] = {
        **config["sweeps"]["grid"], "weights": ["mean"], "positional": ["prefix2"],
        "centered": [True], "table": "rademacher",
    }  # fmt: skip
    config["sweeps"]["gaussian"] = {**config["sweeps"]["signs"], "table": "gaussian"}
    # a K = 3 sweep (tests/e2e/test_classes_pipeline.py): the K-class figure has data
    config["label_models"] = {"pre2": {"kind": "prefix", "L": 2}}
    config["sweeps"]["k3"] = K_SWEEP
    workdir = Workdir.create(tmp_path_factory.mktemp("report-run"), config)
    try:
        workdir.run(targets=())
        path = workdir.run_dir / "report.html"
        workdir.run("--report", str(path), targets=())
    finally:
        workdir.close()
    return path


@report_test
def test_report_is_a_self_contained_html(report: Path) -> None:
    assert report.suffix == ".html"
    head = report.read_bytes()[:512].lstrip().lower()
    assert head.startswith(b"<!doctype html") or head.startswith(b"<html")
    text = report.read_text(encoding="utf-8")
    for name in FIGURES:
        assert f"{name}.png" in text
    assert "failed_cells.csv" in text  # the table of failed cells (empty here)


@report_test
def test_report_renders_every_figure_in_chromium(report: Path, tmp_path: Path) -> None:
    browser = require_chromium()
    seen = probe_report(browser, report, tmp_path)
    assert not any("error" in entry for entry in seen), seen
    labels = {entry["label"]: entry["images"] for entry in seen}
    assert set(FIGURES) <= set(labels), labels
    for name in FIGURES:
        sizes = labels[name]
        assert sizes, f"{name}: no PNG shown"
        assert all(width > 100 and height > 100 for width, height in sizes), (name, sizes)


def test_missing_browser_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    module = sys.modules[__name__]
    monkeypatch.setattr(module, "find_chromium", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="Chromium not installed"):
        require_chromium()
    for value in ("true", "True", "TRUE"):  # CI services spell it either way
        monkeypatch.setenv("CI", value)
        try:
            with pytest.raises(pytest.fail.Exception, match="CI=true"):
                require_chromium()
        except pytest.skip.Exception:  # a skip here would hide the missing browser
            pytest.fail(f"CI={value}: require_chromium skipped instead of failing")


# --------------------------------------------------------------------------- landing page
# Snakemake's content pane centres its child vertically (profiles/default/report.css says
# where): a landing page shorter than the window opened on a blank band, a taller one had
# its top above the pane, out of scroll reach. The probe records where the overview's first
# line sits relative to the pane, and the pane's scroll position.
LANDING_PROBE = r"""
(function () {
  function done(result) {
    document.body.setAttribute("data-attnrmt-probe", JSON.stringify(result));
  }
  window.addEventListener("load", function () { setTimeout(function () {
    var brand = document.getElementById("brand");
    if (!brand) { return done({error: "no landing page (#brand)"}); }
    var pane = brand.closest(".h-screen");
    var first = Array.prototype.slice.call(document.querySelectorAll("strong"))
      .find(function (e) { return e.textContent.indexOf("attnrmt run ") === 0; });
    if (!pane || !first) { return done({error: "no content pane or overview text"}); }
    done({
      gap: first.getBoundingClientRect().top - pane.getBoundingClientRect().top,
      scrollTop: pane.scrollTop,
      paneHeight: pane.clientHeight,
      contentHeight: pane.scrollHeight,
      text: pane.textContent,
    });
  }, 500); });
})();
"""


def probe_landing(browser: str, report: Path, tmp_path: Path, height: int) -> dict:
    """Open ``report`` with :data:`LANDING_PROBE` in a 1280 x ``height`` window."""
    flags = (
        f"--user-data-dir={tmp_path / f'chromium-{height}'}",
        f"--window-size=1280,{height}",
        "--virtual-time-budget=20000",
    )
    result: dict = run_probe(
        browser, report, LANDING_PROBE, tmp_path / f"landing-{height}.html", flags, "landing page"
    )
    return result


@report_test
def test_landing_page_starts_at_the_top_in_a_tall_and_a_short_window(
    report: Path, tmp_path: Path
) -> None:
    """The overview's first line sits at the top of the pane (its padding, < 40 px) in a
    window taller than the overview (no blank band) and in one shorter (nothing above the
    pane's scroll origin); the overview says at which d its thresholds are."""
    browser = require_chromium()
    tall, short = (probe_landing(browser, report, tmp_path, h) for h in (3000, 500))
    for seen in (tall, short):
        assert "error" not in seen, seen
        assert 0 <= seen["gap"] < 40 and seen["scrollTop"] == 0, seen
    assert tall["contentHeight"] <= tall["paneHeight"]  # the band case is exercised
    assert short["contentHeight"] > short["paneHeight"]  # and the clipped one
    assert "at the largest d where it is an estimate rather than a bound" in " ".join(
        tall["text"].split()
    )
