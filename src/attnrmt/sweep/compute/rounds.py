"""Rounds of a run whose sweeps state a precision target (docs/architecture.md, "Rounds:
sweeps that stop at a precision target").

Round ``n`` is a whole config, ``results/<run>/rounds/round-<n>.yaml``: the run's config
with each targeted sweep's ``replicates`` and ``snr`` set to that round's design (round 0:
as written; a placed axis spelled out). The driver runs each round as an incremental rerun
(cells are content-keyed, so a round computes only the cells its design adds), then
:func:`advance` reads ``thresholds.csv``, appends the round's rows to
``rounds/rounds.csv`` (how each CI narrowed) and writes the next round's config from
:func:`attnrmt.sweep.spec.target.next_design` (a ``d -> inf`` limit's replicates spread
over its ``d`` by :func:`~attnrmt.sweep.spec.target.replicates_per_d`, written as
``replicates: {d: count}``), or nothing when every target is met or its budget is
spent. A killed run resumes its latest round (:func:`current_round`).
Cost: O(threshold rows + sweeps) per round, plus one small YAML and CSV write.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from attnrmt.sweep.spec.config import ResolvedSweep, ValidConfig, read_config_source
from attnrmt.sweep.spec.cost import estimated_cell_seconds, estimated_curve_seconds
from attnrmt.sweep.spec.target import distance, next_design, parse_target, replicates_per_d
from attnrmt.sweep.store.atomic import write_text_atomically

_ROUND = re.compile(r"round-(\d+)\.yaml")
COLUMNS = "round sweep transition setting halfwidth goal distance replicates snr_points"
COLUMNS += " design_cpu_hours next"


def targeted(valid: ValidConfig) -> dict[str, Any]:
    """``{sweep: Target}`` of the sweeps that state a target. O(sweeps)."""
    sweeps = valid.config["sweeps"]
    return {
        name: parse_target(f"sweeps.{name}.target", sweeps[name]["target"])
        for name in valid.sweeps
        if sweeps[name].get("target") is not None
    }


def _round_files(folder: Path) -> dict[int, Path]:
    return {int(m[1]): p for p in folder.glob("round-*.yaml") if (m := _ROUND.fullmatch(p.name))}


def latest_round(run_dir: Path) -> Path | None:
    """The config of the run's latest round, if it has rounds. O(round files)."""
    found = _round_files(Path(run_dir) / "rounds")
    return found[max(found)] if found else None


def current_round(run_dir: Path, config: str | Path, run_name: str) -> tuple[int, Path]:
    """The round to run: the latest ``round-<n>.yaml`` (a resumed run) when round 0 is
    ``config`` as it is now, else round 0 written from ``config`` (the earlier rounds'
    configs removed; their cells stay reusable). O(round files)."""
    folder = Path(run_dir) / "rounds"
    found = _round_files(folder)
    first = {**read_config_source(config), "run": run_name}
    if 0 in found and read_config_source(found[0]) == first:
        return max(found), found[max(found)]
    for path in found.values():
        path.unlink()
    return 0, _write_round(folder, 0, first)


def _write_round(folder: Path, n: int, raw: Mapping[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"round-{n}.yaml"
    write_text_atomically(path, yaml.safe_dump(dict(raw), sort_keys=False))
    return path


def design_seconds(sweep: ResolvedSweep, replicates: Sequence[int], snr: Sequence[float]) -> float:
    """Cost-model CPU seconds of ``sweep`` with ``replicates`` at each ``d`` of its axis
    and the ``snr`` axis (:mod:`attnrmt.sweep.spec.cost`, its built-in constant). O(settings)."""
    a = sweep.axes
    total = 0.0
    for (d, count), delta, gamma, T, w in itertools.product(
        zip(a["d"], replicates, strict=True), a["delta"], a["gamma"], a["T"], a["weights"]
    ):
        kw = {"d": d, "delta": delta, "gamma": gamma, "T": T}
        kw |= {"weights": sweep.weights_specs[(w, T)], "spectrum": sweep.spectrum}
        shared = sweep.noise == "shared"
        total += count * (
            estimated_curve_seconds(kw, len(snr))
            if shared
            else len(snr) * estimated_cell_seconds(kw)
        )
    return total * len(a["positional"]) * len(a["centered"])


def _rows(table: pd.DataFrame, sweep: ResolvedSweep, transitions: Sequence[str]) -> pd.DataFrame:
    """The threshold rows a target judges: ``d -> inf`` limits with several d, else per d."""
    rows = table[(table["sweep"] == sweep.name) & table["transition"].isin(transitions)]
    limit = rows["finite_size"].fillna("none") != "none"
    return rows[limit] if len(sweep.axes["d"]) > 1 else rows[~limit]


def _per_d(
    table: pd.DataFrame, sweep: ResolvedSweep, target: Any, rows: Sequence[Any], reps: list[int]
) -> list[int] | None:
    """Replicates per ``d`` that bring the unmet ``d -> inf`` limits ``rows`` to their goals
    at the least price: :func:`replicates_per_d` of each, the most at every ``d``. A limit's
    variance share of ``d`` is ``(w_d s_d)^2``: ``s_d`` the per-``d`` CI half-width / 1.96,
    ``w_d`` the limit's derivative in that ``d``'s threshold (``finite_size_fit`` with
    inverse-variance weights, by finite differences; docs/thresholds.md, "The finite-size
    study"); one with a per-``d`` CI that is not finite (a bound) grows every ``d`` by
    ``distance^2`` (shares ``R_d``, equal prices). None with one ``d``. O(d^2 laws)."""
    from attnrmt.analysis.thresholds import finite_size_fit

    d = np.asarray(sweep.axes["d"], dtype=float)
    if d.size < 2:
        return None
    snr = sweep.axes["snr"]
    cost = [design_seconds(sweep, list(np.eye(d.size, dtype=int)[i]), snr) for i in range(d.size)]
    wanted, names = list(reps), ("delta", "gamma", "T", "positional", "weights", "centered")
    for row in rows:
        far = distance(target, row)
        if not 1 < far < np.inf:
            continue
        per = table[(table["sweep"] == sweep.name) & (table["transition"] == row["transition"])]
        per = per[per["finite_size"].fillna("none") == "none"]
        for name in (name for name in names if name in per):
            per = per[per[name].astype(str) == str(row[name])]
        per = per.set_index(per["d"].astype(float)).reindex(d)
        sd = ((per["ci_high"] - per["ci_low"]) / 2 / 1.96).to_numpy(float)
        share, price = [float(r) for r in reps], [1.0] * d.size  # a bound: R_d distance^2
        if np.all(np.isfinite(sd) & (sd > 0)):
            est = per["extrapolated"].fillna(per["estimate"]).to_numpy(float)
            a = lambda e, w=sd**-2: finite_size_fit(d, e, weights=w)["a"]  # noqa: E731
            # (w_d s_d)^2, w_d by a step of 1e-3 s_d
            share = [((a(est + e) - a(est)) / 1e-3) ** 2 for e in 1e-3 * sd * np.eye(d.size)]
            price = cost
        alloc = replicates_per_d(reps, share, price, far, target.max_growth)
        wanted = [max(w, x) for w, x in zip(wanted, alloc, strict=True)]
    return None if wanted == reps else wanted


def advance(
    run_dir: Path, n: int, round_config: ValidConfig, targets: Mapping[str, Any]
) -> Path | None:
    """After round ``n`` (its config validated as ``round_config``): the round's rows in
    ``rounds/rounds.csv`` and the next round's config, or None (every target met or its
    budget spent). O(threshold rows)."""
    table = pd.read_csv(Path(run_dir) / "thresholds.csv")
    raw = read_config_source(round_config.source or "")
    records, changed = [], False
    for name, target in targets.items():
        sweep = round_config.sweeps[name]
        snr, reps = [float(x) for x in sweep.axes["snr"]], list(sweep.per_d or [])
        reps = reps or [sweep.replicates] * len(sweep.axes["d"])
        rows: list[Any] = _rows(table, sweep, target.transitions).to_dict("records")
        price = lambda r, xs, s=sweep: design_seconds(s, r, xs)  # noqa: E731
        per_d = _per_d(table, sweep, target, rows, reps)
        design = next_design(target, reps, snr, rows, price, price(reps, snr), per_d)
        if design is not None:
            per = dict(zip(sweep.axes["d"], design[0], strict=True))
            count = per if len(set(design[0])) > 1 else design[0][0]
            raw["sweeps"][name] = {**raw["sweeps"][name], "replicates": count, "snr": design[1]}
            changed = True
        shown = "/".join(map(str, reps if len(set(reps)) > 1 else reps[:1]))  # per d
        after = (shown, len(snr), price(reps, snr) / 3600, _next_text(design, rows, target))
        for row in rows:
            limit = str(row.get("finite_size", "none")) not in ("none", "nan")
            setting = "d->inf" if limit else f"d={row['d']}"
            setting += "".join(f" {k}={row[k]}" for k in ("positional", "weights") if k in row)
            halfwidth = (row["ci_high"] - row["ci_low"]) / 2
            scores = (halfwidth, target.goal(row), distance(target, row))
            records.append((n, name, row["transition"], setting, *scores, *after))
    path = Path(run_dir) / "rounds" / "rounds.csv"
    fresh = pd.DataFrame(records, columns=COLUMNS.split())
    kept = pd.read_csv(path) if path.is_file() else fresh.iloc[:0]
    kept = kept[kept["round"] != n]
    new = pd.concat([kept, fresh]) if len(kept) else fresh  # no empty frame in a concat
    write_text_atomically(path, new.to_csv(index=False, float_format="%.6g"))
    return _write_round(path.parent, n + 1, raw) if changed else None


def _next_text(design: Any, rows: Sequence[Any], target: Any) -> str:
    if design is not None:
        return f"{'/'.join(map(str, design[0]))} replicates, {len(design[1])} snr"
    return "met" if all(distance(target, row) <= 1 for row in rows) else "budget spent"


def round_status_lines(run_dir: Path) -> list[str]:
    """``attnrmt status``'s lines of a run with targets: its current round, and each
    target's distance (half-width over goal; <= 1 met) in the latest round analysed.
    O(rows of rounds.csv)."""
    path, latest = Path(run_dir) / "rounds" / "rounds.csv", latest_round(run_dir)
    if latest is None:
        return []
    lines = [f"round: {latest.stem.split('-')[1]} ({latest})"]
    if path.is_file():
        table = pd.read_csv(path)
        last = table[table["round"] == table["round"].max()]
        lines.append(f"targets after round {int(last['round'].iloc[0])} (half-width / goal):")
        for row in last.itertuples():
            state = "met" if row.distance <= 1 else f"{row.distance:.2f}"
            lines.append(f"  {row.sweep} {row.transition} {row.setting}: {state}; next: {row.next}")
    return lines


def rounds_figure(table: str | Path, out: str | Path, log: str | Path | None = None) -> Any:
    """The report's figure of ``rounds.csv``: each target's half-width over its goal
    (``distance``, log scale; 1 = met) against the round, one line per sweep, transition
    and setting, labelled with its replicates in the last round; returns the figure (and
    names it in ``log``, the rule's log file). O(rows)."""
    from matplotlib.figure import Figure

    frame = pd.read_csv(table)
    figure = Figure(figsize=(7, 4), layout="constrained")
    ax = figure.subplots()
    for (sweep, transition, setting), rows in frame.groupby(["sweep", "transition", "setting"]):
        label = f"{sweep} {transition} {setting} ({rows['replicates'].iloc[-1]} replicates)"
        ax.plot(rows["round"], rows["distance"].clip(upper=1e3), "o-", label=label)
    ax.axhline(1.0, color="k", linestyle="--", linewidth=1)
    ax.set(yscale="log", xlabel="round", ylabel="CI half-width / goal (1: met)")
    ax.set_xticks(sorted(frame["round"].unique()))
    ax.legend(fontsize="x-small")
    figure.savefig(out, dpi=120)
    if log is not None:
        Path(log).write_text(f"{out}: {len(frame)} rows of {table}\n", encoding="utf-8")
    return figure
