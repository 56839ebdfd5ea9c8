"""Analysis entry points: analysis.zarr round trip, CSV tables, figures (files exist)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnrmt.analysis.figures import figure_pooling, make_figures, make_run_figures
from attnrmt.analysis.pipeline import (
    BOUND_CODES,
    analysis_dataset,
    analyze_sweep,
    decode_bounds,
    settings_sha256,
    sweep_tables,
    write_sweep_tables,
    write_tables,
)
from attnrmt.contract import FIGURES, SWEEP_TABLES, TABLES
from attnrmt.sweep.spec.schema import with_defaults
from attnrmt.sweep.store import write_zarr_atomically
from tests.analysis.synthetic import make_synthetic

WEIGHT_MODELS = {
    "att": {"kind": "causal_attention", "tau": 1.0},
    "c1": {"kind": "causal_limit", "tau": 1.0},
}
SETTINGS = with_defaults({"bootstrap": 30, "pooling_order": ["optimal", "c1", "mean"]}, "analysis")


SPECS = {
    "transition": dict(
        d=(60, 120),
        snr=tuple(np.linspace(0, 3, 7)),
        positional={"p4": {"kind": "prefix", "L": 4}},
        weights={"mean": "mean", "optimal": "optimal", "c1": WEIGHT_MODELS["c1"]},
    ),
    "bulk": dict(d=(80,), delta=(0.5, 2.0), gamma=(0.5, 2.0), snr=(1.0,)),
    "causal": dict(
        d=(40, 80),
        weights={"att": WEIGHT_MODELS["att"]},
        positional={"lab": {"kind": "label", "rho0": 0.8, "L": 4}},
        snr=(1.0,),
        centered=(True, False),
    ),
}


def fail_cells(cells: xr.Dataset, where: dict[str, int]) -> xr.Dataset:
    """``cells`` with the cells at ``where`` (positions) as gather leaves failed ones:
    NaN floats, -1 ints, empty keys, in every variable that has all of ``where``'s dims."""
    cells = cells.copy(deep=True)
    for variable in cells.data_vars.values():
        if not set(where) <= set(variable.dims):
            continue
        absent = {"f": np.nan, "i": -1}.get(variable.dtype.kind, "")
        variable[{dim: where[dim] for dim in where}] = absent
    return cells


def write_synthetic_run(root: Path, holes: dict[str, int] | None = None) -> Path:
    """Synthetic cells/theory of :data:`SPECS` under ``root`` (with failed cells at
    ``holes`` in every sweep that has those dims), analysed and tabulated as the rules do."""
    for name, spec in SPECS.items():
        cells, theory = make_synthetic(replicates=2, **spec)
        if holes and set(holes) <= set(cells.dims):
            cells = fail_cells(cells, holes)
        write_zarr_atomically(cells, root / name / "cells.zarr")
        write_zarr_atomically(theory, root / name / "theory.zarr")
        analyze_sweep(
            root / name / "cells.zarr",
            root / name / "theory.zarr",
            root / name / "analysis.zarr",
            SETTINGS,
            root / "logs" / f"{name}.log",
        )
        tables = {n: root / name / "tables" / f"{n}.csv" for n in SWEEP_TABLES}
        write_sweep_tables(root, name, tables, SETTINGS, WEIGHT_MODELS)
    write_tables(root, list(SPECS), {n: root / f"{n}.csv" for n in TABLES}, SETTINGS)
    return root


def draw_figures(root: Path) -> list[Path]:
    """Every sweep's figures and the run's, as the figure rules draw them."""
    log = root / "logs" / "figures.log"
    paths = make_run_figures(root, root / "figures", SETTINGS, log)
    for name in SPECS:
        paths += make_figures(root, name, root / name / "figures", SETTINGS, WEIGHT_MODELS, log)
    return paths


@pytest.fixture(scope="module")
def synthetic_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic results/<run> with sweeps covering every analysis item."""
    return write_synthetic_run(tmp_path_factory.mktemp("results") / "synthetic")


@pytest.mark.parametrize(
    "holes",
    [
        {"d": 0, "snr": -1},  # the highest snr of the smallest d (a failed block)
        {"d": 0, "replicate": 0},  # one replicate of every cell at the smallest d
        {"weights": 0},  # every cell of one weights model (the whole causal sweep)
    ],
    ids=["block", "replicate", "model"],
)
def test_failed_cells_leave_holes_not_errors(tmp_path: Path, holes: dict[str, int]) -> None:
    """What a ``skip_failed`` run analyses: every table and figure is still made."""
    root = write_synthetic_run(tmp_path / "holes", holes)
    cells = xr.open_zarr(root / "transition" / "cells.zarr")
    assert cells["eigenvalues"].isnull().all("eig").any()  # the holes are there
    for name in TABLES:
        assert (root / f"{name}.csv").is_file(), name
    paths = draw_figures(root)
    assert {path.stem for path in paths} == set(FIGURES)
    # the transition thresholds still come from the lines that finished
    thresholds = pd.read_csv(root / "thresholds.csv")
    assert thresholds.loc[thresholds["sweep"] == "transition", "estimate"].notna().any()


def test_analysis_store_round_trip(synthetic_run_dir: Path) -> None:
    stored = xr.open_zarr(synthetic_run_dir / "transition" / "analysis.zarr").load()
    assert np.issubdtype(stored["threshold_bound"].dtype, np.integer)
    assert stored["threshold_bound"].attrs["flag_meanings"].split() == list(BOUND_CODES)
    assert {"bulk_ks", "threshold_estimate", "fss_limit", "theta_hat"} <= set(stored)
    decoded = decode_bounds(stored)
    assert set(np.unique(decoded["threshold_bound"].values)) <= set(BOUND_CODES)
    cells = xr.open_zarr(synthetic_run_dir / "transition" / "cells.zarr").load()
    theory = xr.open_zarr(synthetic_run_dir / "transition" / "theory.zarr").load()
    again = analysis_dataset(cells, theory, SETTINGS)
    xr.testing.assert_allclose(again["threshold_extrapolated"], stored["threshold_extrapolated"])
    assert (synthetic_run_dir / "logs" / "transition.log").read_text().strip()


def test_tables_have_the_contract_columns(synthetic_run_dir: Path) -> None:
    for name in TABLES:
        assert (synthetic_run_dir / f"{name}.csv").stat().st_size > 0
    comparison = pd.read_csv(synthetic_run_dir / "comparison.csv")
    assert list(comparison.columns[:8]) == [
        "sweep",
        "quantity",
        "variant",
        "empirical",
        "empirical_sem",
        "theory",
        "abs_error",
        "rel_error",
    ]
    thresholds = pd.read_csv(synthetic_run_dir / "thresholds.csv")
    for column in (
        "sweep",
        "transition",
        "estimate",
        "ci_low",
        "ci_high",
        "theory_paper",
        "theory_finite_vocab",
        "d",
        "delta",
        "gamma",
        "T",
        "positional",
        "weights",
        "centered",
    ):
        assert column in thresholds
    assert set(comparison["sweep"]) == {"transition", "bulk", "causal"}
    assert not pd.read_csv(synthetic_run_dir / "causal.csv").empty
    assert not pd.read_csv(synthetic_run_dir / "downstream.csv").empty
    assert not pd.read_csv(synthetic_run_dir / "centring.csv").empty


@pytest.mark.slow
def test_make_figures_writes_every_figure(synthetic_run_dir: Path) -> None:
    paths = draw_figures(synthetic_run_dir)
    for name in FIGURES:
        for fmt in ("png", "pdf"):
            folder = "figures" if name == "universality" else "transition/figures"
            path = synthetic_run_dir / folder / f"{name}.{fmt}"
            assert path in paths
            assert path.stat().st_size > 1000


def test_figures_without_data_are_placeholders(tmp_path: Path) -> None:
    """A placeholder's PNG says so (the report leaves it out); a drawn figure's does not."""
    from attnrmt.analysis.figures import save
    from attnrmt.contract import PLACEHOLDER_FIGURE
    from attnrmt.workflow.hooks import file_contains

    save(figure_pooling(pd.DataFrame()), tmp_path / "empty", ["png", "pdf"])
    assert file_contains(str(tmp_path / "empty.png"), PLACEHOLDER_FIGURE.encode())
    assert not file_contains(str(tmp_path / "empty.pdf"), PLACEHOLDER_FIGURE.encode())
    pooling = pd.DataFrame(
        {"sweep": "s", "positional": "p", "weights": "mean", "d": 20, "snr": 1.0}
        | {"alpha_over_kappa": 1.0, "recovery": 0.5}
        | {"recovery_ci_low": 0.4, "recovery_ci_high": 0.6},
        index=[0],
    )
    save(figure_pooling(pooling), tmp_path / "drawn", ["png"])
    assert not file_contains(str(tmp_path / "drawn.png"), PLACEHOLDER_FIGURE.encode())
    assert not file_contains(str(tmp_path / "absent.png"), PLACEHOLDER_FIGURE.encode())


#: Every confidence interval the analysis reports: (table or "analysis", columns).
CI_COLUMNS = {
    "pooling": ("recovery_ci_low", "recovery_ci_high"),
    "downstream": ("ci_low", "ci_high"),
    "causal": ("ci_low", "ci_high"),
    "thresholds": ("ci_low", "ci_high"),
}


@pytest.mark.slow
def test_bootstrap_and_seed_reach_every_ci() -> None:
    """``analysis.bootstrap`` and ``analysis.seed`` apply to every CI (the schema says so):
    pooling, downstream, causal-attention and threshold CIs (finite d and d -> inf) all move
    when either changes. Four replicates, so that every CI is a resampling one."""
    spec = dict(
        d=(40, 80),
        snr=tuple(np.linspace(0, 3, 6)),
        positional={"lab": {"kind": "label", "rho0": 0.8, "L": 4}},
        weights={"mean": "mean", "att": WEIGHT_MODELS["att"]},
    )
    cells, theory = make_synthetic(replicates=4, noise=0.02, **spec)
    runs = {}
    for label, settings in {
        "base": {"bootstrap": 40, "seed": 0},
        "seed": {"bootstrap": 40, "seed": 1},
        "bootstrap": {"bootstrap": 60, "seed": 0},  # streams are prefix-stable: not 41
    }.items():
        settings = with_defaults(settings, "analysis")
        analysis = analysis_dataset(cells, theory, settings)
        tables = sweep_tables("s", cells, theory, analysis, settings, WEIGHT_MODELS)
        tables["analysis"] = (
            analysis[["threshold_ci_low", "threshold_ci_high", "fss_ci_low", "fss_ci_high"]]
            .to_dataframe()
            .reset_index()
        )
        runs[label] = tables
    columns = {
        **CI_COLUMNS,
        "analysis": ("threshold_ci_low", "threshold_ci_high", "fss_ci_low", "fss_ci_high"),
    }
    for changed in ("seed", "bootstrap"):
        for table, names in columns.items():
            for name in names:
                base = runs["base"][table][name].to_numpy(float)
                other = runs[changed][table][name].to_numpy(float)
                assert np.isfinite(base).any(), (table, name)
                assert not np.allclose(base, other, equal_nan=True), (changed, table, name)


@pytest.mark.parametrize("consolidated", [True, False])
def test_open_store_reads_with_and_without_consolidated_metadata(
    tmp_path: Path, consolidated: bool
) -> None:
    """``open_zarr(consolidated=None)`` warns on a store without consolidated metadata (an
    error under this suite's warning filter); ``open_store`` inspects the store instead."""
    import warnings

    from attnrmt.analysis.pipeline import open_store

    cells, _ = make_synthetic(d=(40,), snr=(1.0,), replicates=2)
    with warnings.catch_warnings(action="ignore"):  # zarr: consolidation is not in the v3 spec
        cells.to_zarr(tmp_path / "s.zarr", zarr_format=3, consolidated=consolidated)
    xr.testing.assert_identical(open_store(tmp_path / "s.zarr"), cells)


def as_top_sweep(cells: xr.Dataset) -> xr.Dataset:
    """``cells`` as a ``spectrum: top`` sweep stores them: only the 2 top_k largest
    eigenvalues of each cell, the rest of the eig axis NaN (store.py pads to max d)."""
    n_values = 2 * cells.sizes["k"]
    eigenvalues = cells["eigenvalues"].transpose(..., "eig")
    values = np.sort(eigenvalues.values, axis=-1)  # ascending, NaN last
    finite = np.isfinite(values).sum(axis=-1, keepdims=True)
    position = np.arange(values.shape[-1])
    kept = (position >= finite - n_values) & (position < finite)
    top = np.where(kept, values, np.nan)
    return cells.assign(eigenvalues=eigenvalues.copy(data=top))


def test_top_sweeps_skip_the_bulk_with_a_note_and_keep_thresholds() -> None:
    """A top sweep: no bulk fit (NaN, a note in the attrs and in bulk.csv, no spectra
    panel), the same thresholds as the full sweep (they use only the top eigenvalues), and
    every table still builds."""
    from attnrmt.analysis._common import stored_spectrum
    from attnrmt.analysis.figures import Data, figure_spectra
    from attnrmt.analysis.pipeline import sweep_tables

    cells, theory = make_synthetic(replicates=2, **SPECS["transition"])
    top_cells = as_top_sweep(cells)
    assert (stored_spectrum(cells), stored_spectrum(top_cells)) == ("full", "top")
    full = analysis_dataset(cells, theory, SETTINGS)
    top = analysis_dataset(top_cells, theory, SETTINGS)
    assert top.attrs["spectrum"] == "top" and "bulk_skipped" not in full.attrs
    assert "spectrum: top" in top.attrs["bulk_skipped"]
    assert top["bulk_ks"].isnull().all() and full["bulk_ks"].notnull().any()
    xr.testing.assert_identical(top["threshold_estimate"], full["threshold_estimate"])
    tables = sweep_tables("transition", top_cells, theory, top, SETTINGS, WEIGHT_MODELS)
    assert list(tables["bulk"].columns) == ["sweep", "note"]
    assert "bulk fit skipped" in tables["bulk"]["note"].iloc[0]
    assert not tables["thresholds"].empty and not tables["comparison"].empty
    figure = figure_spectra(Data("transition", top_cells, theory, top))
    assert "no spectra" in figure.axes[0].get_title() or not figure.axes[0].patches


def test_open_store_keeps_spectra_and_bookkeeping_of_a_cell_table_lazy(tmp_path: Path) -> None:
    """A gathered cell table opens with the spectra and the per-cell bookkeeping (keys,
    provenance, compute time) still Dask-backed, everything else in memory, and the same
    values as the lazy view."""
    from attnrmt.analysis.pipeline import LAZY_CELL_VARIABLES, open_store
    from attnrmt.sweep.store.cell_table.reader import open_cells
    from attnrmt.sweep.store.cell_table.writer import gather_cells
    from tests.sweep.conftest import store_plan, write_block_fragments

    plan = store_plan(d=[6, 9])
    sweep_dir = tmp_path / "grid"
    paths = write_block_fragments(plan, sweep_dir)
    out = gather_cells(plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", plan.seed)
    opened = open_store(out)
    lazy = {name for name in opened.variables if opened[name].chunks is not None}
    assert lazy == set(LAZY_CELL_VARIABLES)
    xr.testing.assert_identical(opened.load(), open_cells(out).load())


def _sorted_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """A table's rows in one canonical order (every column a sort key)."""
    if frame.empty:
        return frame
    return frame.sort_values(list(frame.columns), kind="stable").reset_index(drop=True)


def test_listing_the_models_in_another_order_changes_no_value() -> None:
    """Config order only orders the name axes (docs/data-contract.md, "Seeds of the
    analysis"): the cells and theory with positional and weights models reversed (as a
    config listing them the other way round stores them) give the same analysis.zarr
    values and the same table rows; every bootstrap stream is keyed by its setting."""
    cells, theory = make_synthetic(
        **{
            **SPECS["transition"],
            "positional": {"p4": {"kind": "prefix", "L": 4}, "iid": {"kind": "iid"}},
        },
        replicates=3,
    )
    reverse = {axis: cells[axis].values[::-1] for axis in ("positional", "weights")}
    settings = {**SETTINGS, "bootstrap": 20}
    analysis = analysis_dataset(cells, theory, settings)
    flipped = analysis_dataset(cells.sel(reverse), theory.sel(reverse), settings)
    assert analysis.attrs["analysis_settings_sha256"] == settings_sha256(settings)
    by_name = {axis: analysis[axis].values for axis in reverse}
    xr.testing.assert_identical(flipped.sel(by_name), analysis)
    tables = sweep_tables("s", cells, theory, analysis, settings, WEIGHT_MODELS)
    others = sweep_tables(
        "s", cells.sel(reverse), theory.sel(reverse), flipped, settings, WEIGHT_MODELS
    )
    assert not tables["thresholds"].empty and not tables["pooling"].empty
    for name, table in tables.items():
        pd.testing.assert_frame_equal(_sorted_rows(others[name]), _sorted_rows(table))


def test_the_spectra_panel_counts_the_replicates_its_d_has() -> None:
    """A ragged sweep (``replicates: {d: count}``) has NaN cells beyond a ``d``'s count: the
    panel's label names the replicates drawn at its ``d`` (2 of 3), not the grid's 3."""
    from attnrmt.analysis.figures import Data, figure_spectra

    cells, theory = make_synthetic(replicates=3, **SPECS["transition"])
    eigenvalues = cells["eigenvalues"].where(cells["replicate"] < 2)
    ragged = cells.assign(eigenvalues=eigenvalues)
    figure = figure_spectra(
        Data("transition", ragged, theory, analysis_dataset(cells, theory, SETTINGS))
    )
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert any("2 reps" in label for label in labels), labels
