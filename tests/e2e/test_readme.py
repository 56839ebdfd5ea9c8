"""The README and the docs site's pages show commands that work as shown.

- The five-line Python example (README.md, included in the site's home page) prints what
  the README claims.
- Every line of every ``bash`` block of README.md and docs/*.md (the site's pages, Getting
  started among them) is either executed here, in a scratch copy of the workflow
  (``.venv/bin/`` becomes this interpreter's bin; ``my.yaml`` is the sweep of Getting
  started, "Writing a sweep", with its grid shrunk to d = 24 and 4 snr values so that the
  run takes seconds; commands with a SLURM profile run as ``-n``), or listed in
  :data:`NOT_RUN` with the reason. A new command in the docs fails
  :func:`test_every_shell_line_is_run_or_excused` until it is classified.
- The run those commands make is then checked for what the docs promise of it: the end
  summary, the report's overview page and its omission of analyses without data, the run
  folder's record refusing another config, ``make`` taking the run name from the config,
  and the run time stated alike in README.md and config.yaml.

The site's notebooks run their own sweeps when ``make docs`` executes them (mkdocs.yml);
tests/test_docs.py checks the rest of what the pages and the README state.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.helpers import subprocess_environment

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
#: The site's page that holds the depth: the sweep config of "Writing a sweep" and its commands.
GETTING_STARTED = REPO / "docs" / "getting-started.md"
BIN = Path(sys.executable).parent

#: Command lines the docs show that this test does not execute, by prefix, with the reason.
NOT_RUN = {
    "make run": "the full default run (minutes); `make -n` is checked in test_make_*",
    "make test": "the whole test suite (this test is part of it)",
    "make report": "checked with `make -n` in test_make_takes_the_run_name_from_the_config",
    "make bench": "benchmarks (minutes)",
    "make docs": "builds the site, executing its notebooks (~1-2 minutes); make test runs it",
    "cd ": "directories of a cluster or a clone; the test runs in a scratch copy",
    ".venv/bin/pip install": "installs the package (minutes, network); CI does this",
    "git clone": "needs network",
    "module load": "an HPC site's module system",
    "python -m venv": "creates a virtual environment (minutes); CI does this",
    "source .venv/bin/activate": "shell state; the test runs .venv/bin commands directly",
    "sbatch": "submits a SLURM job for hours (tests/e2e/test_slurm.py runs SLURM)",
    ".venv/bin/attnrmt submit": "submits a SLURM job (tests/e2e/test_submit.py submits for "
    "real on the test SLURM)",
    "mamba env create": "conda environment (minutes, network)",
    "$EDITOR": "an editor session",
}
#: Executed with ``-n`` added: they need SLURM to run (tests/e2e/test_slurm.py runs it), or
#: they are the shipped long studies (configs/, ~17 minutes: validated and planned here,
#: their pipeline is the one every other e2e test runs).
DRY_RUN_PROFILES = ("profiles/my-site", "profiles/my-slurm", "configs/")


# --------------------------------------------------------------------------- five lines


def test_five_line_example_prints_what_the_readme_claims() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## One point of the theory in five lines", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    claimed = re.search(r"prints `([-0-9. ]+)`", section)
    assert claimed, "the README no longer says what the example prints"
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, str(README), "exec"), {})
    printed = [float(value) for value in output.getvalue().split()]
    expected = [float(value) for value in claimed.group(1).split()]
    # the README rounds to 3 decimals; the seed is fixed, so only rounding separates them
    assert printed == pytest.approx(expected, abs=5e-4)


# --------------------------------------------------------------------------- shell lines


def shell_lines(path: Path) -> list[str]:
    """Command lines of the ``bash`` blocks of a Markdown file (continuations joined,
    comments and blank lines dropped)."""
    text = path.read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split(" #", 1)[0].strip() if not line.startswith("#") else ""
            if command:
                lines.append(" ".join(command.split()))
    return lines


def excuse(command: str) -> str | None:
    """Why ``command`` is not executed (``None``: it is)."""
    for prefix, reason in NOT_RUN.items():
        if command.startswith(prefix):
            return reason
    return None


def doc_commands() -> list[tuple[str, str]]:
    """(document name, command) of every shell line, README first."""
    return [(path.name, command) for path in (README, *DOCS) for command in shell_lines(path)]


def commands_to_run() -> list[tuple[str, str]]:
    """(document, command) executed here: the ``&&`` parts of lines not excused whole,
    less the excused parts."""
    return [
        (document, part)
        for document, command in doc_commands()
        if excuse(command) is None
        for part in command.split(" && ")
        if excuse(part) is None
    ]


def test_every_shell_line_is_run_or_excused() -> None:
    commands = doc_commands()
    assert len(commands) >= 10, commands
    run = [command for _, command in commands_to_run()]
    assert any(command.startswith(".venv/bin/snakemake stores") for command in run)
    for command in run:
        program = command.split()[0]
        assert program in {
            ".venv/bin/attnrmt",
            ".venv/bin/snakemake",
            "attnrmt",
            "snakemake",
            "cp",
        }, f"unclassified command: {command}"


def documented_sweep_text() -> str:
    """The YAML of the sweep config that Getting started, "Writing a sweep", shows."""
    section = GETTING_STARTED.read_text(encoding="utf-8").split("## Writing a sweep", 1)[1]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


def readme_sweep(grid_d: list[int], snr_num: int) -> dict:
    """The documented sweep config, its grid shrunk so that it runs in seconds."""
    config = yaml.safe_load(documented_sweep_text())
    for sweep in config["sweeps"].values():
        sweep.update(d=grid_d, replicates=2, top_k=2)
        sweep["snr"] = {**sweep["snr"], "num": snr_num}
    return config


def test_documented_sweep_is_valid_as_written() -> None:
    from attnrmt.sweep.spec.config import load_valid_config

    path_free = yaml.safe_load(documented_sweep_text())
    warnings = load_valid_config(path_free).warnings  # raises on any problem
    # it shows how to define each kind of model, so some are defined but unused: warned
    assert {w.split(":")[0] for w in warnings} == {
        "positional_models.mk",
        "positional_models.lab",
        "weight_models.att1",
    }


def as_run(command: str, workdir: Path) -> list[str]:
    """The argv that executes a documented command here."""
    argv = shlex.split(command)
    if argv[0].startswith(".venv/bin/"):
        argv[0] = str(BIN / argv[0].removeprefix(".venv/bin/"))
    elif argv[0] in {"attnrmt", "snakemake"}:
        argv[0] = str(BIN / argv[0])
    if Path(argv[0]).name == "snakemake" and any(p in command for p in DRY_RUN_PROFILES):
        argv.append("-n")
    return argv


@pytest.fixture(scope="module")
def documented_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Execute every documented command in order in a scratch copy of the workflow."""
    workdir = tmp_path_factory.mktemp("readme")
    (workdir / "Snakefile").symlink_to(REPO / "Snakefile")  # includes workflow/Snakefile
    (workdir / "workflow").symlink_to(REPO / "workflow")
    shutil.copytree(REPO / "profiles", workdir / "profiles")  # (the link's target)
    shutil.copytree(REPO / "configs", workdir / "configs")
    shutil.copy(REPO / "config.yaml", workdir / "config.yaml")
    config = readme_sweep(grid_d=[24], snr_num=4)
    (workdir / "my.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    unnamed = {key: value for key, value in config.items() if key != "run"}  # run: my-sweep
    (workdir / "my-sweep.yaml").write_text(yaml.safe_dump(unnamed), encoding="utf-8")
    env = subprocess_environment()
    outputs = {}
    started = time.time()
    try:
        for document, command in commands_to_run():
            completed = subprocess.run(
                as_run(command, workdir),
                cwd=workdir,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            outputs[command] = completed
            assert completed.returncode == 0, (
                f"{document}: `{command}` failed ({completed.returncode}):\n"
                f"{(completed.stdout + completed.stderr)[-3000:]}"
            )
        yield {
            "workdir": workdir,
            "config": config,
            "outputs": outputs,
            "env": env,
            "started": started,
        }
    finally:
        from attnrmt.sweep.compute.cluster import shutdown_run_cluster

        shutdown_run_cluster(workdir / "results" / config["run"])  # wait for the daemon


def test_documented_commands_run_as_shown(documented_run: dict) -> None:
    outputs = documented_run["outputs"]
    stores = next(
        out for cmd, out in outputs.items() if cmd.startswith(".venv/bin/snakemake stores")
    )
    assert "Nothing to be done" in stores.stdout + stores.stderr  # the run before made them
    validate = next(out for cmd, out in outputs.items() if "attnrmt validate my.yaml" in cmd)
    assert "valid (run 'mysweep'" in validate.stdout


def test_end_summary_names_results_cells_and_verdicts(documented_run: dict) -> None:
    summary = next(
        out for cmd, out in documented_run["outputs"].items() if "attnrmt summary" in cmd
    )
    lines = summary.stdout.splitlines()
    n_cells = 1 * 4 * 4 * 2  # d x weights x snr x replicates of the shrunk documented sweep
    assert lines[0] == (
        "run 'mysweep' (my.yaml): results in results/mysweep/, report results/mysweep/report.html"
    )
    assert lines[1] == f"cells: {n_cells} in 1 sweeps; {n_cells} finished, 0 failed"
    assert re.match(r"theory: (paper|finite_vocab) fits best \(median relative error", lines[2])
    assert lines[3].startswith("thresholds (")


def test_end_summary_tells_computed_from_reused(documented_run: dict) -> None:
    """``--since`` (``make run`` passes its start): the run's cells count as computed by
    it; a later start finds every cell reused, and the wall time is shown."""
    n_cells = 1 * 4 * 4 * 2
    for since, counts in (
        (documented_run["started"], f"{n_cells} computed by this run, 0"),
        (time.time(), f"0 computed by this run, {n_cells}"),
    ):
        completed = subprocess.run(
            [str(BIN / "attnrmt"), "summary", "my.yaml", "--since", str(since)],
            cwd=documented_run["workdir"],
            env=documented_run["env"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        lines = completed.stdout.splitlines()
        assert lines[1] == f"cells: {n_cells} in 1 sweeps; {counts} reused, 0 failed"
        assert re.fullmatch(r"wall time: (\d+ min )?\d+ s", lines[2])


def _report_variable(html: str, name: str) -> object:
    """A JSON data variable of Snakemake's report (one line; library code may reuse names)."""
    for text in re.findall(rf"\n\s*(?:var|const|let) {name} = (.*?);?\n", html):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            continue
    raise AssertionError(f"report has no JSON variable {name}")


def test_report_opens_on_an_overview_and_leaves_out_analyses_without_data(
    documented_run: dict,
) -> None:
    workdir = documented_run["workdir"]
    html = (workdir / "results" / "mysweep" / "report.html").read_text(encoding="utf-8")
    metadata = _report_variable(html, "metadata")
    # non-empty metadata makes Snakemake's report open on the overview, not on the DAG
    assert any("median relative error of outliers and overlaps" in key for key in metadata)
    assert all(isinstance(value, int | float) for value in metadata.values())
    assert "attnrmt run mysweep" in _report_variable(html, "workflow_desc")
    reported = [
        path
        for groups in _report_variable(html, "categories").values()
        for paths in groups.values()
        for path in paths
    ]
    names = {Path(path).name for path in reported}
    # the documented sweep has no causal_attention weights, no label model, no uncentred S,
    # no table law
    assert not names & {
        "universality.csv",
        "universality_verdict.csv",
        "universality.png",
        "causal_verdict.csv",
        "downstream_ranking.csv",
        "centring.csv",
        "causal_weights.png",
        "downstream.png",
        "centring.png",
        "failed_cells.csv",
    }, names
    assert {"summary.csv", "thresholds.csv", "comparison.csv", "pooling.png"} <= names


def test_run_folder_refuses_another_config_file(documented_run: dict) -> None:
    workdir = documented_run["workdir"]
    record = json.loads((workdir / "results" / "mysweep" / ".attnrmt-run.json").read_text())
    mine = workdir / "my.yaml"
    assert record == {"config_file": "my.yaml", "config_path": str(mine.resolve())}
    other = workdir / "other.yaml"
    other.write_text(yaml.safe_dump(documented_run["config"]), encoding="utf-8")  # run: mysweep
    completed = subprocess.run(
        [str(BIN / "snakemake"), "-n", "--cores", "1", "--configfile", "other.yaml"],
        cwd=workdir,
        env=documented_run["env"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode != 0 and "Traceback" not in output
    assert (
        "attnrmt: run 'mysweep': results/mysweep/ holds the results of the config file "
        "'my.yaml'" in output
    ), output[-2000:]


def test_make_takes_the_run_name_from_the_config(tmp_path: Path) -> None:
    """``make report CONFIG=...`` writes the report of the config's run (no RUN default)."""
    config = readme_sweep(grid_d=[24], snr_num=4)
    del config["run"]
    path = tmp_path / "exp-7.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    for target in ("report", "run"):
        completed = subprocess.run(
            [
                "make",
                "-n",
                "-o",
                ".venv/.attnrmt-installed",
                target,
                f"CONFIG={path}",
                f"BIN={BIN}",
            ],
            cwd=REPO,
            env=subprocess_environment(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
        commands = completed.stdout
        if target == "run":  # `make run` is `attnrmt run`: its steps, as --dry-run prints them
            run_line = next(line for line in commands.splitlines() if " run " in line)
            assert shlex.split(run_line)[:3] == [f"{BIN}/attnrmt", "run", str(path)], run_line
            commands = subprocess.run(
                [*shlex.split(run_line), "--dry-run"],
                cwd=REPO,
                env=subprocess_environment(),
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stdout
        assert "--report results/exp-7/report.html" in commands, commands
        assert "results/default" not in commands


def test_readme_and_config_yaml_state_the_same_run() -> None:
    """The default run's size and measured time are stated alike (and the size is true)."""
    from attnrmt.sweep import plan_run
    from attnrmt.sweep.spec.config import load_valid_config

    valid = load_valid_config(REPO / "config.yaml")
    cells = sum(len(s.cells) for s in plan_run(valid.config, valid.sweeps).sweeps.values())
    readme = " ".join(README.read_text(encoding="utf-8").split())
    header = " ".join(
        line.lstrip("# ") for line in (REPO / "config.yaml").read_text().splitlines()[:6]
    )
    claim = re.compile(r"(\d+) single-core seconds of cell compute.*?measured (\d+) minutes")
    readme_claim, config_claim = claim.search(readme), claim.search(header)
    assert readme_claim and config_claim
    assert readme_claim.groups() == config_claim.groups()
    assert f"{cells:,} cells" in readme and f"{cells:,} cells" in header
