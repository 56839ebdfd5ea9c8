"""Universality of the Gaussian theory across table laws (docs/model.md, "Table laws", "A
universality study"; docs/data-contract.md, "Tables").

Each non-Gaussian law of a sweep's ``table`` axis is compared point by point with the
Gaussian cells on the same grid (its own sweep's ``gaussian`` law, else any Gaussian
sweep) on :data:`UNIVERSALITY_QUANTITIES`; its error is ``empirical - theory`` with the
Gaussian ``finite_vocab`` theory (its own theory for :data:`GENERAL_KINDS`, against the
Gaussian cells' own errors). "Within Monte-Carlo error" is a test that the law's cells
and the Gaussian cells agree: per point a Welch t test (a z test of two threshold
estimates; for a bound, whether the intervals overlap), combined per (law, quantity,
d) by Fisher's method and compared with ``FAMILY_ALPHA / m`` (Bonferroni over the law's
``m`` tests). Pure functions of tables; O(rows)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnrmt.analysis._common import replicate_mean_sem, tidy
from attnrmt.analysis.comparison import SPIKE_QUANTITIES, SUMMARY_QUANTITIES
from attnrmt.analysis.own_theta import GENERAL_KINDS
from attnrmt.contract import AXES, TABLE_AXIS

#: Quantities of the universality study, in report order.
UNIVERSALITY_QUANTITIES: tuple[str, ...] = ("bulk_ks", *SUMMARY_QUANTITIES)

#: Probability that a law following the Gaussian theory is called "differs" (Bonferroni
#: over its tests).
FAMILY_ALPHA = 0.01

#: Theory variant the errors are measured against.
REFERENCE_VARIANT = "finite_vocab"

#: Parameter columns that identify a grid point (``snr`` absent for thresholds); the
#: ``table`` axis is not one of them: it is the ``law`` compared.
POINT_COLUMNS: tuple[str, ...] = AXES

#: Columns of the per-point input rows (:func:`universality_inputs`).
INPUT_COLUMNS: tuple[str, ...] = (
    "sweep",
    "law",
    "kind",
    "parameter",
    "fourth_moment",
    "quantity",
    "empirical",
    "empirical_sem",
    "n",
    "low",
    "high",
    "theory",
    *POINT_COLUMNS,
)

#: The columns that name a law, first in universality.csv and universality_verdict.csv.
_LAW_COLUMNS = ("law", "sweep", "kind", "parameter", "fourth_moment")

#: Columns of universality.csv (:func:`universality_table`).
UNIVERSALITY_COLUMNS: tuple[str, ...] = (
    *_LAW_COLUMNS,
    "quantity",
    "d",
    "n_points",
    "mean_abs_error",
    "gaussian_mean_abs_error",
    "max_abs_z",
    "p_value",
    "alpha",
    "consistent",
)

#: Columns of universality_verdict.csv (:func:`universality_verdict`).
VERDICT_COLUMNS: tuple[str, ...] = (
    *_LAW_COLUMNS,
    "verdict",
    "at_largest_d",
    "differs",
    "family",
)

_PARAMETER = {"student_t": "nu", "sparse": "p"}


def sweep_laws(cells_attrs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{name: canonical spec}`` of a sweep's table laws, in the order of its ``table``
    axis, from its cells' attributes: the ``table`` entry of ``model_summary``
    (docs/data-contract.md, "Table laws"), or a store written when a sweep had one law
    (``table_name``, ``table_law``); ``{"gaussian": {"kind": "gaussian"}}`` for a sweep
    that sets none. O(laws)."""
    summary = json.loads(str(cells_attrs.get("model_summary", "{}")))
    if summary.get(TABLE_AXIS):
        return {str(name): dict(spec) for name, spec in summary[TABLE_AXIS].items()}
    if "table_name" in cells_attrs:
        return {str(cells_attrs["table_name"]): dict(json.loads(str(cells_attrs["table_law"])))}
    return {"gaussian": {"kind": "gaussian"}}


def _law_columns(name: str, law: Mapping[str, Any]) -> dict[str, Any]:
    from attnrmt.model import table_moments

    kind = str(law["kind"])
    parameter = law.get(_PARAMETER.get(kind, ""), np.nan)
    return {
        "law": name,
        "kind": kind,
        "parameter": float(parameter),
        "fourth_moment": float(table_moments(law)[1]),
    }


def _bulk_ks_rows(analysis: xr.Dataset) -> pd.DataFrame:
    """Replicate mean, standard error and count of ``bulk_ks`` per grid point."""
    if "bulk_ks" not in analysis or "replicate" not in analysis["bulk_ks"].dims:
        return pd.DataFrame()
    ks = analysis["bulk_ks"]
    mean, sem, n = replicate_mean_sem(ks)
    frame = xr.Dataset({"empirical": mean, "empirical_sem": sem, "n": n})
    rows = tidy(frame)
    rows["theory"] = 0.0
    return rows.assign(quantity="bulk_ks")


def universality_inputs(
    sweep: str,
    cells_attrs: Mapping[str, Any],
    comparison: pd.DataFrame,
    thresholds: pd.DataFrame,
    analysis: xr.Dataset,
) -> pd.DataFrame:
    """Per-point rows (:data:`INPUT_COLUMNS`) of one sweep for the universality comparison,
    from its ``comparison.csv`` and ``thresholds.csv`` rows and ``analysis.zarr``
    (``bulk_ks``); a row's ``law`` is its ``table`` coordinate (:func:`sweep_laws`), ``n`` the
    replicate count, ``low``/``high`` the threshold CI or bound. O(rows)."""
    laws = sweep_laws(cells_attrs)
    replicates = int(cells_attrs.get("replicates", 0))
    frames = []
    if not comparison.empty:
        rows = comparison[
            comparison["quantity"].isin(SPIKE_QUANTITIES)
            & (comparison["variant"] == REFERENCE_VARIANT)
        ]
        frames.append(rows.assign(n=replicates))
    if not thresholds.empty:
        rows = thresholds[thresholds["finite_size"] == "none"]
        renamed = {"estimate": "empirical", "ci_low": "low", "ci_high": "high"}
        renamed[f"theory_{REFERENCE_VARIANT}"] = "theory"
        point = [c for c in (*POINT_COLUMNS, TABLE_AXIS) if c in rows]
        part = rows[[*renamed, *point]].rename(columns=renamed)
        frames.append(
            part.assign(quantity="threshold_" + rows["transition"].astype(str), n=replicates)
        )
    frames.append(_bulk_ks_rows(analysis))
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(INPUT_COLUMNS))
    out = pd.concat(frames, ignore_index=True)
    out["sweep"] = sweep
    if TABLE_AXIS in out:
        names = out[TABLE_AXIS].astype(str)
    else:  # a sweep without a table axis: its one law
        names = pd.Series(next(iter(laws)), index=out.index)
    columns = pd.DataFrame([_law_columns(name, laws[name]) for name in laws])
    out = out.drop(columns=[TABLE_AXIS], errors="ignore").assign(law=names.to_numpy())
    out = out.merge(columns, on="law", how="left")
    for column in INPUT_COLUMNS:
        if column not in out:
            out[column] = np.nan
    return out.loc[:, list(INPUT_COLUMNS)]


def welch_p_values(
    mean_a: Any, sem_a: Any, n_a: Any, mean_b: Any, sem_b: Any, n_b: Any
) -> np.ndarray:
    """Two-sided p-values of Welch's t test that two means are equal, from the means,
    standard errors and sample sizes (Welch-Satterthwaite degrees of freedom); NaN where an
    input is missing or both errors are 0. O(points)."""
    from scipy import stats

    mean_a, sem_a, n_a, mean_b, sem_b, n_b = (
        np.asarray(x, dtype=float) for x in (mean_a, sem_a, n_a, mean_b, sem_b, n_b)
    )
    va, vb = sem_a**2, sem_b**2
    se = np.sqrt(va + vb)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (mean_a - mean_b) / se
        df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    p = 2.0 * stats.t.sf(np.abs(t), df)
    return np.where(np.isfinite(t) & (se > 0) & np.isfinite(df), p, np.nan)


def threshold_p_values(
    law: pd.DataFrame, gaussian: pd.DataFrame, ci_level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """``(p, z)`` of the threshold comparison per matched row: a two-sided z test of the two
    estimates with standard errors ``(high - low) / (2 z_level)`` where both are estimated;
    where one is only a bound, ``p`` is 1 if the intervals ``[low, high]`` overlap and 0
    otherwise (``z`` NaN). O(rows)."""
    from scipy import stats

    z_level = float(stats.norm.ppf(0.5 + ci_level / 2.0))
    est_l, est_g = law["empirical"].to_numpy(float), gaussian["empirical"].to_numpy(float)
    low_l, high_l = law["low"].to_numpy(float), law["high"].to_numpy(float)
    low_g, high_g = gaussian["low"].to_numpy(float), gaussian["high"].to_numpy(float)
    with np.errstate(invalid="ignore"):
        se = np.sqrt(
            ((high_l - low_l) / (2 * z_level)) ** 2 + ((high_g - low_g) / (2 * z_level)) ** 2
        )
        z = (est_l - est_g) / se
    estimated = np.isfinite(z) & (se > 0)
    overlap = (low_l <= high_g) & (low_g <= high_l)
    p = np.where(estimated, 2.0 * stats.norm.sf(np.abs(np.where(estimated, z, 0.0))), overlap)
    return p.astype(float), np.where(estimated, z, np.nan)


def fisher_combined(p_values: np.ndarray) -> float:
    """Fisher's combined p-value of independent tests, ``chi2.sf(-2 sum log p, 2 k)``;
    NaN entries are left out, NaN when none is left. O(k)."""
    from scipy import stats

    p = np.asarray(p_values, dtype=float)
    p = p[np.isfinite(p)]
    if p.size == 0:
        return math.nan
    with np.errstate(divide="ignore"):  # a p of 0 (a bound outside the interval): 0
        statistic = -2.0 * np.sum(np.log(np.clip(p, 0.0, 1.0)))
    return float(stats.chi2.sf(statistic, 2 * p.size))


def _match(law: pd.DataFrame, gaussian: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    return law.merge(
        gaussian.drop_duplicates(keys), on=list(keys), how="inner", suffixes=("", "_g")
    )


def universality_table(
    inputs: pd.DataFrame, family_alpha: float = FAMILY_ALPHA, ci_level: float = 0.95
) -> pd.DataFrame:
    """Each non-Gaussian law against the Gaussian cells per (law, quantity, d)
    (:data:`UNIVERSALITY_COLUMNS`; module docstring): mean absolute errors of both against
    the Gaussian theory, Fisher's ``p_value``, the Bonferroni ``alpha`` and ``consistent``
    (``p_value >= alpha``); no rows for a law without a Gaussian sweep on its grid. O(rows)."""
    if inputs.empty or not (inputs["kind"] == "gaussian").any():
        return pd.DataFrame(columns=list(UNIVERSALITY_COLUMNS))
    gaussian_rows = inputs[inputs["kind"] == "gaussian"]
    rows = []
    laws = inputs[inputs["kind"] != "gaussian"].groupby(["sweep", "law"], sort=False)
    for (sweep, _), law_rows in laws:
        own = gaussian_rows[gaussian_rows["sweep"] == sweep]  # its own sweep's, if any
        gaussian = own if not own.empty else gaussian_rows
        found = []
        for quantity in UNIVERSALITY_QUANTITIES:
            part = law_rows[law_rows["quantity"] == quantity]
            if part.empty:
                continue
            keys = ["quantity", *[c for c in POINT_COLUMNS if part[c].notna().any()]]
            matched = _match(part, gaussian[gaussian["quantity"] == quantity], keys)
            if part["kind"].iloc[0] in GENERAL_KINDS:  # its own theory: compare the errors
                matched = matched[np.isfinite(matched["theory"].to_numpy(float))]
                off = matched["theory"] - matched["theory_g"]
                matched = matched.assign(
                    **{c: matched[c] - off for c in ("empirical", "low", "high")}
                )
            for d, at_d in matched.groupby("d", sort=True):
                theory = at_d["theory_g"].to_numpy(float)
                error = at_d["empirical"].to_numpy(float) - theory
                gaussian_error = at_d["empirical_g"].to_numpy(float) - theory
                if quantity.startswith("threshold_"):
                    gaussian_part = at_d[[c for c in at_d.columns if str(c).endswith("_g")]]
                    p, z = threshold_p_values(
                        at_d, gaussian_part.rename(columns=lambda c: str(c)[:-2]), ci_level
                    )
                else:
                    columns = ("empirical", "empirical_sem", "n")
                    m, sem, n = (at_d[c].to_numpy(float) for c in columns)
                    m_g, sem_g, n_g = (at_d[f"{c}_g"].to_numpy(float) for c in columns)
                    p = welch_p_values(m, sem, n, m_g, sem_g, n_g)
                    with np.errstate(invalid="ignore", divide="ignore"):
                        z = (m - m_g) / np.sqrt(sem**2 + sem_g**2)
                found.append(
                    {
                        **at_d.iloc[0][list(_LAW_COLUMNS)].to_dict(),
                        "quantity": quantity,
                        "d": d,
                        "n_points": len(at_d),
                        "mean_abs_error": _finite(np.abs(error), np.mean),
                        "gaussian_mean_abs_error": _finite(np.abs(gaussian_error), np.mean),
                        "max_abs_z": _finite(np.abs(z), np.max),
                        "p_value": fisher_combined(p),
                    }
                )
        tested = [row for row in found if math.isfinite(row["p_value"])]
        for row in found:  # a test without a p-value (no spread measured) is not counted
            row["alpha"] = family_alpha / max(1, len(tested))
            row["consistent"] = (
                bool(row["p_value"] >= row["alpha"]) if math.isfinite(row["p_value"]) else None
            )
        rows += found
    return pd.DataFrame(rows, columns=list(UNIVERSALITY_COLUMNS))


def _finite(values: np.ndarray, statistic: Any) -> float:
    """``statistic`` of the finite ``values``; NaN when none is. O(n)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return float(statistic(values)) if values.size else math.nan


def _family_sentence(kind: str, laws: pd.DataFrame) -> str:
    """``student_t (nu): within Monte-Carlo error for nu >= 10; differs from nu <= 5``."""
    name = _PARAMETER[kind]
    # order from the mildest law (Gaussian-like end) to the most extreme one
    ordered = laws.sort_values("parameter", ascending=False)
    holds = ordered["verdict"].str.startswith("within").to_numpy()
    values = ordered["parameter"].to_numpy(float)
    if holds.all():
        return f"{kind} ({name}): within Monte-Carlo error for every {name} down to {values[-1]:g}"
    first_break = int(np.argmax(~holds))
    text = f"{kind} ({name}): differs from {name} <= {values[first_break]:g}"
    if first_break > 0:
        text = (
            f"{kind} ({name}): within Monte-Carlo error for {name} >= "
            f"{values[first_break - 1]:g}; differs from {name} <= {values[first_break]:g}"
        )
    later = zip(values[first_break:], holds[first_break:], strict=True)
    within = [f"{name}={value:g} within" for value, held in later if held]
    return text + (f" (not monotone: {', '.join(within)})" if within else "")


def _failing_test(quantity: str, d: float, p_value: float, max_z: float) -> str:
    """``sample_outlier@d=800 (p=1e-05, max|z|=4.2)``, or the bound's note."""
    if math.isfinite(max_z):
        return f"{quantity}@d={int(d)} (p={p_value:.2g}, max|z|={max_z:.2g})"
    return f"{quantity}@d={int(d)} (a bound that excludes the Gaussian threshold)"


def universality_verdict(table: pd.DataFrame) -> pd.DataFrame:
    """One verdict per law (:data:`VERDICT_COLUMNS`) from :func:`universality_table`: within
    Monte-Carlo error of the Gaussian theory when every test is consistent, else differs;
    the quantities that differ at the largest ``d``, the failing tests (smallest ``d``
    first, ``|z|`` max), and for ``student_t`` / ``sparse`` from which parameter on the laws
    of that kind differ. O(rows)."""
    if table.empty:
        return pd.DataFrame(columns=list(VERDICT_COLUMNS))
    rows = []
    for _, part in table.groupby(["sweep", "law"], sort=False):
        failing = part[part["consistent"].eq(False)].sort_values(["d", "quantity"])
        tests = failing[["quantity", "d", "p_value", "max_abs_z"]].itertuples(index=False)
        differs = "; ".join(
            _failing_test(str(q), float(d), float(p), float(z)) for q, d, p, z in tests
        )
        largest = float(part["d"].max())
        at_largest = sorted(failing.loc[failing["d"] == largest, "quantity"].astype(str))
        rows.append(
            {
                **part.iloc[0][list(_LAW_COLUMNS)].to_dict(),
                "verdict": (
                    "within Monte-Carlo error of the Gaussian theory"
                    if failing.empty
                    else "differs from the Gaussian theory"
                ),
                "at_largest_d": f"d={int(largest)}: "
                + (", ".join(dict.fromkeys(at_largest)) if at_largest else "within"),
                "differs": differs,
                "family": "",
            }
        )
    out = pd.DataFrame(rows, columns=list(VERDICT_COLUMNS))
    for kind in _PARAMETER:
        mask = out["kind"] == kind
        if mask.any():
            out.loc[mask, "family"] = _family_sentence(kind, out[mask])
    return out
