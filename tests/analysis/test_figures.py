"""Figures: the object API (no pyplot state) and a main figure that shows every line."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np

from attnrmt.analysis.figures import figure_outlier_vs_snr, outlier_panels
from attnrmt.analysis.pipeline import analysis_dataset
from attnrmt.analysis.synthetic import make_synthetic

POSITIONAL = {"p4": {"kind": "prefix", "L": 4}, "mk": {"kind": "markov", "r": 0.5}}
WEIGHTS = {"mean": "mean", "optimal": "optimal", "harmonic": "harmonic"}


def test_importing_figures_leaves_pyplot_and_the_backend_alone() -> None:
    # rcParams._get reads the backend setting without resolving it (which imports pyplot)
    code = (
        "import sys, matplotlib; before = matplotlib.rcParams._get('backend'); "
        "import attnrmt.analysis.figures; "
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'; "
        "assert matplotlib.rcParams._get('backend') == before, 'backend switched'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_main_figure_has_a_named_panel_per_positional_and_weights_line() -> None:
    """issue 12: no line of the sweep is dropped and every title names both models."""
    cells, theory = make_synthetic(
        d=(60,), snr=(0.0, 1.0, 2.0, 3.0), positional=POSITIONAL, weights=WEIGHTS, replicates=3
    )
    analysis = analysis_dataset(cells, theory, {"bootstrap": 20})
    figures = {}

    def build() -> None:  # figures are made in rule threads: no main-thread state needed
        figures["main"] = figure_outlier_vs_snr({"s": (cells, theory, analysis)}, max_columns=4)

    worker = threading.Thread(target=build)
    worker.start()
    worker.join()
    pairs = outlier_panels(cells)
    assert len(pairs) == len(POSITIONAL) * len(WEIGHTS)
    titles = [ax.get_title() for ax in figures["main"].axes if ax.get_title()]
    for positional, weights in pairs:
        named = [
            t for t in titles if f"positional={positional}," in t and f"weights={weights}," in t
        ]
        assert len(named) == 1, (positional, weights, titles)
    # six lines in 4 columns: two panel rows of (eigenvalue, overlap), two empty slots
    visible = [ax for ax in figures["main"].axes if ax.axison]
    assert len(visible) == 2 * len(pairs)
    assert np.isfinite(
        [
            line.get_ydata()
            for ax in visible
            for line in ax.get_lines()
            if len(line.get_ydata()) == 4
        ]
    ).all()
