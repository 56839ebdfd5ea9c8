"""Figures of the analysis (matplotlib's object API, never ``pyplot``: usable from
Snakemake's rule threads and notebooks alike). Theory as lines (``finite_vocab`` solid,
``paper`` dashed), data as points with 95% error bars, axes labelled with units. Each
``figure_*`` is a pure function of one sweep's stores (:class:`Data`) or tables;
:func:`make_figures` writes one sweep's, :func:`make_run_figures` the run-wide ones
(docs/architecture.md, "Only what changed is redrawn"); a figure without data is
written as a placeholder with a note."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from attnrmt.analysis._common import at_signal, drop_variant, effective_ratios, replicate_mean_sem
from attnrmt.analysis.attention import attention_weight_models, reference_weights
from attnrmt.analysis.comparison import complete_theory
from attnrmt.contract import ALL_AXES, PLACEHOLDER_FIGURE, TABLE_AXIS, TRANSITIONS
from attnrmt.theory import bulk_density, critical_theta

STYLE = {"finite_vocab": {"ls": "-", "color": "C3"}, "paper": {"ls": "--", "color": "C0"}}
PHASE_MIN_SNR = 5  # thresholds from fewer snr points are mostly bounds: not drawn
SNR_LABEL = r"snr $=\|\mu\|^2$ (dimensionless)"


class Data(NamedTuple):
    """One sweep's name and stores (``theory`` completed by
    :func:`attnrmt.analysis.comparison.complete_theory`), what the sweep figures draw."""

    sweep: str
    cells: xr.Dataset
    theory: xr.Dataset
    analysis: xr.Dataset


def _subplots(
    nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **kwargs: Any
) -> tuple[Figure, Any]:
    """A new :class:`~matplotlib.figure.Figure` and its axes (``Figure.subplots``)."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def _finish(fig: Figure, title: str | None = None, **font: Any) -> Figure:
    """``fig`` with its suptitle (if any, ``font`` its size) and a tight layout."""
    if title is not None:
        fig.suptitle(title, **font)
    fig.tight_layout()
    return fig


def _empty(title: str, note: str) -> Figure:
    """The placeholder of a figure without data (labelled: :func:`save` marks its PNG)."""
    fig, ax = _subplots(figsize=(5, 3))
    fig.set_label(PLACEHOLDER_FIGURE)
    ax.text(0.5, 0.5, note, ha="center", va="center", wrap=True)
    ax.set_title(title)
    ax.set_axis_off()
    return fig


def _pick(ds: xr.Dataset | xr.DataArray, prefer: Mapping[str, Any] | None = None) -> Any:
    """Select one value of every axis: ``prefer[axis]`` when given (``None`` keeps the whole
    axis), else the largest ``d``, centred, and the first value of the others."""
    sel: dict[str, Any] = {}
    for dim in ALL_AXES:
        if dim not in ds.dims or (prefer and dim in prefer and prefer[dim] is None):
            continue
        if prefer and dim in prefer:
            sel[dim] = prefer[dim]
        elif dim == "d":
            sel[dim] = ds[dim].values.max()
        elif dim == "centered":
            sel[dim] = bool(ds[dim].values.max())
        else:
            sel[dim] = ds[dim].values[0]
    return ds.sel(sel)


def _points(ax: Any, x: np.ndarray, da: xr.DataArray, **style: Any) -> None:
    """Replicate means of ``da`` against ``x`` with 95% error bars (1.96 standard errors; no
    bar below 2 replicates), markers ``o`` of size 3 unless ``style`` says otherwise."""
    mean, sem, _ = replicate_mean_sem(da)
    err = np.nan_to_num(1.96 * np.asarray(sem.values, float))
    ax.errorbar(x, np.asarray(mean.values, float), yerr=err, **{"fmt": "o", "ms": 3, **style})


def _lowest_finished_snr(cells: xr.Dataset, delta: float, gamma: float) -> float | None:
    """The lowest snr whose :func:`_pick`-ed cell (at this delta, gamma) has a spectrum."""
    for snr in np.sort(cells["snr"].values):
        picked = _pick(cells, {"delta": delta, "gamma": gamma, "snr": snr})
        if np.isfinite(np.asarray(picked["eigenvalues"].values, float)).any():
            return float(snr)
    return None


def figure_spectra(data: Data | None, max_panels: int = 9) -> Figure:
    """Histograms of ``S/kappa`` against the density of ``MP_delta ⊠ MP_gamma``
    (docs/model.md, "Bulk law"), one panel per (delta, gamma)."""
    if data is None or "bulk_skipped" in data.analysis.attrs:  # spectrum: top, no bulk
        return _empty("Spectra", "no spectra in this run")
    cells, analysis = data.cells, data.analysis
    pairs = itertools.product(cells["delta"].values, cells["gamma"].values)
    panels = [(float(delta), float(gamma)) for delta, gamma in pairs][:max_panels]
    ncol = min(3, len(panels))
    nrow = int(np.ceil(len(panels) / ncol))
    fig, axes = _subplots(nrow, ncol, figsize=(4.2 * ncol, 3.3 * nrow), squeeze=False)
    for ax, (delta, gamma) in zip(axes.flat, panels, strict=False):
        prefer = {"delta": delta, "gamma": gamma, "snr": _lowest_finished_snr(cells, delta, gamma)}
        if prefer["snr"] is None:  # every cell of the panel failed (skip_failed)
            ax.set_axis_off()
            ax.set_title(rf"$\delta$={delta:g}, $\gamma$={gamma:g}: no finished cell", fontsize=9)
            continue
        c = _pick(cells, prefer)
        a = _pick(analysis, prefer)
        kappa = float(c["kappa"])
        de, ge = (float(x) for x in effective_ratios(c))
        lam = np.asarray(c["eigenvalues"].values, float).ravel() / kappa
        lam = lam[np.isfinite(lam)]
        scale = np.abs(lam).max()
        nonzero = lam[lam > 1e-9 * scale]
        upper = float(a["bulk_upper_edge_th"].mean()) / kappa
        lower = float(a["bulk_lower_edge_th"].mean()) / kappa
        bins = np.linspace(0, upper * 1.15, 60)
        weights = np.full(nonzero.size, 1.0 / lam.size / np.diff(bins)[0])
        drawn = c["eigenvalues"].notnull()  # a ragged sweep's d has its own replicates
        reps = int(drawn.any([dim for dim in drawn.dims if dim != "replicate"]).sum())
        label = f"simulated (d={int(c['d'])}, {reps} reps)"
        heights, _, _ = ax.hist(nonzero, bins=bins, weights=weights, color="0.7", label=label)
        x = np.linspace(1e-4, upper * 1.15, 600)
        ax.plot(x, bulk_density(x, de, ge), color="C3", label="theory density")
        for edge in (lower, upper):
            ax.axvline(edge, color="C3", ls=":", lw=1)
        if lower <= 0 and heights.size > 3:  # density singular at 0: clip the y range
            ax.set_ylim(0, 1.5 * float(np.max(heights[3:])))
        ks = float(a["bulk_ks"].mean())
        title = rf"$\delta$={delta:g}, $\gamma$={gamma:g}  (KS={ks:.3f})"
        atom = float(a["bulk_atom_th"].mean())
        if atom > 0:
            zeros = float(a["bulk_zero_fraction"].mean())
            title += f"\nzeros {zeros:.3f} (atom {atom:.3f})"
        ax.set_title(title, fontsize=9)
        ax.set(
            xlabel=r"eigenvalue of $S/\kappa$ (units of $\kappa$)",
            ylabel="density (per unit eigenvalue)",
        )
        ax.legend(fontsize=7)
    for ax in axes.flat[len(panels) :]:
        ax.set_axis_off()
    return _finish(
        fig,
        r"Bulk of $S$: simulation vs $\kappa\,(MP_\delta\boxtimes MP_\gamma)$; "
        "dotted: theory edges",
    )


def outlier_panels(cells: xr.Dataset) -> list[tuple[str, str]]:
    """The ``(positional, weights)`` lines of a sweep, one panel column each: every pair of
    the sweep's coordinates, in coordinate order."""
    pairs = itertools.product(cells["positional"].values, cells["weights"].values)
    return [(str(positional), str(weights)) for positional, weights in pairs]


def figure_outlier_vs_snr(data: Data | None, max_columns: int = 4) -> Figure:
    """Top eigenvalues (sample and population) and overlaps vs snr with both variants: one
    pair of panels per ``(positional, weights)`` line (:func:`outlier_panels`) at the
    largest ``d``, wrapped after ``max_columns`` columns; the theory's top eigenvalue is the
    outlier above the threshold, the bulk edge below."""
    if data is None or data.cells.sizes.get("snr", 0) < 3:
        return _empty("Outliers vs snr", "no sweep with >= 3 snr values")
    sweep, cells, theory, analysis = data
    panels = outlier_panels(cells)
    ncol = min(max_columns, len(panels))
    nrow = int(np.ceil(len(panels) / ncol))
    fig, axes = _subplots(2 * nrow, ncol, figsize=(4.2 * ncol, 3.2 * 2 * nrow), squeeze=False)
    for index, (positional, wname) in enumerate(panels):
        row, j = divmod(index, ncol)
        prefer = {"positional": positional, "weights": wname, "snr": None}
        c = _pick(cells, prefer)
        t = _pick(theory, prefer)
        a = _pick(analysis, {"positional": positional, "weights": wname})
        snr = np.asarray(c["snr"].values, float)
        ax_e, ax_o = axes[2 * row, j], axes[2 * row + 1, j]
        for label, var, pop, color in (
            ("sample $S$", "top_eigenvalues", False, "k"),
            (r"population $\Sigma_E$", "pop_top_eigenvalues", True, "C2"),
        ):
            _points(ax_e, snr, at_signal(c, var, population=pop), color=color, label=label)
        _points(ax_o, snr, at_signal(c, "overlap_signal"), color="k", label="sample")
        pop_overlap = at_signal(c, "pop_overlap_signal", population=True)
        _points(ax_o, snr, pop_overlap, fmt="s", color="C2", mfc="none", label="population")
        for variant, style in STYLE.items():
            tv = t.sel(variant=variant)
            ax_e.plot(snr, tv["sample_top_eigenvalue"], **style, label=f"{variant} (sample)")
            ax_e.plot(snr, tv["pop_top_eigenvalue"], **style, lw=0.8)
            ax_o.plot(snr, tv["sample_overlap_signal"], **style, label=variant)
            ax_o.plot(snr, tv["pop_overlap_signal"], **style, lw=0.8)
            for name, ls in (("threshold_snr_population", ":"), ("threshold_snr_sample", "-.")):
                value = float(np.nanmean(tv[name]))
                if snr.min() <= value <= snr.max():
                    for ax in (ax_e, ax_o):
                        ax.axvline(value, color=style["color"], ls=ls, lw=0.8)
        for tr, marker in (("population", "v"), ("sample", "^")):
            est = float(a["threshold_estimate"].sel(transition=tr))
            if np.isfinite(est):
                lo, hi = (
                    float(a[f"threshold_ci_{end}"].sel(transition=tr)) for end in ("low", "high")
                )
                error = np.array([[est - lo], [hi - est]])
                label = f"empirical {tr} threshold"
                ax_o.errorbar([est], [0.02], xerr=error, fmt=marker, color="m", ms=6, label=label)
        ax_e.set_title(
            f"{sweep}: positional={positional}, weights={wname}, d={int(c['d'])}", fontsize=8
        )
        ax_e.set(xlabel=SNR_LABEL, ylabel="top eigenvalue (units of S)")
        ax_o.set(xlabel=SNR_LABEL, ylabel=r"squared overlap with $u$ (1)")
        if index == 0:
            ax_e.legend(fontsize=6)
            ax_o.legend(fontsize=6)
    for index in range(len(panels), nrow * ncol):
        row, j = divmod(index, ncol)
        axes[2 * row, j].set_axis_off()
        axes[2 * row + 1, j].set_axis_off()
    return _finish(
        fig,
        "Outliers and overlaps; lines: theory (solid finite_vocab, dashed paper; thick "
        "sample, thin population), vertical: thresholds (dotted population, dash-dot "
        "sample)",
        fontsize=9,
    )


def figure_phase_diagram(data: Data | None) -> Figure:
    """Thresholds in the (alpha/kappa, snr) plane: theory curves and empirical estimates."""
    if data is None or data.cells.sizes.get("snr", 0) < PHASE_MIN_SNR:
        return _empty("Phase diagram", f"no sweep with >= {PHASE_MIN_SNR} snr values")
    fig, axes = _subplots(1, 2, figsize=(10, 4.2))
    cells, analysis = data.cells, data.analysis
    c = _pick(cells, {"weights": None, "positional": None, "snr": None})
    a = _pick(analysis, {"weights": None, "positional": None})
    de, ge = (float(np.nanmean(x)) for x in effective_ratios(c))
    ratio = c["alpha"] / c["kappa"]
    ratio = ratio.mean("snr") if "snr" in ratio.dims else ratio
    for ax, tr in zip(axes, ("population", "sample"), strict=True):
        tc = float(critical_theta(de, ge, tr))
        x = np.linspace(0.3, max(8.0, float(ratio.max()) * 1.2), 200)
        ax.plot(x, tc / x, **STYLE["paper"], label="paper")
        ax.plot(x, tc / x - de, **STYLE["finite_vocab"], label="finite_vocab")
        est = a["threshold_estimate"].sel(transition=tr)
        lo = a["threshold_ci_low"].sel(transition=tr)
        hi = a["threshold_ci_high"].sel(transition=tr)
        xs = np.asarray(ratio.broadcast_like(est).values, float).ravel()
        e, lo_, hi_ = (np.asarray(v.values, float).ravel() for v in (est, lo, hi))
        ok = np.isfinite(e)
        error = np.array([e[ok] - lo_[ok], hi_[ok] - e[ok]])
        ax.errorbar(xs[ok], e[ok], yerr=error, fmt="o", color="k", ms=4, label="empirical")
        below = ~ok & np.isfinite(hi_) & ~np.isfinite(lo_)
        ax.plot(xs[below], hi_[below], "v", color="0.4", ms=6, label="bound: below range")
        above = ~ok & np.isfinite(lo_) & ~np.isfinite(hi_)
        ax.plot(xs[above], lo_[above], "^", color="0.4", ms=6, label="bound: above range")
        ax.set_title(f"{tr} transition (delta={de:.2f}, gamma={ge:.2f})", fontsize=9)
        ax.set(xlabel=r"$\alpha/\kappa$ (dimensionless)", ylabel="threshold " + SNR_LABEL)
        ax.axhline(0, color="0.8", lw=0.5)
    axes[0].legend(fontsize=7)
    return _finish(fig, "Phase diagram: outlier present above the curves", fontsize=10)


def figure_pooling(pooling: pd.DataFrame) -> Figure:
    """alpha/kappa by weights and recovery vs snr by weights, per positional model."""
    if pooling.empty or "alpha_over_kappa" not in pooling:
        return _empty("Pooling", "no pooling data")
    combos = pooling.groupby("sweep")[["positional", "weights"]].nunique().prod(axis=1)
    frame = pooling[pooling["sweep"] == combos.idxmax()]
    frame = frame[frame["d"] == frame["d"].max()]
    if "centered" in frame:
        frame = frame[frame["centered"].astype(str).isin(["True", "true", "1"])]
    positionals = list(dict.fromkeys(frame["positional"]))[:4]
    fig, axes = _subplots(2, len(positionals), figsize=(4.4 * len(positionals), 6.4), squeeze=False)
    for j, pos in enumerate(positionals):
        f = frame[frame["positional"] == pos]
        ak = f.groupby("weights", sort=False)["alpha_over_kappa"].mean()
        axes[0, j].bar(range(len(ak)), ak.to_numpy(), color="C0")
        axes[0, j].set_xticks(range(len(ak)), ak.index, rotation=30, fontsize=7)
        axes[0, j].set_ylabel(r"$\alpha/\kappa$ (dimensionless)")
        axes[0, j].set_title(f"{combos.idxmax()}: {pos} (d={int(frame['d'].max())})", fontsize=9)
        for k, (wname, g) in enumerate(f.groupby("weights", sort=False)):
            g = g.groupby("snr").mean(numeric_only=True).reset_index()
            style = {"fmt": "o-", "ms": 3, "lw": 0.8, "color": f"C{k}", "label": str(wname)}
            _ci_points(axes[1, j], g, "snr", "recovery", "recovery_ci", **style)
        axes[1, j].set(xlabel=SNR_LABEL, ylabel=r"recovery: squared overlap with $u$ (1)")
        axes[1, j].legend(fontsize=7)
    return _finish(
        fig, "Pooling strategies: alpha/kappa (top) and measured recovery (bottom)", fontsize=10
    )


def figure_causal_weights(
    data: Data | None, causal: pd.DataFrame, weight_models: Mapping[str, Any]
) -> Figure:
    """Measured causal-attention weights vs harmonic and causal_limit(tau), and distance vs d."""
    models = attention_weight_models(weight_models)
    causal = causal.dropna(subset=["distance"]) if "distance" in causal else causal
    drawn = set(data.cells["weights"].values) if data is not None else set()
    found = [w for w in models if w in drawn and w in set(causal.get("weights", []))]
    if data is None or not found or causal.empty:
        return _empty("Causal attention", "no causal_attention cells in this run")
    sweep, cells, wname = data.sweep, data.cells, found[0]
    c = _pick(cells, {"weights": wname, "d": None})
    T = int(c["T"])
    tau = models[wname]
    fig, (ax_w, ax_d) = _subplots(1, 2, figsize=(10, 4))
    pos = np.arange(1, T + 1)
    for k, d in enumerate(c["d"].values):
        w = np.asarray(c["effective_weights"].sel(d=d).mean("replicate").values, float)[:T]
        ax_w.plot(pos, w / w.sum(), "o", ms=4, color=f"C{k}", label=f"attention, d={int(d)}")
    references = reference_weights(T, tau)
    ax_w.plot(pos, references["harmonic"], "k--", label="harmonic (seed)")
    ax_w.plot(pos, references["causal_limit"], "k-", label=f"causal_limit(tau={tau:g})")
    ax_w.set(xlabel="position t (1..T)", ylabel=r"effective weight $w_t$ (sum = 1)")
    ax_w.legend(fontsize=7)
    sub = causal[(causal["weights"] == wname) & (causal["sweep"] == sweep)]
    for k, (ref, g) in enumerate(sub.groupby("reference")):
        g = g.groupby("d").mean(numeric_only=True).reset_index()
        _ci_points(ax_d, g, "d", "distance", fmt="o-", color=f"C{k + 3}", label=f"to {ref}")
    ax_d.set(xscale="log", yscale="log", xlabel="dimension d")
    ax_d.set_ylabel(r"relative distance $\|w-w_{ref}\|/\|w_{ref}\|$ (1)")
    ax_d.legend(fontsize=7)
    return _finish(fig, f"Real causal attention ({wname}, T={T}) as d grows", fontsize=10)


def _error_bars(frame: pd.DataFrame, column: str, ci: str = "ci") -> np.ndarray:
    """``(2, n)`` array of the distances from ``frame[column]`` down to ``frame[ci_low]`` and
    up to ``frame[ci_high]`` (what ``errorbar(yerr=...)`` takes; an array, not a list of
    Series: pandas 2 and matplotlib 3.10 warn on those, e.g. for a single point). O(n)."""
    centre, low, high = (
        frame[name].to_numpy(float) for name in (column, f"{ci}_low", f"{ci}_high")
    )
    return np.array([centre - low, high - centre])


def _ci_points(ax: Any, frame: pd.DataFrame, x: str, y: str, ci: str = "ci", **style: Any) -> None:
    """``frame[y]`` against ``frame[x]`` with the error bars of :func:`_error_bars`."""
    xs, ys = frame[x].to_numpy(float), frame[y].to_numpy(float)
    ax.errorbar(xs, ys, yerr=_error_bars(frame, y, ci), **style)


def figure_downstream(downstream: pd.DataFrame) -> Figure:
    """Downstream accuracy (with CI) against alpha/kappa, one series per snr."""
    if downstream.empty or "accuracy" not in downstream:
        return _empty("Downstream", "no label-model cells in this run")
    frame = downstream[downstream["d"] == downstream["d"].max()]
    fig, ax = _subplots(figsize=(6, 4.2))
    for k, (snr, g) in enumerate(frame.groupby("snr")):
        g = g.groupby("weights").mean(numeric_only=True).reset_index()
        _ci_points(
            ax, g, "alpha_over_kappa", "accuracy", fmt="o", color=f"C{k}", label=f"snr={snr:g}"
        )
        for _, row in g.iterrows():
            ax.annotate(
                str(row["weights"]),
                (row["alpha_over_kappa"], row["accuracy"]),
                fontsize=6,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.set(
        xlabel=r"$\alpha/\kappa$ (dimensionless)",
        ylabel="test accuracy of the ridge readout of y (fraction)",
    )
    ax.set_title(f"Downstream task by pooling weights (d={int(frame['d'].max())})", fontsize=10)
    ax.legend(fontsize=7)
    return _finish(fig)


#: Curves :func:`figure_finite_size` draws at most (the first ones with a point to draw).
FSS_MAX_CURVES = 6


#: The finite-size figure's abscissa is ``d^(-FSS_AXIS_EXPONENT)`` (the slowest candidate law
#: is a straight line there, the faster ones curve towards the limit at 0).
FSS_AXIS_EXPONENT = 1.0 / 3.0


def law_label(law: float, weight: float) -> str:
    """The law of largest Akaike weight of a ``d -> inf`` row, as the figure's legend shows
    it (docs/thresholds.md, "Finite-size law"): ``d^-1/2, weight 0.41``; no fit, ``""``.
    O(1)."""
    if not (np.isfinite(law) and np.isfinite(weight)):
        return ""
    return f"d^-{Fraction(law).limit_denominator(12)}, weight {weight:.2f}"


def _curve_rows(per_d: pd.DataFrame, keys: Sequence[str], key: tuple, transition: str) -> Any:
    """The rows of one curve (``keys`` equal to ``key``) and transition. O(rows)."""
    mask = per_d["transition"] == transition
    for col, val in zip(keys, key, strict=True):
        mask &= per_d[col] == val
    return per_d[mask]


def _measured(rows: pd.DataFrame) -> np.ndarray:
    """Rows whose threshold is an estimate (a crossing inside the swept snr), not a bound."""
    return ((rows["bound"] == "none") & np.isfinite(rows["estimate"].to_numpy(float))).to_numpy()


def figure_finite_size(thresholds: pd.DataFrame) -> Figure:
    """Threshold estimates (filled, with CI; bounds open at the fitted line's crossing)
    against ``d^(-1/3)`` with the ``d -> inf`` limit of ``thresholds.csv`` (a star, its CI)
    and the law of largest weight through it, named in the legend (docs/thresholds.md,
    "Finite-size law"). O(rows)."""
    from matplotlib.lines import Line2D

    exponent = FSS_AXIS_EXPONENT
    if thresholds.empty or "finite_size" not in thresholds:
        return _empty("Finite size", "no thresholds")
    if TABLE_AXIS in thresholds:  # a curve per law; "" where a sweep has no table axis
        thresholds = thresholds.assign(table=thresholds[TABLE_AXIS].fillna(""))
    fss = thresholds[thresholds["finite_size"] != "none"]
    if fss.empty:
        return _empty("Finite size", "no sweep with several d")
    per_d = thresholds[thresholds["finite_size"] == "none"]
    keys = [
        c
        for c in ("sweep", "delta", "gamma", "T", "positional", "weights", TABLE_AXIS, "centered")
        if c in thresholds
    ]
    per_d = per_d[np.isfinite(per_d["extrapolated"].to_numpy(float))]  # what can be drawn
    groups = [
        (key, frows)
        for key, frows in fss.groupby(keys, sort=False)
        if any(not _curve_rows(per_d, keys, key, tr).empty for tr in TRANSITIONS)
    ][:FSS_MAX_CURVES]
    if not groups:
        return _empty("Finite size", "no threshold crossing to draw (every curve empty)")
    fig = Figure(figsize=(10, 5.2), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, tr in zip(axes, TRANSITIONS, strict=True):
        handles: list[Any] = []
        for k, (key, frows) in enumerate(groups):
            frow = frows[frows["transition"] == tr]
            pts = _curve_rows(per_d, keys, key, tr)
            if pts.empty:
                continue
            color = f"C{k}"
            x = pts["d"].to_numpy(float) ** (-exponent)
            measured = _measured(pts)
            est = pts["estimate"].to_numpy(float)
            error = _error_bars(pts, "estimate")[:, measured]
            ax.errorbar(x[measured], est[measured], yerr=error, fmt="o", color=color)
            bounds = pts["extrapolated"].to_numpy(float)[~measured]  # the fit's crossing, no CI
            ax.plot(x[~measured], bounds, "o", mfc="none", color=color)
            label = "/".join(str(part) for part in key[4:6])
            if not frow.empty:
                a = float(frow["estimate"].iloc[0])
                if x.size >= 2 and np.isfinite(a):
                    b = float(frow.get("fss_slope", pd.Series([np.nan])).iloc[0])
                    law = float(frow.get("fss_law", pd.Series([exponent])).iloc[0])
                    xs = np.linspace(0, x.max() * 1.05, 40)
                    ax.plot(xs, a + b * xs ** (law / exponent), color=color, lw=0.8)
                    error = _error_bars(frow, "estimate")[:, :1]
                    ax.errorbar([0], [a], yerr=error, fmt="*", ms=9, color=color)
                for variant, style in STYLE.items():
                    predicted = float(frow[f"theory_{variant}"].iloc[0])
                    ax.axhline(predicted, color=color, ls=style["ls"], lw=0.6)
                if "fss_law" in frow:
                    w = law_label(
                        float(frow["fss_law"].iloc[0]), float(frow["fss_law_weight"].iloc[0])
                    )
                    label += f"  ({w})" if w else ""
            handles.append(Line2D([], [], color=color, marker="o", lw=0.8, label=label))
        for marker, extra, label in (
            ("o", {}, "estimate, 95% CI"),
            ("o", {"mfc": "none"}, "bound: fit's crossing"),
            ("*", {"ms": 9}, "d->inf limit, 95% CI"),
        ):
            handles.append(Line2D([], [], color="0.3", marker=marker, ls="", label=label, **extra))
        ax.set(xlabel=rf"$d^{{-{exponent:.3g}}}$ (d = dimension)", ylabel="threshold " + SNR_LABEL)
        ax.set_title(f"{tr} threshold; lines: theory, finite_vocab solid, paper dashed", fontsize=8)
        ax.legend(
            handles=handles,
            fontsize=6.5,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.14),
            ncol=2,
            frameon=False,
        )
    fig.suptitle(
        "Finite-size trend: the d -> inf limit averages a + b d^-w over w = 1/3, 1/2, 1 "
        "(Akaike weights); the legend names the law of largest weight",
        fontsize=8,
    )
    return fig


def figure_centring(data: Data | None) -> Figure:
    """Uncentred mean spike vs theory, and signal recovery with and without centring."""
    if data is None or data.cells.sizes.get("centered", 0) < 2:
        return _empty("Centring", "no sweep with centered = [true, false]")
    cells, theory = data.cells, data.theory
    prefer = {"weights": None, "snr": None, "centered": None}
    c = _pick(cells, prefer)
    t = drop_variant(_pick(theory, prefer)["mean_spike_outlier"])
    snr = np.asarray(c["snr"].values, float)
    fig, (ax_e, ax_o) = _subplots(1, 2, figsize=(10, 4))
    for k, wname in enumerate(c["weights"].values[:4]):
        unc = c.sel(weights=wname, centered=False)
        cen = c.sel(weights=wname, centered=True)
        mean_k = unc["overlap_table_mean"].fillna(-1).argmax("k")
        label = f"{wname}: eigenvalue along mbar, uncentred"
        _points(ax_e, snr, unc["top_eigenvalues"].isel(k=mean_k), color=f"C{k}", label=label)
        predicted = np.broadcast_to(t.sel(weights=wname, centered=False).values, snr.shape)
        ax_e.plot(snr, predicted, "-", color=f"C{k}", lw=0.8)
        for cc, fill, label in ((unc, None, "uncentred"), (cen, "none", "centred")):
            marker = {"fmt": "o" if fill is None else "s", "mfc": fill, "color": f"C{k}"}
            _points(ax_o, snr, cc["overlap_signal"].isel(k=0), **marker, label=f"{wname}, {label}")
    ax_e.set(xlabel=SNR_LABEL, ylabel="eigenvalue along mbar (units of S)")
    ax_e.set_title("uncentred mean spike: points simulation, lines theory", fontsize=9)
    ax_o.set(xlabel=SNR_LABEL, ylabel=r"squared overlap of top eigenvector with $u$ (1)")
    ax_o.set_title("signal in the TOP eigenvector: centred vs uncentred", fontsize=9)
    for ax in (ax_e, ax_o):
        ax.legend(fontsize=6)
    return _finish(fig)


# --------------------------------------------------------------------------- universality


def _law_order(table: pd.DataFrame) -> list[str]:
    """Laws from light to heavy tails: by fourth moment, then (infinite ones) by falling
    parameter ``nu``."""
    laws = table.drop_duplicates("law").sort_values(
        ["fourth_moment", "parameter", "law"], ascending=[True, False, True]
    )
    return [str(law) for law in laws["law"]]


def figure_universality(table: pd.DataFrame) -> Figure:
    """Mean absolute error against the Gaussian finite_vocab theory per table law and d
    (``universality.csv``; :mod:`attnrmt.analysis.universality`): filled where the law is
    within Monte-Carlo error of the Gaussian cells, open where it differs; dashed lines
    are the Gaussian cells' own error at each d."""
    from attnrmt.analysis.universality import UNIVERSALITY_QUANTITIES

    if table.empty:
        return _empty("universality", "no sweep with a non-Gaussian table law")
    laws = _law_order(table)
    position = {law: i for i, law in enumerate(laws)}
    quantities = [q for q in UNIVERSALITY_QUANTITIES if (table["quantity"] == q).any()]
    ncols = min(4, len(quantities))
    nrows = -(-len(quantities) // ncols)
    fig, axes = _subplots(nrows, ncols, figsize=(3.6 * ncols, 3.0 * nrows + 0.6), squeeze=False)
    ds = sorted(table["d"].unique())
    for ax, quantity in zip(axes.flat, quantities, strict=False):
        part = table[table["quantity"] == quantity]
        for index, d in enumerate(ds):
            at_d = part[part["d"] == d]
            colour = f"C{index}"
            x = at_d["law"].map(position).to_numpy(float) + 0.12 * (index - (len(ds) - 1) / 2)
            y = at_d["mean_abs_error"].to_numpy(float)
            ok = at_d["consistent"].eq(True).to_numpy()
            ax.plot(x[ok], y[ok], "o", color=colour, label=f"d={int(d)}")
            ax.plot(x[~ok], y[~ok], "o", mfc="none", color=colour)
            gaussian = float(at_d["gaussian_mean_abs_error"].mean()) if len(at_d) else np.nan
            if np.isfinite(gaussian):
                ax.axhline(gaussian, ls="--", lw=0.8, color=colour)
        ax.set_yscale("log")
        ax.set_xticks(range(len(laws)), laws, rotation=60, fontsize=7)
        ax.set_title(quantity, fontsize=9)
        ax.set_ylabel("mean |error| (dimensionless)", fontsize=7)
    for ax in list(axes.flat)[len(quantities) :]:
        ax.set_axis_off()
    axes.flat[0].legend(fontsize=7)
    return _finish(
        fig,
        "error against the Gaussian finite_vocab theory per table law "
        "(filled: within Monte-Carlo error of the Gaussian cells; dashed: Gaussian cells)",
        fontsize=9,
    )


def save(fig: Figure, stem: str | os.PathLike[str], formats: Sequence[str]) -> list[Path]:
    """Write ``fig`` as ``stem.<fmt>`` for every format; a placeholder's PNG carries
    :data:`attnrmt.contract.PLACEHOLDER_FIGURE` as its description (the report leaves it out)."""
    placeholder = fig.get_label() == PLACEHOLDER_FIGURE
    paths = []
    for fmt in formats:
        path = Path(f"{stem}.{fmt}")
        path.parent.mkdir(parents=True, exist_ok=True)
        marked = placeholder and fmt == "png"
        fig.savefig(path, dpi=110, metadata={"Description": PLACEHOLDER_FIGURE} if marked else None)
        paths.append(path)
    return paths


# --------------------------------------------------------------------------- K classes


def _threshold_bands(ax: Any, rows: pd.DataFrame, spike: int, color: str) -> None:
    """Shade a spike's estimated sample threshold and CI (classes_thresholds.csv rows)."""
    found = rows[(rows["spike"] == spike) & (rows["transition"] == "sample")]
    for _, row in found.iterrows():
        if row["bound"] == "none":
            ax.axvspan(row["ci_low"], row["ci_high"], color=color, alpha=0.12, lw=0)
            ax.axvline(row["estimate"], color=color, lw=0.6, ls=":")


def figure_classes_spikes(data: Data | None, thresholds: pd.DataFrame) -> Figure:
    """Top K-1 eigenvalues and own-direction overlaps (a file table's: on the spike span)
    against snr of a K-class sweep, one column per label model (up to three), with both
    variants' theory per spike and the estimated sample thresholds (docs/model.md, "K-class
    spikes")."""
    from attnrmt.analysis.classes import classes_of, measured_spikes

    if data is None or classes_of(data.cells) is None:
        return _empty("K-class spikes", "no sweep with classes")
    sweep, cells, theory, _ = data
    spikes = int(classes_of(cells)["spikes"])  # type: ignore[index]
    labels = list(cells["positional"].values)[:3]
    fig, axes = _subplots(2, len(labels), figsize=(5.0 * len(labels), 7.5), squeeze=False)
    snr = np.asarray(cells["snr"].values, float)
    rows = thresholds[thresholds["sweep"] == sweep] if "sweep" in thresholds else thresholds
    for column, label in enumerate(labels):
        c = _pick(cells, {"positional": label, "snr": None})
        t = _pick(theory, {"positional": label, "snr": None})
        here = rows[rows["positional"] == label] if "positional" in rows else rows
        if "d" in here and "d" in c.coords:  # the bands of the d drawn (the largest)
            here = here[here["d"] == int(c["d"].values)]
        ax_e, ax_o = axes[0, column], axes[1, column]
        overlaps = measured_spikes(c, "sample_overlap_table")  # a file table's: on the span
        for j in range(spikes):
            color = f"C{j + 1}"
            _points(ax_e, snr, c["top_eigenvalues"].isel(k=j), color=color, label=f"spike {j}")
            _points(ax_o, snr, overlaps.isel(spike=j), color=color, label=f"spike {j}")
            for variant in ("finite_vocab", "paper"):
                ls = STYLE[variant]["ls"]
                curve = t["spike_sample_eigenvalue"].sel(variant=variant).isel(spike=j)
                ax_e.plot(snr, np.asarray(curve.values, float), ls=ls, color=color, lw=1)
            overlap = t["spike_sample_overlap"].sel(variant="finite_vocab").isel(spike=j)
            ax_o.plot(snr, np.asarray(overlap.values, float), ls="-", color=color, lw=1)
            for ax in (ax_e, ax_o):
                _threshold_bands(ax, here, j, color)
        ax_e.set_title(f"{sweep}: labels {label} (solid finite_vocab, dashed paper)")
        ax_e.set_ylabel("eigenvalue j+1 of S (units of S)")
        ax_o.set(
            ylabel="squared overlap with own spike direction or span (fraction)",
            ylim=(-0.02, 1.02),
        )
        for ax in (ax_e, ax_o):
            ax.set_xlabel(SNR_LABEL)
            ax.legend(fontsize=7)
    return _finish(fig)


_DRAWING = threading.Lock()


def _write_figures(
    builders: Mapping[str, Any],
    figure_dir: str | os.PathLike[str],
    run_dir: str | os.PathLike[str],
    settings: Mapping[str, Any],
    log_path: str | os.PathLike[str] | None,
) -> list[Path]:
    """Draw each of ``builders`` (name -> no-argument figure function) into ``figure_dir``
    as PNG plus the settings' ``figure_formats``, and record them as the run's products
    (docs/data-contract.md, "Integrity"). One drawing at a time in a process: the figure
    rules of several sweeps run in threads, and matplotlib's mathtext parser is not
    thread-safe. O(figures)."""
    from attnrmt.analysis.pipeline import append_log, record

    formats = list(dict.fromkeys(["png", *settings["figure_formats"]]))
    paths: list[Path] = []
    for name, build in builders.items():
        with _DRAWING:
            started = time.perf_counter()
            paths += save(build(), Path(figure_dir) / name, formats)
            seconds = time.perf_counter() - started
        append_log(log_path, f"{name}: {seconds:.2f} s")
    record(run_dir, paths, log_path, f"{len(paths)} figure files")
    return paths


def make_figures(
    run_dir: str | os.PathLike[str],
    sweep: str,
    figure_dir: str | os.PathLike[str],
    settings: Mapping[str, Any],
    weight_models: Mapping[str, Any] | None = None,
    log_path: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """Rule ``figures_<sweep>``: every figure of ``SWEEP_FIGURES`` (:mod:`attnrmt.contract`)
    of one sweep under ``figure_dir``, from its stores (``<run_dir>/<sweep>/*.zarr``) and
    tables (``<sweep>/tables/*.csv``, :func:`attnrmt.analysis.pipeline.write_sweep_tables`)
    only, so that a change of another sweep leaves them alone. PNG always (the report shows
    it), plus ``figure_formats``."""
    from attnrmt.analysis.pipeline import decode_bounds, open_sweep, read_table

    tables, cells, theory, analysis = open_sweep(run_dir, sweep)
    analysis = decode_bounds(analysis)
    data: Data | None = None
    classes_data: Data | None = None
    if theory is not None and "spike_theta" in theory:  # K classes: own figure only
        classes_data = Data(sweep, cells, theory, analysis)
    else:
        data = Data(sweep, cells, complete_theory(theory, cells), analysis)

    def table(name: str) -> pd.DataFrame:
        return read_table(tables / f"{name}.csv")

    builders = {
        "spectra": lambda: figure_spectra(data),
        "outlier_vs_snr": lambda: figure_outlier_vs_snr(data),
        "phase_diagram": lambda: figure_phase_diagram(data),
        "pooling": lambda: figure_pooling(table("pooling")),
        "causal_weights": lambda: figure_causal_weights(data, table("causal"), weight_models or {}),
        "downstream": lambda: figure_downstream(table("downstream")),
        "finite_size": lambda: figure_finite_size(table("thresholds")),
        "centring": lambda: figure_centring(data),
        "classes_spikes": lambda: figure_classes_spikes(classes_data, table("classes_thresholds")),
    }
    return _write_figures(builders, figure_dir, run_dir, settings, log_path)


def make_run_figures(
    run_dir: str | os.PathLike[str],
    figure_dir: str | os.PathLike[str],
    settings: Mapping[str, Any],
    log_path: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """Rule ``run_figures``: the figures of ``RUN_FIGURES`` (:mod:`attnrmt.contract`) from the
    run-wide tables (``<run_dir>/universality.csv``; a placeholder draws the no-data figure)."""
    from attnrmt.analysis.pipeline import read_table

    frame = read_table(Path(run_dir) / "universality.csv")
    universality = pd.DataFrame() if "note" in frame else frame
    builders = {"universality": lambda: figure_universality(universality)}
    return _write_figures(builders, figure_dir, run_dir, settings, log_path)
