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

import pytest

from attnrmt.contract import FIGURES
from tests.e2e.helpers import Workdir, tiny_config, with_sweep

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


def probe_report(browser: str, report: Path, tmp_path: Path) -> list[dict]:
    """Open ``report`` (with :data:`PROBE` appended) in headless Chromium; the probe result."""
    text = report.read_text(encoding="utf-8")
    cut = text.rfind("</body>")
    assert cut > 0, "report has no </body>"
    probed = tmp_path / "probed-report.html"
    probed.write_text(f"{text[:cut]}<script>{PROBE}</script>{text[cut:]}", encoding="utf-8")
    profile = tmp_path / "chromium-profile"
    completed = subprocess.run(
        [
            browser,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=30000",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    match = re.search(r'data-attnrmt-probe="([^"]*)"', completed.stdout)
    assert match, "the report's page did not finish rendering (no probe result in the DOM)"
    return json.loads(html.unescape(match.group(1)))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.html of a tiny run with data for every figure: thresholds, finite size, causal
    attention, a label model (downstream) and both centrings (the report leaves out
    figures of analyses without data)."""
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
        snr=[0.0, 1.0, 2.0, 3.0],
    )
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
