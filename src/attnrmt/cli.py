"""The ``attnrmt`` command line: validate, plan, run, submit, follow and summarise a sweep,
and ask the theory (``attnrmt --help``; docs/getting-started.md, docs/cluster.md).

Errors (a bad config or argument, a missing optional extra) go to stderr, one line per
problem, exit code 2; warnings go to stderr and do not fail.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnrmt.sweep.report.status import format_duration, format_table, remaining_work
from attnrmt.sweep.spec.cost import (
    ATTENTION_WORK_FACTOR,
    CELL_OVERHEAD_SECONDS,
    DEFAULT_SECONDS_PER_WORK,
    TOP_COLUMNS_EXPONENT,
    TOP_COLUMNS_SCALE,
    TOP_FIXED_WORK,
)

EXIT_OK = 0
EXIT_REFUSED = 1  # attnrmt submit: the run's driver job is still queued or running
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the pipe


def calibrate_seconds_per_work(run_dir: Path) -> tuple[float, str]:
    """Seconds per work unit on this machine and its source: kept in an existing run directory
    (identical estimates), else measured and not kept (``attnrmt plan`` creates no folder)."""
    from attnrmt.sweep.compute.calibration import (
        cached_seconds_per_work,
        calibrate_seconds_per_work,
    )
    from attnrmt.sweep.store.layout import RunLayout

    if run_dir.is_dir():
        cache = RunLayout(run_dir).calibration
        return cached_seconds_per_work(cache), f"measured on this machine, kept in {cache}"
    return (
        calibrate_seconds_per_work(),
        f"measured on this machine now; kept once {run_dir}/ exists",
    )


# --------------------------------------------------------------------------- plan


def sweep_summary(
    sweep: Any, done: set[str], seconds_per_work: float, failed: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """Counts, estimated seconds (:func:`~attnrmt.sweep.report.status.remaining_work`) and failed
    cells still planned of one sweep (``done``, ``failed``: :func:`.count_sweep`'s). O(cells)."""
    keys = sweep.cell_keys()  # from the plan's arrays: no Cell built
    planned_keys = set(keys)
    return {
        "sweep": sweep.name,
        "cells": len(sweep.cells),
        "blocks": len(sweep.blocks),
        "done_cells": sum(key in done for key in keys),
        "done_blocks": sum(all(key in done for key in block.cell_keys) for block in sweep.blocks),
        "estimated_seconds": remaining_work(sweep, set(), set(), seconds_per_work),
        "estimated_remaining_seconds": remaining_work(sweep, done, set(), seconds_per_work),
        "config_sha256": sweep.config_sha256,
        "failed_cells": [cell for cell in failed if cell.get("key") in planned_keys],
    }


def _print_plan_table(rows: list[dict[str, Any]]) -> None:
    columns = ("cells", "blocks", "done_cells", "done_blocks")
    header = ("sweep", "cells", "blocks", "done cells", "done blocks", "est. total", "est. left")
    lines = [header] + [
        (
            row["sweep"],
            *(str(row[name]) for name in columns),
            format_duration(row["estimated_seconds"]),
            format_duration(row["estimated_remaining_seconds"]),
        )
        for row in rows
    ]
    print("\n".join(format_table(lines)))


def _print_placed(rows: Sequence[Mapping[str, Any]]) -> None:
    """Per sweep whose snr is placed by the theory: the thresholds it is placed around and
    the placed points (docs/getting-started.md, "snr placed by the theory")."""
    for row in rows:
        placed = row.get("snr_placed")
        if placed is None:
            continue
        thresholds = ", ".join(
            f"{name} {value:.4g}" for name, value in placed["thresholds"].items()
        )
        low, high = placed["span"]
        print(
            f"{row['sweep']}: snr placed at {low:g}-{high:g} x thresholds ({thresholds}): "
            + ", ".join(f"{value:.4g}" for value in placed["snr"])
        )


def _print_failures(rows: Sequence[Mapping[str, Any]], run_dir: Path) -> None:
    """One line per failed cell: sweep, block, key, main parameters and the error."""
    from attnrmt.sweep.compute.failures import count_failures_by_cause, describe_causes

    failed = [(row["sweep"], cell) for row in rows for cell in row["failed_cells"]]
    if not failed:
        return
    causes = describe_causes(count_failures_by_cause(cell for _, cell in failed))
    print(
        f"failed cells ({len(failed)}: {causes}; the next run retries them, "
        "skip_failed: true leaves them out):"
    )
    for sweep, cell in failed:
        params = cell.get("params") or {}
        names = [name for name in ("d", "delta", "gamma", "T", "snr") if name in params]
        shown = ", ".join(f"{name}={params[name]}" for name in names)
        error = " ".join(str(cell.get("error", "")).split())
        error = error if len(error) <= 160 else error[:157] + "..."
        print(
            f"  {sweep}  block {cell['block']}  cell {str(cell['key'])[:12]}  {shown}  "
            f"[{cell.get('cause', 'other')}]: {error}"
        )
    print(f"  logs: {run_dir}/logs/simulate_block/<sweep>/<block>.log")


def _command_plan(args: argparse.Namespace) -> int:
    """``attnrmt plan``: cells, blocks, done and failed cells, estimated cost per sweep."""
    from attnrmt.sweep import plan_run
    from attnrmt.sweep.report.status import count_sweep
    from attnrmt.sweep.store.guard import claim_run_dir

    valid = _load(args)
    run_plan = plan_run(valid.config, valid.sweeps)
    run_dir = Path(args.results) / run_plan.run
    claim_run_dir(run_dir, args.config, write=False)
    if args.no_calibrate:
        seconds_per_work, source = DEFAULT_SECONDS_PER_WORK, "built-in constant"
    else:
        seconds_per_work, source = calibrate_seconds_per_work(run_dir)
    rows = []
    for sweep in run_plan.sweeps.values():
        count = count_sweep(sweep, run_dir / sweep.name)
        rows.append(sweep_summary(sweep, count.done, seconds_per_work, count.failed_records))
        placed = valid.sweeps[sweep.name].snr_placed
        if placed is not None:
            rows[-1]["snr_placed"] = {**placed, "snr": sweep.axes["snr"]}
    if args.json:
        print(json.dumps({"run": run_plan.run, "seed": run_plan.seed, "sweeps": rows}, indent=2))
        return EXIT_OK
    print(f"run {run_plan.run!r} (seed {run_plan.seed}) -> {run_dir}")
    _print_plan_table(rows)
    _print_placed(rows)
    _print_failures(rows, run_dir)
    print(
        "cost: ESTIMATE in single-core compute time per cell, "
        f"{CELL_OVERHEAD_SECONDS:g} s + work x {seconds_per_work:.2e} s ({source}), "
        "work = d^3 + (N+V) d^2 + N T d "
        f"(spectrum top: {TOP_FIXED_WORK:.2g} + 2 x {TOP_COLUMNS_SCALE:g} "
        f"d^{TOP_COLUMNS_EXPONENT:g} (V d + N T) + N T d) "
        f"(+ {ATTENTION_WORK_FACTOR:g} N T^2 d for causal_attention); "
        "a rough estimate: expect a factor 2-3 either way"
    )
    return EXIT_OK


# --------------------------------------------------------------------------- status


def status_plan(target: str, results: str) -> tuple[Any, Path]:
    """``(run plan, run dir)`` of ``attnrmt status TARGET`` (a config file, or ``results/<run>``
    and its recorded config), the plan of the run's current round when sweeps state a target."""
    from attnrmt.sweep.spec.config import load_valid_config
    from attnrmt.sweep.store.guard import RUN_RECORD

    path = Path(target)
    if path.is_dir():
        try:
            record = json.loads((path / RUN_RECORD).read_text(encoding="utf-8"))
            config_path = Path(record["config_path"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"{target}: not a run directory with a readable {RUN_RECORD} ({error}); "
                "give the config file instead"
            ) from error
        return _round_plan(load_valid_config(config_path), path), path
    valid = load_valid_config(path)
    run_dir = Path(results) / valid.config["run"]
    return _round_plan(valid, run_dir), run_dir


def _round_plan(valid: Any, run_dir: Path) -> Any:
    """The plan of the run's current round when its sweeps state a target
    (:mod:`attnrmt.sweep.compute.rounds`), else of ``valid``."""
    from attnrmt.sweep import plan_run
    from attnrmt.sweep.compute.rounds import latest_round, targeted
    from attnrmt.sweep.spec.config import load_valid_config

    latest = latest_round(run_dir) if targeted(valid) else None
    valid = valid if latest is None else load_valid_config(latest)
    return plan_run(valid.config, valid.sweeps)


def _command_status(args: argparse.Namespace) -> int:
    """``attnrmt status``: cells done / failed / pending, rate and ETA per sweep; ``--watch``
    repeats (``--json``: a line per refresh; else the live bar until no live run is left)."""
    import time

    from attnrmt.driver import driver_status_line
    from attnrmt.sweep.compute.rounds import round_status_lines
    from attnrmt.sweep.report.progress_bar import LiveProgress
    from attnrmt.sweep.report.status import run_status, status_table

    run_plan, run_dir = status_plan(args.target, args.results)
    status, display = run_status(run_plan, run_dir), None
    try:
        while True:
            driver = driver_status_line(run_dir)
            if args.json:
                record = {**status.to_json(), "driver": driver and driver[1]}
                record["rounds"] = round_status_lines(run_dir)
                print(json.dumps(_json_safe(record)), flush=True)
            elif display is None:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(status.time))
                print(f"run {run_plan.run!r} -> {run_dir} at {stamp}")
                print("\n".join(status_table(status) + round_status_lines(run_dir)), flush=True)
                if driver is not None:
                    print(driver[0], flush=True)
                if args.watch is not None:
                    display = LiveProgress(sys.stdout, interval_seconds=args.watch)
            if display is not None:
                stage = {True: "running", False: "no live run", None: None}[status.live]
                if status.live is False and status.total.pending == 0:
                    display.finish(status, stage)
                    return EXIT_OK
                display.show(status, stage)
            if args.watch is None:
                return EXIT_OK
            time.sleep(args.watch)
            status = run_status(run_plan, run_dir)
    except KeyboardInterrupt:
        if display is not None:
            display.finish(None, None)
        return EXIT_OK


def _command_verify(args: argparse.Namespace) -> int:
    """``attnrmt verify``: the full check of every sweep's stores (every byte against its
    digest record; docs/data-contract.md, "Integrity"); one line per damaged store, exit 1
    if any."""
    from attnrmt.sweep.store.integrity import heal_hint, sweep_damage

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        print(f"attnrmt verify: {run_dir}: no such directory", file=sys.stderr)
        return EXIT_USAGE
    damaged = checked = 0
    for sweep_dir in sorted(path for path in run_dir.iterdir() if path.is_dir()):
        for name, problems in sweep_damage(sweep_dir, full=True).items():
            damaged += 1
            print(f"{sweep_dir.name}/{name}: DAMAGED: " + "; ".join(problems))
        checked += 1
    if damaged:
        print(f"{damaged} damaged store(s); heal them with {heal_hint()}")
        return EXIT_REFUSED
    print(f"{run_dir}: {checked} sweep folder(s), every recorded byte intact")
    return EXIT_OK


def _command_run(args: argparse.Namespace) -> int:
    """``attnrmt run``: validate (printing ``attnrmt validate``'s line), Snakemake with the
    profile, report, summary (:func:`attnrmt.driver.run_pipeline`); ``--dry-run``
    prints the Snakemake commands instead."""
    from attnrmt.driver import pipeline_commands, run_pipeline

    _command_validate(args)  # the one-line summary; a bad config stops here
    if args.dry_run:
        valid = _load(args)
        for command in pipeline_commands(
            args.config, valid.config["run"], args.profile, args.snakefile, args.cores
        ):
            print(shlex.join(command))
        return EXIT_OK
    return run_pipeline(args.config, args.profile, args.snakefile, args.cores)


def _command_init(args: argparse.Namespace) -> int:
    """``attnrmt init``: a starter config and a copy of a shipped profile
    (:func:`attnrmt.workflow.starter.write_starter`)."""
    from attnrmt.workflow.starter import write_starter

    written = write_starter(args.directory, args.profile, overwrite=args.force)
    for path in written:
        print(f"wrote {path}")
    config, profile = written[0], written[1].parent
    print(
        f"next: edit {config}, then `attnrmt run {config}` (results under ./results/); "
        f"on a cluster edit {profile}/config.yaml and add `--profile {profile}`"
    )
    return EXIT_OK


def _command_submit(args: argparse.Namespace) -> int:
    """``attnrmt submit``: the whole run as one SLURM job (:func:`attnrmt.driver.submit`);
    refused (exit 1) while the run's driver job is queued or running."""
    from attnrmt.driver import DriverAlive, DriverRequest, follow_hint, submit

    asked = {n: getattr(args, n) for n in ("time", "cpus_per_task", "mem", "partition", "account")}
    request = DriverRequest(**asked, extra=tuple(args.sbatch or ()))
    try:
        record = submit(args.config, args.profile, request, args.snakefile, args.cores)
    except DriverAlive as alive:
        print(f"attnrmt submit: {alive}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"submitted driver job {record['job_id']} of run {record['run']!r} ({record['script']})")
    print(follow_hint(args.config, record))
    return EXIT_OK


def _command_validate(args: argparse.Namespace) -> int:
    """``attnrmt validate``: schema + semantic checks, the size limits
    (:mod:`attnrmt.sweep.spec.bounds`, skipped with ``--force``), one-line summary."""
    from attnrmt.sweep import plan_run
    from attnrmt.sweep.spec.bounds import plan_problems
    from attnrmt.sweep.spec.config import ConfigError

    valid = _load(args)
    if not getattr(args, "force", False) and (problems := plan_problems(valid.config)):
        raise ConfigError(*problems)
    run_plan = plan_run(valid.config, valid.sweeps)
    n_cells = sum(len(sweep.cells) for sweep in run_plan.sweeps.values())
    names = ", ".join(run_plan.sweeps)
    print(f"{args.config}: valid (run {run_plan.run!r}; sweeps {names}; {n_cells} cells)")
    return EXIT_OK


def _load(args: argparse.Namespace) -> Any:
    """The config of ``args.config``, validated once; its warnings printed to stderr."""
    from attnrmt.sweep.spec.config import load_valid_config

    valid = load_valid_config(args.config)
    for warning in valid.warnings:
        print(f"attnrmt {args.command}: warning: {warning}", file=sys.stderr)
    return valid


def _command_summary(args: argparse.Namespace) -> int:
    """``attnrmt summary``: where the results are, cells, wall time, headline verdicts."""
    from attnrmt.sweep import plan_run
    from attnrmt.sweep.report.summary import run_summary

    valid = _load(args)
    run_plan = plan_run(valid.config, valid.sweeps)
    for line in run_summary(run_plan, args.results, args.since, args.config):
        print(line)
    return EXIT_OK


def _command_run_name(args: argparse.Namespace) -> int:
    """``attnrmt run-name``: the config's run name (``run:``, else the file's stem)."""
    from attnrmt.sweep.spec.config import load_valid_config

    print(load_valid_config(args.config).config["run"])
    return EXIT_OK


def _command_provenance(args: argparse.Namespace) -> int:
    """``attnrmt provenance``: which code, environment and resources produced the cells."""
    from attnrmt.sweep.report.provenance import provenance_lines, run_provenance

    target = Path(args.target)
    run_dir = target
    if target.is_file():  # a config: its run's directory under --results
        args.config = str(target)
        run_dir = Path(args.results) / _load(args).config["run"]
    if not run_dir.is_dir():
        raise ValueError(f"{str(run_dir)!r}: no such run directory (nothing run yet?)")
    summary = run_provenance(run_dir)
    if args.json:
        print(json.dumps(summary, indent=2))
        return EXIT_OK
    for line in provenance_lines(summary):
        print(line)
    return EXIT_OK


# --------------------------------------------------------------------------- theory


def _parse_model_argument(
    text: str, named: Mapping[str, Any] | None = None
) -> str | dict[str, Any]:
    """A command-line model: JSON (``'{"kind": "prefix", "L": 4}'``) or a name, replaced by its
    spec when ``named`` (a config file's models) has it."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise ValueError(f"{text!r}: not valid JSON ({error.msg})") from error
        if not isinstance(value, dict):
            raise ValueError(f"{text!r}: must be a JSON object")
        return value
    if named and stripped in named:
        return dict(named[stripped])
    return stripped


def _substitution_notes(weights_spec: Mapping[str, Any]) -> list[str]:
    """What the theory uses in place of a model it has no closed form for."""
    if weights_spec.get("kind") == "causal_attention":
        tau = weights_spec.get("tau", 0.0)
        return [
            f"causal_attention(tau={tau:g}) has data-dependent weights: the theory uses "
            f"their d -> infinity limit causal_limit(tau={tau:g})"
        ]
    return []


def _theory_report(
    delta: float,
    gamma: float,
    snr: float,
    T: int,
    positional: str | dict[str, Any],
    weights: str | dict[str, Any],
    variants: Sequence[str],
    d: int | None = None,
) -> dict[str, Any]:
    """Pooling scalars, bulk edges and spike predictions for one parameter point, in the units
    of ``S`` (docs/model.md, "Pooling scalars", "Bulk law", "Spikes"); ``d`` gives the
    finite-size spike where the finite-T limit has none ("Outliers and overlaps at finite T")."""
    from attnrmt import model
    from attnrmt.theory import predict_point

    positional_spec = _validated("positional", model.validate_positional, positional, T)
    weights_spec = _validated("weights", model.validate_weights, weights, T)
    point = predict_point(delta, gamma, snr, T, positional_spec, weights_spec, False, variants, d=d)
    alpha, kappa, sigma = (float(point[name]) for name in ("alpha", "kappa", "sigma"))
    first = point.isel(variant=0)  # the bulk is the same law in both variants

    def floats(at: Any, names: Mapping[str, str]) -> dict[str, float]:
        return {name: float(at[stored]) for name, stored in names.items()}

    inputs = dict(delta=delta, gamma=gamma, snr=snr, T=T) | ({} if d is None else {"d": d})
    return {
        "inputs": {**inputs, "positional": positional_spec, "weights": weights_spec},
        "weights_vector": [float(x) for x in point["pooling_weights"].values],
        **dict(alpha=alpha, kappa=kappa, sigma=sigma, alpha_over_kappa=alpha / kappa),
        "bulk": floats(first, {n: f"bulk_{n}" for n in ("lower_edge", "upper_edge", "atom")}),
        "variants": {v: floats(point.sel(variant=v), _REPORTED_SPIKE_FIELDS) for v in variants},
        "notes": _substitution_notes(weights_spec),
        "mean_spike_uncentred": floats(point, _MEAN_SPIKE_FIELDS),
    }


#: JSON names of the uncentred mean spike -> variables of attnrmt.theory.predict.
_MEAN_SPIKE_FIELDS = {
    "population_outlier": "mean_spike_pop_outlier",
    "sample_outlier": "mean_spike_outlier",
    "sample_overlap": "mean_spike_overlap",
}
#: JSON names of `attnrmt theory` -> variables of attnrmt.theory.predict.
_REPORTED_SPIKE_FIELDS = {
    "theta": "theta",
    "population_outlier": "pop_outlier",
    "sample_outlier": "sample_outlier",
    "population_overlap": "pop_overlap_signal",
    "sample_overlap": "sample_overlap_signal",
    "threshold_snr_population": "threshold_snr_population",
    "threshold_snr_sample": "threshold_snr_sample",
}


def _validated(name: str, validate: Any, spec: Any, T: int) -> dict[str, Any]:
    try:
        return validate(spec, T)
    except ValueError as error:
        raise ValueError(f"--{name}: {error}") from error


def _json_safe(value: Any) -> Any:
    """NaN and infinities -> null (strict JSON), recursively."""
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _print_theory(report: dict[str, Any]) -> None:
    inputs = report["inputs"]
    print(
        f"delta={inputs['delta']:g} gamma={inputs['gamma']:g} snr={inputs['snr']:g} "
        f"T={inputs['T']} positional={json.dumps(inputs['positional'])} "
        f"weights={json.dumps(inputs['weights'])}"
    )
    print("w = [" + ", ".join(f"{x:.4g}" for x in report["weights_vector"]) + "]")
    print(
        f"alpha={report['alpha']:.6g} kappa={report['kappa']:.6g} sigma={report['sigma']:.6g} "
        f"alpha/kappa={report['alpha_over_kappa']:.6g}"
    )
    bulk = report["bulk"]
    print(
        f"bulk (units of S): lower edge {bulk['lower_edge']:.6g}, upper edge "
        f"{bulk['upper_edge']:.6g}, atom at 0 of mass {bulk['atom']:.6g}"
    )
    names = list(next(iter(report["variants"].values())))
    variants = list(report["variants"])
    width = max(len(name) for name in names)
    print(f"{'':{width}}  " + "  ".join(f"{variant:>14}" for variant in variants))
    for name in names:
        values = "  ".join(f"{report['variants'][v][name]:>14.6g}" for v in variants)
        print(f"{name:{width}}  {values}")
    mean = report["mean_spike_uncentred"]
    print(
        "mean spike (uncentred S only): "
        + ", ".join(f"{name} {value:.6g}" for name, value in mean.items())
    )
    print("below a threshold there is no outlier: outlier NaN, overlap 0")
    for note in report["notes"]:
        print(f"note: {note}")


def _command_theory(args: argparse.Namespace) -> int:
    """``attnrmt theory``: predictions for one parameter point, both variants by default."""
    from attnrmt.theory import VARIANTS

    variants = VARIANTS if args.variant == "both" else (args.variant,)
    named: Mapping[str, Any] = {}
    if args.config is not None:
        named = _load(args).config
    report = _theory_report(
        args.delta,
        args.gamma,
        args.snr,
        args.T,
        _parse_model_argument(args.positional, named.get("positional_models")),
        _parse_model_argument(args.weights, named.get("weight_models")),
        variants,
        args.d,
    )
    if args.json:
        print(json.dumps(_json_safe(report), indent=2, allow_nan=False))
    else:
        _print_theory(report)
    return EXIT_OK


# --------------------------------------------------------------------------- entry point


class _ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"attnrmt: error: {message}\n")


_DESCRIPTION = (
    "Random-matrix theory of attention pooling: check a sweep config, see its plan, "
    "ask the theory for one parameter point."
)
_EPILOG = (
    "Start: attnrmt init mystudy. Run a sweep: attnrmt run my.yaml, from any directory "
    "(results under ./results/; in a checkout also snakemake --cores 2 --configfile "
    "my.yaml; see README.md); on SLURM, log out with attnrmt submit my.yaml --profile DIR. "
    "'attnrmt COMMAND --help' describes a command."
)


FORCE_HELP = "plan a sweep beyond the size limits (cells, memory per cell, core days)"
_RESULTS_HELP = "results directory (default: results)"
#: Arguments several commands take, by the name :func:`_command` is given.
_COMMON: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "config": (("config",), {"help": "YAML config file"}),
    "results": (("--results",), {"default": "results", "help": _RESULTS_HELP}),
    "json": (("--json",), {"action": "store_true", "help": "print JSON"}),
    "force": (("--force",), {"action": "store_true", "help": FORCE_HELP}),
}


#: Subcommands: name, help and the :data:`_COMMON` arguments they take (handler:
#: ``_command_<name>``).
_COMMANDS = (
    ("validate", "check a config (schema + semantics)", ("config", "force")),
    ("plan", "cells, blocks, progress and estimated cost", ("config", "results", "json")),
    ("status", "cells done / failed / pending, throughput and ETA of a run", ("results", "json")),
    ("summary", "end-of-run summary: results, cells, wall time, verdicts", ("config", "results")),
    ("provenance", "commits, versions, hosts, wall time, memory, attempts", ("results", "json")),
    ("verify", "check every byte of a run's stores against their digest records", ()),
    (
        "run",
        "a whole run: validate, Snakemake with a profile, report, summary",
        ("config", "force"),
    ),
    ("submit", "the whole run as one SLURM job (log out; rerun to resume)", ("config", "force")),
    ("init", "write a commented starter config and a site profile to edit", ()),
    ("run-name", "print the run name of a config (results/<run>/)", ("config",)),
    ("theory", "theory predictions for one parameter point", ("json",)),
)


def build_parser() -> argparse.ArgumentParser:
    """The ``attnrmt`` argument parser (plain-text help)."""
    from attnrmt import __version__
    from attnrmt.driver import DEFAULT_DRIVER_CPUS

    parser = _ArgumentParser(prog="attnrmt", description=_DESCRIPTION, epilog=_EPILOG)
    parser.add_argument("--version", action="version", version=f"attnrmt {__version__}")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_ArgumentParser
    )
    sub: dict[str, argparse.ArgumentParser] = {}
    for name, help, common in _COMMANDS:
        sub[name] = commands.add_parser(name, help=help)
        for argument in common:
            flags, options = _COMMON[argument]
            sub[name].add_argument(*flags, **options)
        sub[name].set_defaults(handler=globals()["_command_" + name.replace("-", "_")])
    plan, status, summary, provenance = (
        sub[n] for n in ("plan", "status", "summary", "provenance")
    )
    plan.add_argument(
        "--no-calibrate",
        action="store_true",
        help="use a built-in cost constant instead of timing one small cell",
    )
    status.add_argument("target", help="results/<run> directory or YAML config file")
    status.add_argument(
        "--watch", type=float, metavar="SECONDS", help="refresh every SECONDS until interrupted"
    )
    summary.add_argument(
        "--since",
        type=float,
        help="start of the run (seconds since the epoch, e.g. from date +%%s): cells "
        "written since then count as computed by this run, and the wall time is shown",
    )
    provenance.add_argument(
        "target", metavar="RUN_DIR_OR_CONFIG", help="results/<run>, or the run's YAML config"
    )
    sub["verify"].add_argument("run_dir", help="results/<run> directory")
    _add_run_arguments(sub["run"])
    sub["run"].add_argument(
        "--dry-run",
        action="store_true",
        help="print the Snakemake commands instead of running them",
    )
    submit, init, theory = sub["submit"], sub["init"], sub["theory"]
    _add_run_arguments(submit)
    for flag, what in (("--time", "walltime"), ("--mem", "memory")):
        submit.add_argument(
            flag, help=f"{what} of the driver job (sbatch {flag}; default: the site's)"
        )
    submit.add_argument(
        "--cpus-per-task",
        type=int,
        default=DEFAULT_DRIVER_CPUS,
        help=f"cores of the driver job (default {DEFAULT_DRIVER_CPUS})",
    )
    submit.add_argument("--partition", help="partition (default: the site's)")
    submit.add_argument("--account", help="account (default: the site's)")
    submit.add_argument(
        "--sbatch",
        action="append",
        metavar="OPTION",
        help="another sbatch option for the driver job, e.g. --sbatch=--qos=long (repeatable)",
    )
    init.add_argument(
        "directory", nargs="?", default=".", help="where to write them (default: here)"
    )
    init.add_argument(
        "--profile", default="slurm-dask", help="which shipped profile to copy (default slurm-dask)"
    )
    init.add_argument("--force", action="store_true", help="overwrite files that exist")
    for flag, kind, default, help in (
        ("--delta", float, 0.5, "d/V (default 0.5)"),
        ("--gamma", float, 0.5, "d/N (default 0.5)"),
        ("--snr", float, 1.0, "||mu||^2 (default 1)"),
        ("--T", int, 8, "sequence length (default 8)"),
        (
            "--d",
            int,
            None,
            "embedding dimension: the finite-size spike where few tokens per "
            "sequence leave the limit without one (docs/model.md; default: the limit)",
        ),
    ):
        theory.add_argument(flag, type=kind, default=default, help=help)
    weights = "weights: mean, last, optimal, harmonic"
    for flag, name, what, example in (
        ("--positional", "iid", "positional model: a name (iid)", '"prefix", "L": 4'),
        ("--weights", "mean", weights, '"causal_limit", "tau": 1.0'),
    ):
        help = f"{what} or JSON, e.g. '{{\"kind\": {example}}}'"
        theory.add_argument(flag, default=name, help=help)
    variants = ("both", "paper", "finite_vocab")
    theory.add_argument(
        "--variant", choices=variants, default="both", help="which theta (default: both)"
    )
    theory.add_argument(
        "--config",
        help="a sweep config whose positional_models and weight_models --positional and "
        "--weights may name (e.g. --config my.yaml --positional prefix4)",
    )
    return parser


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``attnrmt run`` and ``attnrmt submit``."""
    from attnrmt.driver import DEFAULT_PROFILE
    from attnrmt.workflow import shipped_profiles

    parser.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help="Snakemake workflow profile: a folder, or the name of a shipped "
        f"one ({', '.join(shipped_profiles())}; default {DEFAULT_PROFILE})",
    )
    parser.add_argument(
        "--cores", type=_cores, help="Snakemake --cores: a number or 'all' (default: the profile's)"
    )
    parser.add_argument(
        "--snakefile", help="the workflow's Snakefile (default: the one shipped in the package)"
    )


def _cores(text: str) -> int | str:
    """``--cores``: a positive integer, or ``all``."""
    if text == "all":
        return text
    try:
        cores = int(text)
    except ValueError:
        cores = 0
    if cores < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a positive number of cores, or all")
    return cores


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``attnrmt`` console script; its exit code. Bare ``attnrmt`` prints the
    usage (2); a file it may not write is one sentence (1); a closed pipe ends quietly (141)."""
    from attnrmt.extras import MissingExtra
    from attnrmt.sweep.spec.config import ConfigError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = int(args.handler(args))
        sys.stdout.flush()  # a closed pipe fails here, inside the handler below
        return code
    except ConfigError as error:
        for problem in error.problems:
            print(f"attnrmt {args.command}: error: {_one_line(problem)}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, MissingExtra) as error:
        print(f"attnrmt {args.command}: error: {_one_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # Python's recipe: point stdout at devnull so the flush at exit does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as error:
        if error.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not error.filename:
            raise
        print(
            f"attnrmt {args.command}: error: cannot write {error.filename}: {error.strerror} "
            "(a read-only results folder or HOME: make it writable, or run where it is)",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    finally:
        from attnrmt.sweep.store.zarr_io import stop_zarr_io

        stop_zarr_io()  # a command that read Zarr stores ends without Zarr's exit traceback


if __name__ == "__main__":
    sys.exit(main())
