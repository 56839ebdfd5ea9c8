"""Entry points of the analysis rules, one call per rule body: :func:`analyze_sweep`
(``analysis.zarr``), :func:`write_sweep_tables` (``<sweep>/tables/*.csv``),
:func:`write_tables` (``results/<run>/*.csv``); the figures:
:mod:`attnrmt.analysis.figures` (docs/architecture.md, "Only what changed is redrawn")."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnrmt.analysis._common import BULK_SKIPPED_NOTE, stored_spectrum, tidy
from attnrmt.analysis.attention import causal_verdict, causal_weights_table
from attnrmt.analysis.bulk_fit import bulk_fit
from attnrmt.analysis.centring import centring_table
from attnrmt.analysis.classes import (
    classes_of,
    spike_comparison,
    spike_threshold_dataset,
    spike_thresholds,
)
from attnrmt.analysis.comparison import (
    comparison_table,
    complete_theory,
    thresholds_table,
    variant_summary,
)
from attnrmt.analysis.pooling import (
    downstream_ranking,
    downstream_table,
    ordering_table,
    pooling_table,
)
from attnrmt.analysis.thresholds import estimate_thresholds, finite_size_thresholds
from attnrmt.analysis.universality import (
    universality_inputs,
    universality_table,
    universality_verdict,
)
from attnrmt.contract import PROVENANCE_FIELDS, SWEEP_TABLES, TABLES, with_variable_attrs

#: Bound codes of ``threshold_bound`` in analysis.zarr (CF flag_values / flag_meanings).
BOUND_CODES = ("none", "below", "above", "interval", "failed", "hidden")


def settings_sha256(settings: Mapping[str, Any] | None) -> str:
    """SHA-256 of the complete analysis settings (canonical JSON), stored with
    ``analysis.zarr`` so a rerun sees a change of them without Snakemake's metadata
    (docs/data-contract.md, "Integrity"). O(settings)."""
    import hashlib
    import json

    text = json.dumps(dict(settings or {}), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def ci_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of every replicate CI (:func:`attnrmt.analysis._common.mean_ci`)
    from a complete ``analysis:`` block: ``level``, ``n_boot``, ``seed``."""
    return {
        "level": float(settings["ci_level"]),
        "n_boot": int(settings["bootstrap"]),
        "seed": int(settings["seed"]),
    }


#: Variables of ``cells.zarr`` that :func:`open_store` leaves lazy (Dask): the spectra
#: (O(cells x d)) and the per-cell bookkeeping no analysis reads (``cell_key`` alone is
#: ~120 bytes per cell as Python strings; ``docs/data-contract.md``, "cells.zarr").
LAZY_CELL_VARIABLES = ("eigenvalues", "cell_key", "compute_seconds", *PROVENANCE_FIELDS)


def open_store(path: str | os.PathLike[str]) -> xr.Dataset:
    """Open a store eagerly, after the integrity check of a store with a digest record
    (``DamagedStore``; docs/data-contract.md, "Integrity"). ``cells.zarr`` opens through
    :func:`attnrmt.sweep.store.cell_table.reader.open_cells` with
    :data:`LAZY_CELL_VARIABLES` left lazy (read where an analysis uses them); other stores
    with consolidated metadata when present. O(cells)."""
    from attnrmt.sweep.store.integrity import DamagedStore, damage, damaged_message, digest_path

    if digest_path(path).is_file() and (problems := damage(path)):
        raise DamagedStore(damaged_message(problems))
    if Path(path).name == "cells.zarr":
        from attnrmt.sweep.store.cell_table.reader import open_cells

        cells = open_cells(path, per_setting=LAZY_CELL_VARIABLES)  # one read per column
        lazy = [name for name in LAZY_CELL_VARIABLES if name in cells.variables]
        return cells.drop_vars(lazy).load().assign({name: cells[name] for name in lazy})
    from attnrmt.sweep.store.grid import has_consolidated_metadata

    return xr.open_zarr(path, consolidated=has_consolidated_metadata(path)).load()


def analysis_dataset(
    cells: xr.Dataset, theory: xr.Dataset | None, settings: Mapping[str, Any]
) -> xr.Dataset:
    """Bulk fit + thresholds + finite-size fit of one sweep (``analysis.zarr``): the variables of
    :func:`attnrmt.analysis.bulk_fit.bulk_fit`,
    :func:`attnrmt.analysis.thresholds.estimate_thresholds` (``threshold_bound`` as int8 flags,
    :data:`BOUND_CODES`) and, with several ``d``,
    :func:`attnrmt.analysis.thresholds.finite_size_thresholds`. ``theory`` may be None; ``settings``
    is the config's complete ``analysis:`` block (validation fills its defaults; a library call
    fills a partial one with ``attnrmt.sweep.spec.schema.with_defaults``). O(cells x n_boot)."""
    s = settings
    spectrum = stored_spectrum(cells)
    # A top sweep has no bulk: the bulk variables stay (NaN) so that every reader finds
    # them, and the note says why.
    bulk_input = (
        cells if spectrum == "full" else cells.assign(eigenvalues=cells["eigenvalues"].where(False))
    )
    bulk = bulk_fit(bulk_input, margin=float(s["bulk_margin"]))
    thr = estimate_thresholds(cells, margin=float(s["threshold_margin"]), **ci_settings(s))
    fss = finite_size_thresholds(thr, level=float(s["ci_level"]))
    bound = thr["threshold_bound"]
    codes = np.zeros(bound.shape, dtype=np.int8)
    for code, name in enumerate(BOUND_CODES):
        codes[np.asarray(bound.values) == name] = code
    thr["threshold_bound"] = bound.copy(data=codes)
    thr["threshold_bound"].attrs = {
        "long_name": "is the threshold a bound",
        "flag_values": list(range(len(BOUND_CODES))),
        "flag_meanings": " ".join(BOUND_CODES),
    }
    parts = [bulk, thr] if fss is None else [bulk, thr, fss]
    if classes_of(cells) is not None and theory is not None and "spike_theta" in theory:
        # K classes: each successive spike threshold (attnrmt.analysis.classes)
        spikes = spike_thresholds(
            "", cells, theory, margin=float(s["threshold_margin"]), **ci_settings(s)
        )
        parts.append(spike_threshold_dataset(spikes, BOUND_CODES))
    out = xr.merge(parts, combine_attrs="drop_conflicts", join="outer")
    out.attrs.update(
        {
            "title": "attnrmt analysis",
            "bulk_margin": float(s["bulk_margin"]),
            "threshold_margin": float(s["threshold_margin"]),
            "bootstrap": int(s["bootstrap"]),
            "ci_level": float(s["ci_level"]),
            "bootstrap_seed": int(s["seed"]),
            "estimator": (
                "theta inversion + linear extrapolation (docs/thresholds.md); several d:"
                " one slope shared across d unless the per-d slopes differ"
            ),
            "spectrum": spectrum,
            "analysis_settings_sha256": settings_sha256(settings),
        }
    )
    if spectrum == "top":
        out.attrs["bulk_skipped"] = BULK_SKIPPED_NOTE
    for key in ("config_sha256", "root_seed", "attnrmt_version"):
        if key in cells.attrs:
            out.attrs[key] = cells.attrs[key]
    return with_variable_attrs(objectify_strings(out))


def objectify_strings(ds: xr.Dataset) -> xr.Dataset:
    """Fixed-width unicode coordinates/variables -> object dtype (Zarr v3 variable strings,
    as in ``cells.zarr``; fixed-width UTF-32 has no stable Zarr v3 spec)."""
    updates = {name: ds[name].astype(object) for name in ds.variables if ds[name].dtype.kind == "U"}
    return ds.assign_coords({k: v for k, v in updates.items() if k in ds.coords}).assign(
        {k: v for k, v in updates.items() if k not in ds.coords}
    )


def decode_bounds(analysis: xr.Dataset) -> xr.Dataset:
    """``threshold_bound`` back to strings (inverse of the int8 coding)."""
    bound = analysis["threshold_bound"]
    if np.issubdtype(bound.dtype, np.integer):
        names = np.asarray(BOUND_CODES, dtype=object)[np.asarray(bound.values, dtype=int)]
        analysis = analysis.assign(threshold_bound=bound.copy(data=names.astype(str)))
    return analysis


def append_log(log_path: str | os.PathLike[str] | None, line: str) -> None:
    """Append ``line`` to the rule's log file (nothing when ``log_path`` is None)."""
    if log_path is None:
        return
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def record(
    run_dir: str | os.PathLike[str],
    paths: Iterable[str | os.PathLike[str]],
    log_path: str | os.PathLike[str] | None,
    line: str,
) -> None:
    """Record ``paths`` as the run's products (docs/data-contract.md, "Integrity") and
    append ``line`` to the rule's log. O(files)."""
    from attnrmt.sweep.store.integrity import record_products

    record_products(run_dir, paths)
    append_log(log_path, line)


def open_sweep(
    run_dir: str | os.PathLike[str], sweep: str
) -> tuple[Path, xr.Dataset, xr.Dataset | None, xr.Dataset]:
    """One sweep's tables folder and its stores ``cells``, ``theory`` (None when absent),
    ``analysis`` (``<run_dir>/<sweep>/*.zarr``, each by :func:`open_store`). O(cells)."""
    from attnrmt.sweep.store.layout import RunLayout

    stores = RunLayout(run_dir).sweep(sweep)
    theory = open_store(stores.theory) if stores.theory.exists() else None
    return stores.root / "tables", open_store(stores.cells), theory, open_store(stores.analysis)


def analyze_sweep(
    cells_path: str | os.PathLike[str],
    theory_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    settings: Mapping[str, Any],
    log_path: str | os.PathLike[str] | None = None,
) -> Path:
    """Rule ``analyze_sweep``: write ``analysis.zarr`` of one sweep (single writer, atomic)."""
    from attnrmt.sweep.store import write_zarr_atomically

    started = time.perf_counter()
    cells = open_store(cells_path)
    theory = open_store(theory_path)
    analysis = analysis_dataset(cells, theory, settings)
    target = write_zarr_atomically(analysis, output_path)
    append_log(log_path, f"{target}: analysed in {time.perf_counter() - started:.2f} s")
    return target


def bulk_table(sweep: str, analysis: xr.Dataset) -> pd.DataFrame:
    """Replicate-mean bulk fit per grid point (``bulk.csv``); for a ``spectrum: top``
    sweep one row with the note why it has none."""
    if "bulk_skipped" in analysis.attrs:
        return pd.DataFrame({"sweep": [sweep], "note": [analysis.attrs["bulk_skipped"]]})
    names = [n for n in analysis.data_vars if str(n).startswith("bulk_")]
    ds = analysis[names]
    ds = ds.mean("replicate") if "replicate" in ds.dims else ds
    frame = tidy(ds)
    frame.insert(0, "sweep", sweep)
    return frame


def sweep_tables(
    sweep: str,
    cells: xr.Dataset,
    theory: xr.Dataset | None,
    analysis: xr.Dataset,
    settings: Mapping[str, Any],
    weight_models: Mapping[str, Any] | None = None,
) -> dict[str, pd.DataFrame]:
    """All tables of :data:`TABLES` for one sweep (pure function of the three datasets and
    the complete ``analysis:`` block)."""
    ci = ci_settings(settings)
    if classes_of(cells) is not None:  # K classes: their own tables
        return classes_sweep_tables(sweep, cells, theory, analysis, settings)
    theory = complete_theory(theory, cells)
    analysis = decode_bounds(analysis)
    comparison = comparison_table(sweep, cells, theory, analysis)
    thresholds = thresholds_table(sweep, cells, theory, analysis)
    causal = causal_weights_table(sweep, cells, weight_models or {}, **ci)
    empty = pd.DataFrame()
    return {
        "classes_thresholds": empty,
        "classes_spikes": empty,
        "comparison": comparison,
        "thresholds": thresholds,
        "summary": variant_summary(comparison, thresholds),
        "bulk": bulk_table(sweep, analysis),
        **pooling_tables(sweep, cells, settings),
        "causal": causal,
        "causal_verdict": causal_verdict(causal),
        "centring": centring_table(sweep, cells, theory),
    }


def classes_sweep_tables(
    sweep: str,
    cells: xr.Dataset,
    theory: xr.Dataset | None,
    analysis: xr.Dataset,
    settings: Mapping[str, Any],
) -> dict[str, pd.DataFrame]:
    """The tables of a K-class sweep (:mod:`attnrmt.analysis.classes`): successive spike
    thresholds and per-spike comparisons against its K-class ``theory.zarr``, the bulk
    fit, pooling and the (multi-class) downstream readout; the two-class theory tables
    stay empty (their predictions do not describe K classes)."""
    if theory is None or "spike_theta" not in theory:
        raise ValueError(f"sweep {sweep!r}: a K-class sweep needs its K-class theory.zarr")
    ci = ci_settings(settings)
    tables = {name: pd.DataFrame() for name in TABLES}
    margin = float(settings["threshold_margin"])
    tables["classes_thresholds"] = spike_thresholds(sweep, cells, theory, margin=margin, **ci)
    tables["classes_spikes"] = spike_comparison(sweep, cells, theory)
    return {**tables, "bulk": bulk_table(sweep, analysis), **pooling_tables(sweep, cells, settings)}


def pooling_tables(
    sweep: str, cells: xr.Dataset, settings: Mapping[str, Any]
) -> dict[str, pd.DataFrame]:
    """``pooling``, ``pooling_order``, ``downstream`` and ``downstream_ranking`` of one
    sweep (:mod:`attnrmt.analysis.pooling`; two-class and K-class sweeps alike) from a
    complete ``analysis:`` block. O(points x n_boot x replicates)."""
    ci = ci_settings(settings)
    pool = pooling_table(sweep, cells, **ci)
    down = downstream_table(sweep, cells, **ci)
    return {
        "pooling": pool,
        "pooling_order": ordering_table(pool, list(settings["pooling_order"])),
        "downstream": down,
        "downstream_ranking": downstream_ranking(down),
    }


def across_sweep_tables(
    law_inputs: Sequence[pd.DataFrame], settings: Mapping[str, Any]
) -> dict[str, pd.DataFrame]:
    """The tables made from several sweeps at once: ``universality`` and
    ``universality_verdict`` (:mod:`attnrmt.analysis.universality`; empty unless a sweep
    has a non-Gaussian table law and a Gaussian sweep shares its grid). O(rows)."""
    frames = [frame for frame in law_inputs if not frame.empty]
    inputs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    table = (
        universality_table(inputs, ci_level=float(settings["ci_level"]))
        if not inputs.empty
        else pd.DataFrame()
    )
    return {"universality": table, "universality_verdict": universality_verdict(table)}


def placeholder_note(name: str) -> str:
    """The one row (column ``note``) of a table the run has no data for: it is still
    written, so every run has the same files (Snakemake's outputs do not depend on what the
    sweeps hold), and says so; the report and the end summary leave it out. O(1)."""
    return (
        f"no {name} data in this run: no sweep of the config feeds this table "
        "(a placeholder; docs/data-contract.md, Tables)"
    )


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A table CSV; an empty file (a table the sweep has no rows of) is an empty frame."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def write_sweep_tables(
    run_dir: str | os.PathLike[str],
    sweep: str,
    outputs: Mapping[str, str | os.PathLike[str]],
    settings: Mapping[str, Any],
    weight_models: Mapping[str, Any] | None = None,
    log_path: str | os.PathLike[str] | None = None,
) -> None:
    """Rule ``sweep_tables``: one sweep's tables (``SWEEP_TABLES`` of :mod:`attnrmt.contract`,
    keys of ``outputs``) from its stores, at full precision (the run-wide tables and the
    sweep's figures read them). O(cells of the sweep)."""
    started = time.perf_counter()
    _, cells, theory, analysis = open_sweep(run_dir, sweep)
    tables = sweep_tables(sweep, cells, theory, analysis, settings, weight_models)
    tables["universality_inputs"] = universality_inputs(
        sweep, cells.attrs, tables["comparison"], tables["thresholds"], analysis
    )
    for name, path in outputs.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tables[name].to_csv(path, index=False)
    seconds = time.perf_counter() - started
    record(run_dir, outputs.values(), log_path, f"tables of {sweep} in {seconds:.2f} s")


def write_tables(
    run_dir: str | os.PathLike[str],
    sweeps: Sequence[str],
    outputs: Mapping[str, str | os.PathLike[str]],
    settings: Mapping[str, Any],
    log_path: str | os.PathLike[str] | None = None,
) -> dict[str, pd.DataFrame]:
    """Rule ``analysis_tables``: the sweeps' tables (``<run_dir>/<sweep>/tables/<name>.csv``)
    concatenated into ``outputs`` (table name -> CSV path, keys of :data:`TABLES`), plus the
    tables made from several sweeps at once (:func:`across_sweep_tables`); a table without
    data is written as a placeholder (:func:`placeholder_note`). O(rows)."""
    from attnrmt.sweep.store.layout import RunLayout

    started = time.perf_counter()
    run = RunLayout(run_dir)
    tables = {
        name: [read_table(run.sweep(sweep).root / "tables" / f"{name}.csv") for sweep in sweeps]
        for name in SWEEP_TABLES
    }
    for name, frame in across_sweep_tables(tables.pop("universality_inputs"), settings).items():
        tables[name] = [frame]
    result = {}
    for name, path in outputs.items():
        frames = [frame for frame in tables[name] if not frame.empty]
        frame = (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame({"note": [placeholder_note(name)]})
        )
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False, float_format="%.6g")
        result[name] = frame
    seconds = time.perf_counter() - started
    record(
        run_dir, outputs.values(), log_path, f"tables for {len(sweeps)} sweeps in {seconds:.2f} s"
    )
    return result
