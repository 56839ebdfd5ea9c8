"""Command line of attnrmt: check a sweep config, see its plan, ask the theory.

- ``attnrmt validate CONFIG``: schema + semantic checks; prints a one-line summary.
- ``attnrmt plan CONFIG [--results DIR]``: per sweep, cells, blocks, how many are already
  done (from the fragments on disk) and an estimated compute cost.
- ``attnrmt status RUN_DIR_OR_CONFIG [--watch SECONDS] [--json]``: per sweep, cells done /
  failed / pending, cells per second and an ETA (read-only; works during a run).
- ``attnrmt summary CONFIG [--since EPOCH]``: the end-of-run summary (``make run``).
- ``attnrmt run CONFIG [--profile DIR] [--cores N]``: a whole run (validate, Snakemake,
  report, summary); ``make run`` and the driver job of ``attnrmt submit`` call it.
- ``attnrmt submit CONFIG [--profile DIR] [--time ..] [--partition ..] ...``: the whole run
  as one SLURM batch job (log out, follow it with ``attnrmt status``); rerun to resume.
- ``attnrmt provenance RUN_DIR_OR_CONFIG [--json]``: cells by commit (dirty flagged),
  package/Python/numpy/scipy/BLAS versions, hosts, wall time, peak memory, attempts.
- ``attnrmt run-name CONFIG``: the run name (results/<run>/) of a config (for scripts).
- ``attnrmt theory --delta .. --gamma .. --snr .. --T .. --positional .. --weights ..``:
  pooling scalars, bulk edges, outliers, overlaps and thresholds for both variants;
  ``--config FILE`` lets ``--positional``/``--weights`` name that file's models.

Errors (a bad config or argument) go to stderr, one line per problem; the exit code is
then 2. Warnings (e.g. a model no sweep uses) go to stderr and do not fail.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnrmt.sweep.cost import (
    ATTENTION_WORK_FACTOR,
    CELL_OVERHEAD_SECONDS,
    DEFAULT_SECONDS_PER_WORK,
    TOP_COLUMNS_EXPONENT,
    TOP_COLUMNS_SCALE,
    TOP_FIXED_WORK,
    planned_cell_work,
)
from attnrmt.sweep.status import format_duration

EXIT_OK = 0
EXIT_REFUSED = 1  # attnrmt submit: the run's driver job is still queued or running
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the pipe


def cell_work(cell: Any) -> float:
    """Work units of a planned cell (:func:`attnrmt.sweep.cost.planned_cell_work`)."""
    return planned_cell_work(cell)


def calibrate_seconds_per_work(run_dir: Path) -> float:
    """Seconds per work unit on this machine, measured once per run directory
    (:func:`attnrmt.sweep.cost.cached_seconds_per_work`: identical calls, identical
    estimates)."""
    from attnrmt.sweep.cost import cached_seconds_per_work

    return cached_seconds_per_work(run_dir / ".calibration.json")


# --------------------------------------------------------------------------- plan


def finished_keys(sweep_dir: Path) -> set[str]:
    """Keys of the finished cells under ``sweep_dir`` (none when it does not exist)."""
    from attnrmt.sweep.store import finished_cell_keys

    return set(finished_cell_keys(sweep_dir)) if sweep_dir.exists() else set()


def sweep_summary(
    sweep: Any, done: set[str], seconds_per_work: float, failed: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """Counts, estimated seconds (total and remaining) and failed cells of one planned sweep.

    ``failed``: the sweep's unresolved failures
    (:func:`attnrmt.sweep.failures.unresolved_failures`); those of cells the sweep no
    longer holds (config changed since) are left out.

    A cell is estimated at ``CELL_OVERHEAD_SECONDS + cell_work(cell) * seconds_per_work``.
    """
    total_seconds = remaining_seconds = 0.0
    for cell in sweep.cells:
        seconds = CELL_OVERHEAD_SECONDS + cell_work(cell) * seconds_per_work
        total_seconds += seconds
        if cell.key not in done:
            remaining_seconds += seconds
    done_blocks = sum(all(key in done for key in block.cell_keys) for block in sweep.blocks)
    keys = sweep.cell_keys()  # from the plan's arrays: no Cell built
    planned_keys = set(keys)
    return {
        "sweep": sweep.name,
        "cells": len(sweep.cells),
        "blocks": len(sweep.blocks),
        "done_cells": sum(key in done for key in keys),
        "done_blocks": done_blocks,
        "estimated_seconds": total_seconds,
        "estimated_remaining_seconds": remaining_seconds,
        "config_sha256": sweep.config_sha256,
        "failed_cells": [cell for cell in failed if cell.get("key") in planned_keys],
    }


def _print_plan_table(rows: list[dict[str, Any]]) -> None:
    header = ("sweep", "cells", "blocks", "done cells", "done blocks", "est. total", "est. left")
    lines = [header]
    for row in rows:
        lines.append(
            (
                row["sweep"],
                str(row["cells"]),
                str(row["blocks"]),
                str(row["done_cells"]),
                str(row["done_blocks"]),
                format_duration(row["estimated_seconds"]),
                format_duration(row["estimated_remaining_seconds"]),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        numbers = [value.rjust(width) for value, width in zip(line[1:], widths[1:], strict=True)]
        print("  ".join([line[0].ljust(widths[0]), *numbers]))


def _print_failures(rows: Sequence[Mapping[str, Any]], run_dir: Path) -> None:
    """One line per failed cell: sweep, block, key, main parameters and the error."""
    from attnrmt.sweep.failures import count_failures_by_cause, describe_causes

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


def command_plan(args: argparse.Namespace) -> int:
    """``attnrmt plan``: cells, blocks, done and failed cells, estimated cost per sweep."""
    from attnrmt.sweep import plan_run
    from attnrmt.sweep.config import claim_run_dir
    from attnrmt.sweep.failures import unresolved_failures

    valid = _load(args)
    run_plan = plan_run(valid.config, valid.sweeps)
    run_dir = Path(args.results) / run_plan.run
    claim_run_dir(run_dir, args.config, write=False)
    if args.no_calibrate:
        seconds_per_work, source = DEFAULT_SECONDS_PER_WORK, "built-in constant"
    else:
        seconds_per_work = calibrate_seconds_per_work(run_dir)
        source = f"measured on this machine, kept in {run_dir / '.calibration.json'}"
    rows = []
    for sweep in run_plan.sweeps.values():
        done = finished_keys(run_dir / sweep.name)
        failed = unresolved_failures(run_dir / sweep.name, done)
        rows.append(sweep_summary(sweep, done, seconds_per_work, failed))
    if args.json:
        print(json.dumps({"run": run_plan.run, "seed": run_plan.seed, "sweeps": rows}, indent=2))
        return EXIT_OK
    print(f"run {run_plan.run!r} (seed {run_plan.seed}) -> {run_dir}")
    _print_plan_table(rows)
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
    """``(run plan, run dir)`` of ``attnrmt status TARGET``: a config file (its run under
    ``results``) or a run directory ``results/<run>`` (its config from the run's record,
    written by the first run: :func:`attnrmt.sweep.config.claim_run_dir`)."""
    from attnrmt.sweep import plan_run
    from attnrmt.sweep.config import RUN_RECORD, load_valid_config

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
        valid = load_valid_config(config_path)
        return plan_run(valid.config, valid.sweeps), path
    valid = load_valid_config(path)
    run_plan = plan_run(valid.config, valid.sweeps)
    return run_plan, Path(results) / run_plan.run


def command_status(args: argparse.Namespace) -> int:
    """``attnrmt status``: done / failed / pending cells, cells per second and ETA per
    sweep (:mod:`attnrmt.sweep.status`); ``--watch`` repeats until interrupted."""
    import time

    from attnrmt.sweep.driver import driver_status_line
    from attnrmt.sweep.status import run_status, status_table

    run_plan, run_dir = status_plan(args.target, args.results)
    try:
        while True:
            status = run_status(run_plan, run_dir)
            driver = driver_status_line(run_dir)
            if args.json:
                print(
                    json.dumps(_json_safe({**status.to_json(), "driver": driver and driver[1]})),
                    flush=True,
                )
            else:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(status.time))
                print(f"run {run_plan.run!r} -> {run_dir} at {stamp}")
                print("\n".join(status_table(status)), flush=True)
                if driver is not None:
                    print(driver[0], flush=True)
            if args.watch is None:
                return EXIT_OK
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return EXIT_OK


def command_run(args: argparse.Namespace) -> int:
    """``attnrmt run``: validate (printing ``attnrmt validate``'s line), Snakemake with the
    profile, report, summary (:func:`attnrmt.sweep.driver.run_pipeline`); ``--dry-run``
    prints the Snakemake commands instead."""
    from attnrmt.sweep.driver import pipeline_commands, run_pipeline

    command_validate(args)  # the one-line summary; a bad config stops here
    if args.dry_run:
        valid = _load(args)
        for command in pipeline_commands(
            args.config, valid.config["run"], args.profile, args.snakefile, args.cores
        ):
            print(shlex.join(command))
        return EXIT_OK
    return run_pipeline(args.config, args.profile, args.snakefile, args.cores)


def command_submit(args: argparse.Namespace) -> int:
    """``attnrmt submit``: the whole run as one SLURM job (:func:`attnrmt.sweep.driver.submit`);
    refused (exit 1) while the run's driver job is queued or running."""
    from attnrmt.sweep.driver import DriverAlive, DriverRequest, follow_hint, submit

    request = DriverRequest(
        time=args.time,
        cpus_per_task=args.cpus_per_task,
        mem=args.mem,
        partition=args.partition,
        account=args.account,
        extra=tuple(args.sbatch or ()),
    )
    try:
        record = submit(args.config, args.profile, request, args.snakefile, args.cores)
    except DriverAlive as alive:
        print(f"attnrmt submit: {alive}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"submitted driver job {record['job_id']} of run {record['run']!r} ({record['script']})")
    print(follow_hint(args.config, record))
    return EXIT_OK


def command_validate(args: argparse.Namespace) -> int:
    """``attnrmt validate``: schema + semantic checks, one-line summary."""
    from attnrmt.sweep import plan_run

    valid = _load(args)
    run_plan = plan_run(valid.config, valid.sweeps)
    n_cells = sum(len(sweep.cells) for sweep in run_plan.sweeps.values())
    names = ", ".join(run_plan.sweeps)
    print(f"{args.config}: valid (run {run_plan.run!r}; sweeps {names}; {n_cells} cells)")
    return EXIT_OK


def _load(args: argparse.Namespace) -> Any:
    """The config of ``args.config``, validated once; its warnings printed to stderr."""
    from attnrmt.sweep.config import load_valid_config

    valid = load_valid_config(args.config)
    for warning in valid.warnings:
        print(f"attnrmt {args.command}: warning: {warning}", file=sys.stderr)
    return valid


def command_summary(args: argparse.Namespace) -> int:
    """``attnrmt summary``: where the results are, cells, wall time, headline verdicts."""
    from attnrmt.summary import run_summary
    from attnrmt.sweep import plan_run

    valid = _load(args)
    run_plan = plan_run(valid.config, valid.sweeps)
    for line in run_summary(run_plan, args.results, args.since, args.config):
        print(line)
    return EXIT_OK


def command_run_name(args: argparse.Namespace) -> int:
    """``attnrmt run-name``: the config's run name (``run:``, else the file's stem)."""
    from attnrmt.sweep.config import load_valid_config

    print(load_valid_config(args.config).config["run"])
    return EXIT_OK


def command_provenance(args: argparse.Namespace) -> int:
    """``attnrmt provenance``: which code, environment and resources produced the cells."""
    from attnrmt.sweep.provenance import provenance_lines, run_provenance

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


def parse_model_argument(text: str, named: Mapping[str, Any] | None = None) -> str | dict[str, Any]:
    """A model given on the command line: JSON (``'{"kind": "prefix", "L": 4}'``) or a name.

    ``named``: models of a config file (its ``positional_models`` or ``weight_models``);
    a name found there is replaced by its spec. Other names are left to the model's
    validation (built-ins such as ``iid`` or ``mean``).
    """
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


def substitution_notes(weights_spec: Mapping[str, Any]) -> list[str]:
    """What the theory uses in place of a model it has no closed form for."""
    if weights_spec.get("kind") == "causal_attention":
        tau = weights_spec.get("tau", 0.0)
        return [
            f"causal_attention(tau={tau:g}) has data-dependent weights: the theory uses "
            f"their d -> infinity limit causal_limit(tau={tau:g})"
        ]
    return []


def theory_report(
    delta: float,
    gamma: float,
    snr: float,
    T: int,
    positional: str | dict[str, Any],
    weights: str | dict[str, Any],
    variants: Sequence[str],
) -> dict[str, Any]:
    """Pooling scalars, bulk edges and spike predictions for one parameter point
    (docs/model.md, "Pooling scalars", "Bulk law", "Spikes").

    Eigenvalue-like quantities are in the units of ``S`` (``kappa`` included).
    """
    from attnrmt import model
    from attnrmt.theory import predict_point

    positional_spec = _validated("positional", model.validate_positional, positional, T)
    weights_spec = _validated("weights", model.validate_weights, weights, T)
    point = predict_point(
        delta, gamma, snr, T, positional_spec, weights_spec, centered=False, variants=variants
    )
    alpha, kappa, sigma = (float(point[name]) for name in ("alpha", "kappa", "sigma"))
    # predict() broadcasts the bulk over variants; it is the same law in both.
    first = point.isel(variant=0)
    report: dict[str, Any] = {
        "inputs": {
            "delta": delta,
            "gamma": gamma,
            "snr": snr,
            "T": T,
            "positional": positional_spec,
            "weights": weights_spec,
        },
        "weights_vector": [float(x) for x in point["pooling_weights"].values],
        "alpha": alpha,
        "kappa": kappa,
        "sigma": sigma,
        "alpha_over_kappa": alpha / kappa,
        "bulk": {
            "lower_edge": float(first["bulk_lower_edge"]),
            "upper_edge": float(first["bulk_upper_edge"]),
            "atom": float(first["bulk_atom"]),
        },
        "variants": {},
        "notes": substitution_notes(weights_spec),
    }
    for variant in variants:
        at = point.sel(variant=variant)
        report["variants"][variant] = {
            name: float(at[stored]) for name, stored in _REPORTED_SPIKE_FIELDS.items()
        }
    report["mean_spike_uncentred"] = {
        "population_outlier": float(point["mean_spike_pop_outlier"]),
        "sample_outlier": float(point["mean_spike_outlier"]),
        "sample_overlap": float(point["mean_spike_overlap"]),
    }
    return report


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


def command_theory(args: argparse.Namespace) -> int:
    """``attnrmt theory``: predictions for one parameter point, both variants by default."""
    from attnrmt.theory import VARIANTS

    variants = VARIANTS if args.variant == "both" else (args.variant,)
    named: Mapping[str, Any] = {}
    if args.config is not None:
        named = _load(args).config
    report = theory_report(
        args.delta,
        args.gamma,
        args.snr,
        args.T,
        parse_model_argument(args.positional, named.get("positional_models")),
        parse_model_argument(args.weights, named.get("weight_models")),
        variants,
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


DESCRIPTION = (
    "Random-matrix theory of attention pooling: check a sweep config, see its plan, "
    "ask the theory for one parameter point."
)
EPILOG = (
    "Run a sweep: attnrmt run my.yaml (or snakemake --cores 2 --configfile my.yaml; see "
    "README.md); on SLURM, log out with attnrmt submit my.yaml --profile DIR. "
    "'attnrmt COMMAND --help' describes a command."
)


def build_parser() -> argparse.ArgumentParser:
    """The ``attnrmt`` argument parser (plain-text help)."""
    from attnrmt import __version__

    parser = _ArgumentParser(prog="attnrmt", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"attnrmt {__version__}")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_ArgumentParser
    )

    validate = commands.add_parser("validate", help="check a config (schema + semantics)")
    validate.add_argument("config", help="YAML config file")
    validate.set_defaults(handler=command_validate)

    plan = commands.add_parser("plan", help="cells, blocks, progress and estimated cost")
    plan.add_argument("config", help="YAML config file")
    plan.add_argument("--results", default="results", help="results directory (default: results)")
    plan.add_argument("--json", action="store_true", help="print JSON instead of a table")
    plan.add_argument(
        "--no-calibrate",
        action="store_true",
        help="use a built-in cost constant instead of timing one small cell",
    )
    plan.set_defaults(handler=command_plan)

    status = commands.add_parser(
        "status", help="cells done / failed / pending, throughput and ETA of a run"
    )
    status.add_argument("target", help="results/<run> directory or YAML config file")
    status.add_argument(
        "--results", default="results", help="results directory, for a config (default: results)"
    )
    status.add_argument(
        "--watch",
        type=float,
        default=None,
        metavar="SECONDS",
        help="refresh every SECONDS until interrupted",
    )
    status.add_argument("--json", action="store_true", help="print JSON (one line per refresh)")
    status.set_defaults(handler=command_status)

    summary = commands.add_parser(
        "summary", help="end-of-run summary: results, cells, wall time, verdicts"
    )
    summary.add_argument("config", help="YAML config file")
    summary.add_argument("--results", default="results", help="results directory")
    summary.add_argument(
        "--since",
        type=float,
        default=None,
        help="start of the run (seconds since the epoch, e.g. from date +%%s): cells "
        "written since then count as computed by this run, and the wall time is shown",
    )
    summary.set_defaults(handler=command_summary)

    provenance = commands.add_parser(
        "provenance", help="commits, versions, hosts, wall time, memory, attempts of the cells"
    )
    provenance.add_argument(
        "target", metavar="RUN_DIR_OR_CONFIG", help="results/<run>, or the run's YAML config"
    )
    provenance.add_argument(
        "--results", default="results", help="results directory of a config (default: results)"
    )
    provenance.add_argument("--json", action="store_true", help="print JSON")
    provenance.set_defaults(handler=command_provenance)

    run = commands.add_parser(
        "run", help="a whole run: validate, Snakemake with a profile, report, summary"
    )
    _add_run_arguments(run)
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="print the Snakemake commands instead of running them",
    )
    run.set_defaults(handler=command_run)

    from attnrmt.sweep.driver import DEFAULT_DRIVER_CPUS

    submit = commands.add_parser(
        "submit", help="the whole run as one SLURM batch job (log out; rerun to resume)"
    )
    _add_run_arguments(submit)
    submit.add_argument(
        "--time",
        default=None,
        help="walltime of the driver job (sbatch --time; default: the site's)",
    )
    submit.add_argument(
        "--cpus-per-task",
        type=int,
        default=DEFAULT_DRIVER_CPUS,
        help=f"cores of the driver job (default {DEFAULT_DRIVER_CPUS})",
    )
    submit.add_argument(
        "--mem", default=None, help="memory of the driver job (sbatch --mem; default: the site's)"
    )
    submit.add_argument("--partition", default=None, help="partition (default: the site's)")
    submit.add_argument("--account", default=None, help="account (default: the site's)")
    submit.add_argument(
        "--sbatch",
        action="append",
        metavar="OPTION",
        help="another sbatch option for the driver job, e.g. --sbatch=--qos=long (repeatable)",
    )
    submit.set_defaults(handler=command_submit)

    run_name = commands.add_parser(
        "run-name", help="print the run name of a config (results/<run>/)"
    )
    run_name.add_argument("config", help="YAML config file")
    run_name.set_defaults(handler=command_run_name)

    theory = commands.add_parser("theory", help="theory predictions for one parameter point")
    theory.add_argument("--delta", type=float, default=0.5, help="d/V (default 0.5)")
    theory.add_argument("--gamma", type=float, default=0.5, help="d/N (default 0.5)")
    theory.add_argument("--snr", type=float, default=1.0, help="||mu||^2 (default 1)")
    theory.add_argument("--T", type=int, default=8, help="sequence length (default 8)")
    theory.add_argument(
        "--positional",
        default="iid",
        help='positional model: a name (iid) or JSON, e.g. \'{"kind": "prefix", "L": 4}\'',
    )
    theory.add_argument(
        "--weights",
        default="mean",
        help="weights: mean, last, optimal, harmonic or JSON, e.g. "
        '\'{"kind": "causal_limit", "tau": 1.0}\'',
    )
    theory.add_argument(
        "--variant",
        choices=("both", "paper", "finite_vocab"),
        default="both",
        help="which theta (default: both)",
    )
    theory.add_argument(
        "--config",
        default=None,
        help="a sweep config whose positional_models and weight_models --positional and "
        "--weights may name (e.g. --config my.yaml --positional prefix4)",
    )
    theory.add_argument("--json", action="store_true", help="print JSON")
    theory.set_defaults(handler=command_theory)
    return parser


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``attnrmt run`` and ``attnrmt submit``."""
    from attnrmt.sweep.driver import DEFAULT_PROFILE

    parser.add_argument("config", help="YAML config file")
    parser.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help=f"Snakemake workflow profile (default {DEFAULT_PROFILE})",
    )
    parser.add_argument(
        "--cores", type=int, default=None, help="Snakemake --cores (default: the profile's)"
    )
    parser.add_argument(
        "--snakefile", default=None, help="the workflow's Snakefile (default: Snakefile here)"
    )


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``attnrmt`` console script; returns the exit code.

    Bare ``attnrmt`` prints the usage (exit 2). A closed pipe (``attnrmt plan ... | head``)
    ends the command quietly, as for other Unix tools.
    """
    from attnrmt.sweep.config import ConfigError

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
    except ValueError as error:
        print(f"attnrmt {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # Python's recipe: point stdout at devnull so the flush at exit does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
