"""Benchmark: faults at random moments of real runs, each followed by the one documented
command (what the integrity checks cost: bench_integrity.py).

``chaos_*``
    ``N`` (``ATTNRMT_BENCH_CHAOS_FAULTS``, default 30) trials, each in a fresh workdir:
    ``attnrmt run config.yaml`` (the one documented command: sweep, analysis, report,
    summary) meets one fault at a random moment (uniform over a clean run's duration),
    then the same command runs once more, and its results are compared with a clean
    run's: every variable of ``cells.zarr`` (timing and provenance aside),
    ``theory.zarr`` and ``analysis.zarr``, and every table. Faults, in turn:
    SIGKILL of Snakemake's process group, of one Dask worker, of Snakemake during a
    gather; SIGTERM and SIGINT of ``attnrmt run``; a fragment or cache copy truncated
    or with 64 bytes inverted, or both copies of a block damaged; ``results/`` on a tmpfs
    too small for the run (ENOSPC; the space is given back before the rerun); a second
    ``attnrmt run`` of the same folder while the first lives (it must be refused naming
    the live run); a config edit during the run (one more snr value; compared with a
    clean run of the edited config). A trial survives when the rerun exits 0, every
    variable is identical, no temporary is left, and (second run) the refusal named
    the live run. Reported: faults survived / tried, cells the rerun computed beyond
    those unfinished on disk after the fault (``extra_cells``: 0 is the target), and the
    slowest stop (SIGTERM/SIGINT to every process gone; target 5 s).

``chaos_after_*``
    ``M`` (``ATTNRMT_BENCH_CHAOS_AFTER``, default 24) trials on a copy of a complete clean
    run (docs/data-contract.md, "Integrity"), kinds of :data:`AFTER_KINDS` in turn: a
    store chunk (snapshot, table, theory, analysis, a grid version) with 4 bytes flipped,
    deleted or truncated; the ``zarr.json`` of the table and the snapshot deleted; a CSV
    changed; ``.snakemake/`` removed before a config edit (one more snr value); the models
    listed in another order (compared by value: rows sorted, name axes selected); the run
    record deleted before a run of another config file (which must be refused), then the
    owner's run. Then ``attnrmt run`` once. A trial is **silent** when the rerun exits 0
    with results that differ from the clean run's; it survives when the results are
    identical and the rerun named what it redid (``damaged`` or ``another config``).
Run with ``python -m benchmarks bench_chaos``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the e2e helpers (tests/e2e/helpers.py) run the trials
    sys.path.insert(0, str(REPO))

from tests.e2e.helpers import (  # noqa: E402
    Workdir,
    child_pids,
    count_cells,
    damage_file,
    finished_cells_now,
    fragment_files,
    numeric_variables,
    process_group,
    snakemake_child,
    stop_seconds,
    tiny_config,
    wait_until,
    written_since,
)

FAULTS = int(os.environ.get("ATTNRMT_BENCH_CHAOS_FAULTS", "30"))
SEED = int(os.environ.get("ATTNRMT_BENCH_CHAOS_SEED", "2026"))
KINDS = tuple(
    os.environ.get("ATTNRMT_BENCH_CHAOS_KINDS", "").split(",")
    if os.environ.get("ATTNRMT_BENCH_CHAOS_KINDS")
    else (
        "sigkill_snakemake",
        "sigterm",
        "truncate_fragment",
        "sigkill_worker",
        "sigint",
        "flip_cache",
        "sigkill_gather",
        "both_copies",
        "enospc",
        "second_run",
        "flip_fragment",
        "config_edit",
        "truncate_cache",
    )
)
"""Fault kinds, taken in turn (``ATTNRMT_BENCH_CHAOS_KINDS``: a comma-separated subset)."""
AFTER = int(os.environ.get("ATTNRMT_BENCH_CHAOS_AFTER", "24"))
AFTER_KINDS = tuple(
    os.environ.get("ATTNRMT_BENCH_CHAOS_AFTER_KINDS", "").split(",")
    if os.environ.get("ATTNRMT_BENCH_CHAOS_AFTER_KINDS")
    else (
        "flip_snapshot_chunk",
        "delete_snapshot_chunk",
        "delete_both_chunks",
        "flip_theory_chunk",
        "flip_analysis_chunk",
        "delete_zarr_json",
        "flip_grid_chunk",
        "truncate_table_chunk",
        "change_csv",
        "lost_metadata_config_edit",
        "reordered_lists",
        "deleted_record",
    )
)
"""Faults after a complete run (``chaos_after_*``), taken in turn
(``ATTNRMT_BENCH_CHAOS_AFTER_KINDS``: a comma-separated subset)."""
STOP_TARGET_SECONDS = 5.0
RUN_TIMEOUT_SECONDS = 900.0


# --------------------------------------------------------------------------- chaos


def chaos_config() -> dict[str, Any]:
    """Cells of ~0.4 s (d = 800) and ~0.02 s (d = 40) in 8 blocks: 2 weights x 4 snr x 2
    replicates at each d, blocks of 4 (so a run lasts long enough for faults to land in
    its blocks, its gather, its analysis and its report)."""
    config = tiny_config(run="chaos", execution={"block_size": 4})
    config["sweeps"]["grid"].update(d=[40, 800], snr=[0.0, 1.0, 2.0, 3.0])
    return config


def edited(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with one more snr value (the config-edit fault)."""
    changed = json.loads(json.dumps(config))
    changed["sweeps"]["grid"]["snr"] = [*changed["sweeps"]["grid"]["snr"], 4.0]
    return changed


def run_command(workdir: Workdir, timeout: float = RUN_TIMEOUT_SECONDS) -> tuple[int, str]:
    """``attnrmt run`` to its end: exit code and output."""
    process = workdir.start_attnrmt_run(log_name="rerun.log")
    try:
        code = process.wait(timeout=timeout)
    finally:
        workdir.close()
    return code, (workdir.path / "rerun.log").read_text(errors="replace")


def snapshot(workdir: Workdir) -> dict[str, Any]:
    """Every variable of the run's stores (cells without timing and provenance) and every
    table, loaded."""
    from attnrmt.sweep.store.cell_table.reader import open_cells

    sweep_dir = workdir.sweep_dir()
    found: dict[str, Any] = {"cells": numeric_variables(open_cells(sweep_dir).load())}
    for name in ("theory", "analysis"):
        with xr.open_zarr(sweep_dir / f"{name}.zarr") as dataset:
            found[name] = dataset.load()
    for table in sorted(workdir.run_dir.glob("*.csv")):
        found[table.name] = pd.read_csv(table)
    return found


def differences(got: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """Names of the stores and tables that differ (or are missing)."""
    different = []
    for name, value in expected.items():
        try:
            if isinstance(value, pd.DataFrame):
                pd.testing.assert_frame_equal(got[name], value)
            else:
                xr.testing.assert_identical(got[name], value)
        except (AssertionError, KeyError):
            different.append(name)
    return different


def temporaries(workdir: Workdir) -> list[str]:
    """Temporaries left under ``results/`` (``.<name>.<pid>.<random>.tmp``)."""
    return sorted(
        str(path.relative_to(workdir.path)) for path in (workdir.path / "results").rglob(".*.tmp")
    )


def planned_ids(config: dict[str, Any]) -> set[tuple[str, str]]:
    """``(cell_key, seed token)`` of every cell of a config's plan."""
    from attnrmt.sweep import load_config, plan_run
    from attnrmt.sweep.spec.identity import seed_token

    plan = plan_run(load_config(config))
    return {
        (cell.key, seed_token(cell.seed_words(plan.seed)))
        for sweep in plan.sweeps.values()
        for cell in sweep.cells
    }


def _mount_tmpfs(target: Path, size_bytes: int) -> None:
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(target)],
        check=True,
        capture_output=True,
    )


def _unmount(target: Path) -> None:
    if subprocess.run(["umount", str(target)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def inject(
    kind: str,
    workdir: Workdir,
    process: subprocess.Popen,
    at: float,
    rng: np.random.Generator,
    trial: dict[str, Any],
) -> None:
    """Apply fault ``kind`` ``at`` seconds after ``process`` (``attnrmt run``) started (or
    at the moment the fault needs: a gather, a live cluster, a fragment), recording what
    was done in ``trial``; return once the faulted run has ended."""
    started = time.monotonic()

    def wait_for_moment() -> None:
        while time.monotonic() - started < at and process.poll() is None:
            time.sleep(0.02)

    snakemake = snakemake_child(process)
    if kind in ("sigkill_snakemake", "sigterm", "sigint", "config_edit", "second_run"):
        wait_for_moment()
        if process.poll() is not None:
            trial["note"] = "the run ended before the fault"
        elif kind == "sigkill_snakemake":
            with contextlib.suppress(ProcessLookupError):
                os.killpg(snakemake, signal.SIGKILL)
        elif kind in ("sigterm", "sigint"):
            signum = signal.SIGTERM if kind == "sigterm" else signal.SIGINT
            trial["stop_seconds"] = round(stop_seconds(process, signum, group=snakemake), 2)
        elif kind == "config_edit":
            workdir.write_config(edited(workdir.config))
        else:  # a second run of the same folder while the first lives
            done = subprocess.run(
                [str(Path(sys.executable).with_name("attnrmt")), *_run_args()],
                cwd=workdir.path,
                capture_output=True,
                text=True,
                timeout=300,
            )
            output = done.stdout + done.stderr
            trial["refused"] = (
                done.returncode != 0
                and "is being written by a live run" in output
                and f"pid {process.pid}" in output  # the attnrmt run driver holds the lock
                and "removed with the --unlock argument" not in output
            )
            if process.poll() is not None and not trial["refused"]:
                trial["note"] = "the first run had ended: the second one ran"
                trial["refused"] = done.returncode == 0
    elif kind == "enospc":
        pass  # the fault is the small file system: the run meets it by itself
    elif kind == "sigkill_worker":
        wait_for_moment()
        try:
            pids = [pid for pid in process_group(snakemake) if pid != snakemake]
            victims = [pid for pid in pids if pid in _workers(snakemake)]
            if victims:
                os.kill(int(rng.choice(victims)), signal.SIGKILL)
            else:
                trial["note"] = "no worker alive at that moment"
        except ProcessLookupError:
            trial["note"] = "the worker was gone"
    elif kind == "sigkill_gather":
        log = workdir.path / "attnrmt-run.log"
        try:
            wait_until(
                lambda: "rule gather_cells:" in log.read_text(errors="replace"),
                RUN_TIMEOUT_SECONDS,
                "a gather",
                process,
            )
            time.sleep(float(rng.uniform(0.0, 0.5)))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(snakemake, signal.SIGKILL)
        except AssertionError:
            trial["note"] = "the run ended before its gather"
    else:  # damage to fragments written by now
        wait_for_moment()
        written = sorted((workdir.sweep_dir() / "fragments").glob("*.npz"))
        if not written:
            try:
                wait_until(
                    lambda: any((workdir.sweep_dir() / "fragments").glob("*.npz")),
                    RUN_TIMEOUT_SECONDS,
                    "a fragment",
                    process,
                )
            except AssertionError:
                pass
            written = sorted((workdir.sweep_dir() / "fragments").glob("*.npz"))
        if written:
            from attnrmt.sweep.store.fragments import twin_of

            target = written[int(rng.integers(len(written)))]
            how = "truncate" if "truncate" in kind else "flip"
            victims = {
                "truncate_fragment": [target],
                "flip_fragment": [target],
                "truncate_cache": [twin_of(target)],
                "flip_cache": [twin_of(target)],
                "both_copies": [target, twin_of(target)],
            }[kind]
            for victim in victims:
                with contextlib.suppress(FileNotFoundError):
                    damage_file(victim, how, rng)
            trial["damaged"] = [str(victim.relative_to(workdir.path)) for victim in victims]
        else:
            trial["note"] = "no fragment to damage"
    process.wait(timeout=RUN_TIMEOUT_SECONDS)
    trial["faulted_exit"] = process.returncode


def _workers(snakemake: int) -> set[int]:
    """Pids of the Dask worker processes of a Snakemake (its descendants but itself)."""
    found, pending = set(), [snakemake]
    while pending:
        for child in child_pids(pending.pop()):
            found.add(child)
            pending.append(child)
    return found


def _run_args(config: str = "config.yaml") -> list[str]:
    from tests.e2e.helpers import DEFAULT_PROFILE, SNAKEFILE

    return [
        "run",
        config,
        "--snakefile",
        str(SNAKEFILE),
        "--profile",
        str(DEFAULT_PROFILE),
        "--cores",
        "2",
    ]


def clean_run(root: Path, config: dict[str, Any], name: str) -> tuple[dict[str, Any], float, int]:
    """A clean ``attnrmt run``: its snapshot, seconds and results' size in bytes."""
    workdir = Workdir.create(root / name, config)
    started = time.monotonic()
    code, output = run_command(workdir)
    seconds = time.monotonic() - started
    if code != 0:
        raise RuntimeError(f"clean run failed:\n{output[-4000:]}")
    size = sum(
        path.stat().st_size for path in (workdir.path / "results").rglob("*") if path.is_file()
    )
    return snapshot(workdir), seconds, size


def chaos(n_faults: int = FAULTS, seed: int = SEED) -> dict[str, Any]:
    """The trials (module docstring); a summary and one row per trial."""
    rng = np.random.default_rng(seed)
    root = Path(tempfile.mkdtemp(prefix="attnrmt-chaos-"))
    base = chaos_config()
    try:
        reference, clean_seconds, clean_bytes = clean_run(root, base, "clean")
        again, _, _ = clean_run(root, base, "clean-again")
        deterministic = differences(again, reference)  # what a clean rerun itself changes
        reference_edited, _, _ = clean_run(root, edited(base), "clean-edited")
        trials = []
        for index in range(n_faults):
            kind = KINDS[index % len(KINDS)]
            trial = run_trial(
                root / f"trial-{index:02d}",
                kind,
                base,
                rng,
                clean_seconds,
                clean_bytes,
                reference,
                reference_edited,
                deterministic,
            )
            trials.append(trial)
            print(f"   trial {index:2d} {kind:18s} {json.dumps(trial)}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    stops = [trial["stop_seconds"] for trial in trials if "stop_seconds" in trial]
    return {
        "chaos_faults_tried": len(trials),
        "chaos_faults_survived": sum(trial["survived"] for trial in trials),
        "chaos_extra_cells": sum(max(trial.get("extra_cells", 0), 0) for trial in trials),
        "chaos_slowest_stop_seconds": max(stops) if stops else None,
        "chaos_stops_ok": all(stop <= STOP_TARGET_SECONDS for stop in stops),
        "chaos_clean_run_seconds": round(clean_seconds, 1),
        "chaos_clean_rerun_differs_in": deterministic,
        "chaos_trials": {
            f"{index:02d} {trial['kind']}": {
                key: (json.dumps(value) if isinstance(value, list | dict) else value)
                for key, value in trial.items()
                if key != "kind"
            }
            for index, trial in enumerate(trials)
        },
    }


def run_trial(
    path: Path,
    kind: str,
    base: dict[str, Any],
    rng: np.random.Generator,
    clean_seconds: float,
    clean_bytes: int,
    reference: dict[str, Any],
    reference_edited: dict[str, Any],
    deterministic: list[str],
) -> dict[str, Any]:
    """One fault and the rerun (module docstring); the trial's record."""
    at = float(rng.uniform(1.0, 0.9 * clean_seconds))
    trial: dict[str, Any] = {"kind": kind, "at_seconds": round(at, 1)}
    workdir = Workdir.create(path, base)
    mounted = None
    try:
        if kind == "enospc":
            mounted = workdir.path / "results"
            size = int(clean_bytes * rng.uniform(0.2, 0.8))
            _mount_tmpfs(mounted, size)
            trial["tmpfs_bytes"] = size
        process = workdir.start_attnrmt_run()
        inject(kind, workdir, process, at, rng, trial)
        workdir.close()
        if mounted is not None:  # the space comes back before the rerun
            subprocess.run(
                ["mount", "-o", f"remount,size={4 * clean_bytes + (64 << 20)}", str(mounted)],
                check=True,
                capture_output=True,
            )
        config = workdir.config
        unfinished = planned_ids(config) - finished_cells_now(workdir)
        before = fragment_files(workdir.path)
        code, output = run_command(workdir)
        computed = count_cells(written_since(before, fragment_files(workdir.path))).computed
        trial.update(
            rerun_exit=code,
            unfinished_cells=len(unfinished),
            rerun_computed=computed,
            extra_cells=computed - len(unfinished),
        )
        expected = reference_edited if config != base else reference
        wrong = (
            [name for name in differences(snapshot(workdir), expected) if name not in deterministic]
            if code == 0
            else ["(rerun failed)"]
        )
        left = temporaries(workdir)
        trial.update(differs=wrong, temporaries_left=left)
        if code != 0:
            trial["rerun_output"] = output[-1500:]
        trial["survived"] = bool(
            code == 0 and not wrong and not left and trial.get("refused", True)
        )
    except Exception as exc:  # a trial that breaks the harness counts as not survived
        trial.update(survived=False, error=repr(exc)[:500])
    finally:
        workdir.close()
        if mounted is not None:
            _unmount(mounted)
    return trial


# --------------------------------------------------------------------------- after a run


def _chunk(store: Path, variable: str, rng: np.random.Generator) -> Path:
    chunks = sorted(path for path in (store / variable / "c").rglob("*") if path.is_file())
    return chunks[int(rng.integers(len(chunks)))]


def _flip4(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4] = bytes(byte ^ 0xFF for byte in data[middle : middle + 4])
    path.write_bytes(bytes(data))


def damage_after(kind: str, workdir: Workdir, rng: np.random.Generator) -> dict[str, Any]:
    """Apply a fault of :data:`AFTER_KINDS` to a complete run; the config it is rerun
    with (``None``: the same) and what was done."""
    sweep = workdir.sweep_dir()
    table, snap = sweep / "cell_table.zarr", sweep / "cells.zarr"
    variable = str(rng.choice(["top_eigenvalues", "eigenvalues", "alpha_replicate"]))
    done: dict[str, Any] = {}
    if kind == "flip_snapshot_chunk":
        _flip4(path := _chunk(snap, variable, rng))
    elif kind == "delete_snapshot_chunk":
        (path := _chunk(snap, variable, rng)).unlink()
    elif kind == "delete_both_chunks":
        path = _chunk(snap, variable, rng)
        path.unlink()
        (table / path.relative_to(snap)).unlink()
    elif kind == "flip_theory_chunk":
        _flip4(path := _chunk(sweep / "theory.zarr", "sample_outlier", rng))
    elif kind == "flip_analysis_chunk":
        _flip4(path := _chunk(sweep / "analysis.zarr", "threshold_estimate", rng))
    elif kind == "delete_zarr_json":
        (table / "zarr.json").unlink()
        (path := snap / "zarr.json").unlink()
    elif kind == "flip_grid_chunk":
        grids = [p for p in (table / "grid").rglob("*") if p.is_file() and p.parent.name == "c"]
        _flip4(path := grids[int(rng.integers(len(grids)))])
    elif kind == "truncate_table_chunk":
        path = _chunk(table, variable, rng)
        path.write_bytes(path.read_bytes()[:-3])
    elif kind == "change_csv":
        path = workdir.run_dir / "thresholds.csv"
        path.write_bytes(path.read_bytes().replace(b",", b";", 1))
    elif kind == "lost_metadata_config_edit":
        shutil.rmtree(workdir.path / ".snakemake", ignore_errors=True)
        workdir.write_config(edited(workdir.config))
        path = workdir.path / "config.yaml"
    elif kind == "reordered_lists":
        shutil.rmtree(workdir.path / ".snakemake", ignore_errors=True)
        config = json.loads(json.dumps(workdir.config))
        grid = config["sweeps"]["grid"]
        grid["weights"], grid["d"] = grid["weights"][::-1], grid["d"][::-1]
        workdir.write_config(config)
        path = workdir.path / "config.yaml"
    else:  # deleted_record: another config file under the same run name must be refused
        (path := workdir.run_dir / ".attnrmt-run.json").unlink()
        (workdir.path / "other.yaml").write_text((workdir.path / "config.yaml").read_text())
        refused = subprocess.run(
            [str(Path(sys.executable).with_name("attnrmt")), *_run_args("other.yaml")],
            cwd=workdir.path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        done["refused"] = refused.returncode != 0 and "config.yaml" in refused.stderr
    done["damaged"] = str(path.relative_to(workdir.path))
    return done


ORDER_ATTRS = ("config_sha256", "model_summary")
"""Store attributes that record the config's order of the names (the grid's order)."""


def by_value(found: dict[str, Any]) -> dict[str, Any]:
    """A snapshot in an order-free form: name axes sorted, table rows sorted, the
    attributes that record the config's order left out."""
    result = {}
    for name, value in found.items():
        if isinstance(value, pd.DataFrame):
            value = value.sort_values(list(value.columns), kind="stable").reset_index(drop=True)
        else:
            value = value.sortby([dim for dim in ("positional", "weights") if dim in value.dims])
            value.attrs = {k: v for k, v in value.attrs.items() if k not in ORDER_ATTRS}
        result[name] = value
    return result


def run_after_trial(
    path: Path,
    kind: str,
    clean: Workdir,
    rng: np.random.Generator,
    reference: dict[str, Any],
    reference_edited: dict[str, Any],
    deterministic: list[str],
) -> dict[str, Any]:
    """One fault after a complete run, and the rerun (module docstring)."""
    trial: dict[str, Any] = {"kind": kind}
    workdir = clean.copy_to(path)
    try:
        trial.update(damage_after(kind, workdir, rng))
        before = fragment_files(workdir.path)
        code, output = run_command(workdir)
        computed = count_cells(written_since(before, fragment_files(workdir.path))).computed
        new_cells = 8 if kind == "lost_metadata_config_edit" else 0
        expected = reference_edited if kind == "lost_metadata_config_edit" else reference
        got = snapshot(workdir) if code == 0 else {}
        if kind == "reordered_lists":
            got, expected = by_value(got), by_value(expected)
        wrong = (
            [name for name in differences(got, expected) if name not in deterministic]
            if code == 0
            else ["(rerun failed)"]
        )
        named = kind in ("reordered_lists", "deleted_record") or any(
            word in output for word in ("damaged", "another config")
        )
        trial.update(
            rerun_exit=code,
            extra_cells=computed - new_cells,
            differs=wrong,
            named=named,
            silent=code == 0 and bool(wrong),
        )
        if kind == "deleted_record":
            trial["record_recreated"] = (workdir.run_dir / ".attnrmt-run.json").is_file()
        if code != 0:
            trial["rerun_output"] = output[-1500:]
        trial["survived"] = bool(
            code == 0
            and not wrong
            and named
            and trial.get("refused", True)
            and trial.get("record_recreated", True)
        )
    except Exception as exc:  # a trial that breaks the harness counts as not survived
        trial.update(survived=False, error=repr(exc)[:500])
    finally:
        workdir.close()
    return trial


def chaos_after(n_trials: int = AFTER, seed: int = SEED) -> dict[str, Any]:
    """The ``chaos_after_*`` trials (module docstring)."""
    rng = np.random.default_rng(seed + 1)
    root = Path(tempfile.mkdtemp(prefix="attnrmt-chaos-after-"))
    base = chaos_config()
    try:
        clean = Workdir.create(root / "clean", base)
        code, output = run_command(clean)
        if code != 0:
            raise RuntimeError(f"clean run failed:\n{output[-4000:]}")
        reference = snapshot(clean)
        reference_edited, _, _ = clean_run(root, edited(base), "clean-edited")
        again = clean.copy_to(root / "clean-again")
        shutil.rmtree(again.path / "results")
        run_command(again)
        deterministic = differences(snapshot(again), reference)
        trials = []
        for index in range(n_trials):
            kind = AFTER_KINDS[index % len(AFTER_KINDS)]
            trial = run_after_trial(
                root / f"after-{index:02d}",
                kind,
                clean,
                rng,
                reference,
                reference_edited,
                deterministic,
            )
            trials.append(trial)
            print(f"   after {index:2d} {kind:26s} {json.dumps(trial)}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "chaos_after_tried": len(trials),
        "chaos_after_survived": sum(trial["survived"] for trial in trials),
        "chaos_after_silent": sum(bool(trial.get("silent")) for trial in trials),
        "chaos_after_extra_cells": sum(max(trial.get("extra_cells", 0), 0) for trial in trials),
        "chaos_after_trials": {
            f"{index:02d} {trial['kind']}": {
                key: (json.dumps(value) if isinstance(value, list | dict) else value)
                for key, value in trial.items()
                if key != "kind"
            }
            for index, trial in enumerate(trials)
        },
    }


# --------------------------------------------------------------------------- integrity


def main() -> dict[str, Any]:
    """The chaos trials."""
    warnings.simplefilter("ignore")
    result = chaos() if FAULTS else {}
    result.update(chaos_after() if AFTER else {})
    result["target"] = (
        f"every fault survived, 0 extra cells, every stop <= 5 s, 0 silent, N + M >= 50 "
        f"(N = {FAULTS}, M = {AFTER})"
    )
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
