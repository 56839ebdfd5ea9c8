"""Figures: the object API (no pyplot state) and a main figure that shows every line."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pandas as pd

from attnrmt.analysis.figures import Data, figure_outlier_vs_snr, outlier_panels
from attnrmt.analysis.pipeline import analysis_dataset
from attnrmt.sweep.spec.schema import with_defaults
from tests.analysis.synthetic import make_synthetic

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
    analysis = analysis_dataset(cells, theory, with_defaults({"bootstrap": 20}, "analysis"))
    figures = {}

    def build() -> None:  # figures are made in rule threads: no main-thread state needed
        figures["main"] = figure_outlier_vs_snr(Data("s", cells, theory, analysis), max_columns=4)

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


# --------------------------------------------------------------------------- finite size


def _fss_table() -> pd.DataFrame:
    """thresholds.csv rows of three curves at d = 100 ... 800 plus their d->inf rows:
    ``est`` measured at every d (law d^-1/3 of weight 0.41), ``mix`` a bound at
    the two smaller d (crossing 0.30, 0.32) and measured above, ``none`` nothing drawable
    (no crossing, no fit: the curve of a single-snr sweep)."""
    rows = []
    base = {"sweep": "s", "delta": 0.5, "gamma": 0.5, "T": 8, "positional": "p", "centered": True}
    ds = (100.0, 200.0, 400.0, 800.0)
    for weights, per_d, limit, w in (
        (
            "est",
            [(0.80, "none"), (0.76, "none"), (0.74, "none"), (0.73, "none")],
            0.70,
            (1 / 3, 0.41),
        ),
        (
            "mix",
            [(0.30, "below"), (0.32, "below"), (0.34, "none"), (0.35, "none")],
            0.37,
            (1.0, 0.9),
        ),
        ("none", [(np.nan, "none")] * 4, np.nan, (np.nan, np.nan)),
    ):
        for transition in ("population", "sample"):
            for d, (value, bound) in zip(ds, per_d, strict=True):
                measured = bound == "none" and np.isfinite(value)
                rows.append({
                    **base, "weights": weights, "transition": transition, "d": d,
                    "estimate": value if measured else np.nan,
                    "ci_low": value - 0.02 if measured else -np.inf,
                    "ci_high": value + 0.02 if measured else 0.0,
                    "bound": bound, "extrapolated": value, "finite_size": "none",
                    "theory_paper": 1.2, "theory_finite_vocab": 0.7, "fss_slope": np.nan,
                    "fss_law": np.nan, "fss_law_weight": np.nan,
                })  # fmt: skip
            rows.append({
                **base, "weights": weights, "transition": transition, "d": np.inf,
                "estimate": limit, "ci_low": limit - 0.05, "ci_high": limit + 0.05,
                "bound": "none", "extrapolated": limit,
                "finite_size": "d->inf (a + b d^-w, w = 1/3, 1/2, 1 averaged with Akaike weights)",
                "theory_paper": 1.2, "theory_finite_vocab": 0.7, "fss_slope": 0.4,
                "fss_law": w[0], "fss_law_weight": w[1],
            })  # fmt: skip
    return pd.DataFrame(rows)


def test_law_label_names_the_law_and_its_weight() -> None:
    from attnrmt.analysis.figures import law_label

    assert law_label(1 / 3, 0.414) == "d^-1/3, weight 0.41"
    assert law_label(0.5, 0.3) == "d^-1/2, weight 0.30"
    assert law_label(1.0, 0.9) == "d^-1, weight 0.90"
    assert law_label(np.nan, np.nan) == ""


def test_finite_size_figure_draws_bounds_open_and_labels_clear_of_the_data() -> None:
    """The issue's four faults of finite_size.png, each checked on the drawn artists."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from attnrmt.analysis.figures import figure_finite_size

    fig = figure_finite_size(_fss_table())
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax in fig.axes:
        legend = ax.get_legend()
        labels = [text.get_text() for text in legend.get_texts()]
        # a curve with no point has no legend entry; the laws are in the legend
        assert labels[:2] == ["p/est  (d^-1/3, weight 0.41)", "p/mix  (d^-1, weight 0.90)"]
        assert not any("none" in label for label in labels), labels
        # no text inside the axes (annotations overlapped each other and the ticks) and
        # the legend clear of the axes and their tick labels
        assert len(ax.texts) == 0
        frame = legend.get_window_extent(renderer)
        assert not frame.overlaps(ax.get_window_extent(renderer))
        ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
        assert ticks and not any(frame.overlaps(tick) for tick in ticks)
        # the bounds of `mix` (d = 100, 200: x = d^-1/3) are open markers, the estimates filled
        ds = (100.0, 200.0, 400.0, 800.0)
        x_bound = np.array(ds[:2]) ** (-1 / 3)
        open_points, filled_points = [], []
        for line in ax.get_lines():
            xs, ys = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
            if line.get_marker() != "o" or xs.size == 0:
                continue
            target = open_points if line.get_markerfacecolor() == "none" else filled_points
            target += list(zip(xs.round(6), ys.round(6), strict=True))
        assert sorted(open_points) == sorted(zip(x_bound.round(6), (0.30, 0.32), strict=True)), (
            open_points
        )
        measured = [
            *zip(ds, (0.80, 0.76, 0.74, 0.73), strict=True),
            *zip(ds[2:], (0.34, 0.35), strict=True),
        ]
        assert sorted(filled_points) == sorted(
            (round(d ** (-1 / 3), 6), value) for d, value in measured
        ), filled_points
