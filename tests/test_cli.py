"""The ``attnrmt`` command line: exit codes, one-line errors, plan and theory output."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from attnrmt import cli

CONFIGS = Path(__file__).with_name("configs")
SMALL = CONFIGS / "small.yaml"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnrmt.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


# --------------------------------------------------------------------------- subprocess


def test_validate_good_config_exits_0() -> None:
    result = run_cli("validate", str(SMALL))
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout and "136 cells" in result.stdout


def test_bad_config_exits_2_with_one_line_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        SMALL.read_text(encoding="utf-8").replace("[prefix4, iid]", "[prefix9, iid]"),
        encoding="utf-8",
    )
    for command in ("validate", "plan"):
        result = run_cli(command, str(bad))
        assert result.returncode == 2
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1
        assert "sweeps.transition.positional[0]='prefix9'" in lines[0]


def test_theory_bad_model_exits_2() -> None:
    result = run_cli("theory", "--T", "8", "--positional", '{"kind": "prefix", "L": 9}')
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == "attnrmt theory: error: --positional: positional.L=9: must be <= T=8"
    )


def test_unknown_command_exits_2() -> None:
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- in process


def test_missing_config_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", "no/such/config.yaml"]) == 2
    assert "not found" in capsys.readouterr().err


def test_plan_table_lists_every_sweep(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main(["plan", str(SMALL), "--results", str(tmp_path), "--no-calibrate"]) == 0
    out = capsys.readouterr().out
    assert "transition" in out and "markov" in out
    assert "ESTIMATE" in out
    assert "spectrum top: 1.7e+08 + 2 x 144 d^0.15 (V d + N T)" in out  # its fitted constants


def test_plan_json_counts_done_cells(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnrmt.sweep import load_config, plan_run

    sweep = plan_run(load_config(SMALL)).sweeps["transition"]
    first_block = sweep.blocks[0]
    done = {*first_block.cell_keys, sweep.blocks[1].cells[0].key}

    from attnrmt.sweep.report import status as progress

    def fake_done(sweep_plan: Any, files: Any) -> set[str]:
        return done if sweep_plan.name == "transition" else set()

    monkeypatch.setattr(progress, "done_cell_keys", fake_done)
    assert (
        cli.main(["plan", str(SMALL), "--results", str(tmp_path), "--json", "--no-calibrate"]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    rows = {row["sweep"]: row for row in report["sweeps"]}
    assert rows["transition"]["cells"] == 128 and rows["transition"]["blocks"] == 32
    assert rows["transition"]["done_cells"] == len(done)
    assert rows["transition"]["done_blocks"] == 1
    assert rows["markov"]["done_cells"] == 0
    total, left = (
        rows["transition"][k] for k in ("estimated_seconds", "estimated_remaining_seconds")
    )
    assert 0 < left < total


def test_count_without_results_is_all_pending(tmp_path: Path) -> None:
    from attnrmt.sweep import load_config, plan_run
    from attnrmt.sweep.report.status import count_sweep

    sweep = plan_run(load_config(SMALL)).sweeps["transition"]
    count = count_sweep(sweep, tmp_path / "run" / "transition")
    assert (len(count.done), len(count.failed), count.pending) == (0, 0, sweep.n_cells)


def test_plan_lists_recorded_failures_of_cells_still_planned(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from attnrmt.sweep import load_config, plan_run
    from attnrmt.sweep.compute.failures import failed_blocks
    from attnrmt.sweep.report.failed_cells import failed_cells_table
    from attnrmt.sweep.store.failures import clear_block_failures, record_block_failures

    config = load_config(SMALL)
    run_plan = plan_run(config)
    sweep = run_plan.sweeps["transition"]
    block = sweep.blocks[0]
    fragment = tmp_path / config["run"] / "transition" / "fragments" / f"{block.key}.npz"
    failed = {
        "key": block.cells[0].key,
        "seed": "[1]",
        "params": {"d": 100, "snr": 0.5},
        "error": "MemoryError('Unable to allocate 1.8 TiB')",
        "cause": "out_of_memory",
    }
    gone = dict(failed, key="0" * 64)  # a cell no longer in the config
    record_block_failures(fragment, [failed, gone])
    arguments = ["plan", str(SMALL), "--results", str(tmp_path), "--no-calibrate"]
    assert cli.main([*arguments, "--json"]) == 0
    rows = {row["sweep"]: row for row in json.loads(capsys.readouterr().out)["sweeps"]}
    assert [cell["key"] for cell in rows["transition"]["failed_cells"]] == [failed["key"]]
    assert rows["transition"]["failed_cells"][0]["block"] == block.key
    assert rows["markov"]["failed_cells"] == []
    assert cli.main(arguments) == 0
    text = capsys.readouterr().out
    assert "failed cells (1: 1 out_of_memory;" in text
    assert (
        f"block {block.key}  cell {failed['key'][:12]}  d=100, snr=0.5  [out_of_memory]: "
        "MemoryError"
    ) in text
    # what skip_failed leaves out, and the report's table (cells described as configured)
    run_dir = tmp_path / config["run"]
    assert failed_blocks(run_plan, run_dir) == {"transition": {block.key}, "markov": set()}
    table = failed_cells_table(run_plan, run_dir)
    assert table["cell_key"].tolist() == [failed["key"]]
    assert table["cause"].tolist() == ["out_of_memory"]
    cell = block.cells[0]
    assert table.iloc[0][["sweep", "d", "positional", "snr"]].tolist() == [
        "transition",
        cell.d,
        cell.positional,
        cell.snr,
    ]
    clear_block_failures(fragment)
    assert cli.main(arguments) == 0
    assert "failed cells" not in capsys.readouterr().out
    assert failed_blocks(run_plan, run_dir)["transition"] == set()
    assert failed_cells_table(run_plan, run_dir).empty


def test_theory_prints_both_variants(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "theory",
        "--delta",
        "0.5",
        "--gamma",
        "0.5",
        "--snr",
        "2",
        "--T",
        "8",
        "--positional",
        '{"kind":"prefix","L":4}',
        "--weights",
        "mean",
    ]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "alpha=0.3125 kappa=0.125" in out
    assert "paper" in out and "finite_vocab" in out
    assert "threshold_snr_sample" in out


def test_theory_json_is_strict_and_consistent(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "theory",
        "--snr",
        "0.05",
        "--weights",
        '{"kind": "causal_limit", "tau": 1.0}',
        "--variant",
        "paper",
        "--json",
    ]
    assert cli.main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report["variants"]) == ["paper"]
    paper = report["variants"]["paper"]
    assert paper["sample_outlier"] is None  # below threshold: NaN -> null
    assert report["alpha"] == pytest.approx(report["kappa"])  # iid: alpha = kappa
    assert report["bulk"]["upper_edge"] == pytest.approx(4.409 * report["kappa"], rel=1e-3)


def test_theory_at_a_given_d_is_the_finite_size_spike(capsys: pytest.CaptureFixture[str]) -> None:
    """``--d``: in the finite-T tail regime (T = 1, N T / V = 1, snr 2.5: the limit has no
    separated root) the report is ``predict_point(..., d=300)``, not the closed forms
    (docs/model.md, "Outliers and overlaps at finite T")."""
    from attnrmt.theory import predict_point

    args = ["theory", "--T", "1", "--snr", "2.5", "--variant", "finite_vocab", "--json"]
    overlaps = []
    for extra in ([], ["--d", "300"]):
        assert cli.main([*args, *extra]) == 0
        overlaps.append(json.loads(capsys.readouterr().out)["variants"]["finite_vocab"])
    at_d = predict_point(0.5, 0.5, 2.5, 1, "iid", "mean", False, ("finite_vocab",), d=300)
    assert overlaps[0]["sample_overlap"] == pytest.approx(0.5333, abs=1e-4)  # closed form
    assert overlaps[1]["sample_overlap"] == float(at_d["sample_overlap_signal"].squeeze())
    assert overlaps[1]["sample_overlap"] < overlaps[0]["sample_overlap"] - 0.02


# --------------------------------------------------------------------------- first hour


def test_version_and_bare_usage() -> None:
    from attnrmt import __version__

    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"attnrmt {__version__}"
    bare = run_cli()
    assert bare.returncode == 2
    assert bare.stderr.startswith("usage: attnrmt")
    for command in ("validate", "plan", "run-name", "theory"):
        assert command in bare.stderr


@pytest.mark.parametrize("command", [(), ("validate",), ("plan",), ("theory",), ("run-name",)])
def test_help_is_plain_text(command: tuple[str, ...]) -> None:
    result = run_cli(*command, "--help")
    assert result.returncode == 0
    assert "usage: attnrmt" in result.stdout
    assert "``" not in result.stdout and ":func:" not in result.stdout


def test_closed_pipe_ends_quietly() -> None:
    """``attnrmt plan ... | head``: the reader is gone before the table is printed."""
    process = subprocess.Popen(
        [sys.executable, "-m", "attnrmt.cli", "plan", "--no-calibrate", str(SMALL)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.close()  # as `head` does once it has its lines
    _, stderr = process.communicate(timeout=120)
    assert b"Traceback" not in stderr and b"BrokenPipe" not in stderr, stderr.decode()
    assert process.returncode == cli.EXIT_BROKEN_PIPE


def test_every_config_problem_on_its_own_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: -1\nsweps:\n  s: {d: 40}\n", encoding="utf-8")
    result = run_cli("validate", str(bad))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "attnrmt validate: error: config: unknown top-level key 'sweps' (did you mean "
        "'sweeps'?) (allowed: run, seed, skip_failed, positional_models, weight_models, "
        "label_models, table_models, sweeps, execution, cell_cache, dask, analysis)",
        "attnrmt validate: error: seed=-1: must be >= 0",
    ]


def test_unused_model_warning_and_run_name_from_the_file_stem(tmp_path: Path) -> None:
    config = tmp_path / "my-sweep.yaml"
    config.write_text(
        "positional_models:\n  mk: {kind: markov, r: 0.5}\nsweeps:\n  s: {d: 40}\n",
        encoding="utf-8",
    )
    result = run_cli("validate", str(config))
    assert result.returncode == 0
    assert "run 'my-sweep'" in result.stdout
    assert result.stderr == (
        "attnrmt validate: warning: positional_models.mk: defined but used by no sweep "
        "(sweeps use: iid)\n"
    )
    name = run_cli("run-name", str(config))
    assert (name.returncode, name.stdout) == (0, "my-sweep\n")


def test_plan_refuses_a_run_folder_of_another_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnrmt.sweep.store.guard import claim_run_dir

    monkeypatch.chdir(tmp_path)
    claim_run_dir(tmp_path / "results" / "test-small", "other.yaml")
    assert cli.main(["plan", "--no-calibrate", str(SMALL)]) == 2
    assert "holds the results of the config file 'other.yaml'" in capsys.readouterr().err


def test_theory_takes_model_names_from_a_config(capsys: pytest.CaptureFixture[str]) -> None:
    repo_config = Path(__file__).resolve().parents[1] / "config.yaml"
    named = ["theory", "--config", str(repo_config), "--positional", "prefix4", "--json"]
    spelled = ["theory", "--positional", '{"kind": "prefix", "L": 4}', "--json"]
    assert cli.main([*named, "--weights", "causal1"]) == 0
    by_name = json.loads(capsys.readouterr().out)
    assert cli.main([*spelled, "--weights", '{"kind": "causal_limit", "tau": 1.0}']) == 0
    assert json.loads(capsys.readouterr().out) == by_name
    assert by_name["notes"] == []
    assert cli.main(["theory", "--config", str(repo_config), "--weights", "att1"]) == 0
    assert (
        "note: causal_attention(tau=1) has data-dependent weights: the theory uses their "
        "d -> infinity limit causal_limit(tau=1)" in capsys.readouterr().out
    )


# --------------------------------------------------------------------------- newcomer


def test_python_m_attnrmt_is_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "attnrmt", "validate", str(SMALL)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == run_cli("validate", str(SMALL)).stdout


def test_plan_before_the_first_run_creates_no_results_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """With the calibration (one small cell timed): the estimate is shown, nothing is
    written; once the run folder exists the measurement is kept there."""
    results = tmp_path / "results"
    assert cli.main(["plan", str(CONFIGS / "tiny.yaml"), "--results", str(results)]) == 0
    assert "measured on this machine now; kept once" in capsys.readouterr().out
    assert not results.exists()
    (results / "tiny").mkdir(parents=True)
    assert cli.main(["plan", str(CONFIGS / "tiny.yaml"), "--results", str(results)]) == 0
    assert (results / "tiny" / ".calibration.json").is_file()


def test_init_writes_a_valid_commented_config_and_a_profile_copy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from attnrmt.workflow import PROFILES_DIR

    target = tmp_path / "study"
    assert cli.main(["init", str(target)]) == 0
    out = capsys.readouterr().out
    config, profile = target / "config.yaml", target / "profiles" / "slurm-dask" / "config.yaml"
    assert f"wrote {config}" in out and f"wrote {profile}" in out
    assert profile.read_text() == (PROFILES_DIR / "slurm-dask" / "config.yaml").read_text()
    text = config.read_text()
    assert sum(line.lstrip().startswith("#") for line in text.splitlines()) >= 10  # commented
    assert cli.main(["plan", str(config), "--results", str(tmp_path / "r"), "--no-calibrate"]) == 0
    assert "transition" in capsys.readouterr().out
    config.write_text("run: mine\n")  # edited: a second init refuses to overwrite it
    assert cli.main(["init", str(target)]) == 2
    assert "exists, nothing written (--force overwrites)" in capsys.readouterr().err
    assert config.read_text() == "run: mine\n"
    assert cli.main(["init", str(target), "--profile", "slurm", "--force"]) == 0
    assert (target / "profiles" / "slurm" / "config.yaml").is_file()
    assert cli.main(["init", str(target), "--profile", "nosuch"]) == 2
    assert "not a shipped profile (default, slurm, slurm-dask)" in capsys.readouterr().err


def test_a_missing_extra_is_named_with_the_pip_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`attnrmt run` without Snakemake (a base install): one line naming the extra. Here
    find_spec is told snakemake is absent; tests/e2e/test_install.py runs a real base
    install."""
    import importlib.util

    from attnrmt import extras

    real = importlib.util.find_spec
    monkeypatch.setattr(
        extras.importlib.util, "find_spec", lambda name: None if name == "snakemake" else real(name)
    )
    assert cli.main(["run", str(SMALL)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        "attnrmt run: error: attnrmt run needs the 'workflow' extra (snakemake not "
        "installed): pip install 'attnrmt[workflow]'"
    )


def test_a_cluster_profile_needs_the_hpc_extra(tmp_path: Path) -> None:
    from attnrmt.workflow import PROFILES_DIR, profile_extras

    assert profile_extras(PROFILES_DIR / "default") == []
    assert profile_extras(PROFILES_DIR / "slurm") == ["hpc"]  # Snakemake's SLURM executor
    assert profile_extras(PROFILES_DIR / "slurm-dask") == ["hpc"]  # dask-jobqueue workers
    (tmp_path / "config.yaml").write_text("cores: 4\nconfig:\n  dask: {mode: local}\n")
    assert profile_extras(tmp_path) == []


def test_run_dry_run_uses_the_shipped_workflow_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from attnrmt.workflow import PROFILES_DIR, SNAKEFILE

    monkeypatch.chdir(tmp_path)  # no Snakefile, no profiles/ here
    assert cli.main(["run", str(CONFIGS / "tiny.yaml"), "--dry-run", "--cores", "all"]) == 0
    sweep, report = capsys.readouterr().out.strip().splitlines()[1:]
    assert sweep.startswith(f"{sys.executable} -m snakemake --snakefile {SNAKEFILE} --cores all")
    assert f"--workflow-profile {PROFILES_DIR / 'default'} " in sweep
    assert "--report results/tiny/report.html" in report
    assert not (tmp_path / "results").exists()
    with pytest.raises(SystemExit) as refused:
        cli.main(["run", str(CONFIGS / "tiny.yaml"), "--cores", "0"])
    assert refused.value.code == 2
    assert "'0': a positive number of cores, or all" in capsys.readouterr().err


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_read_only_folder_is_one_sentence_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], code: int
) -> None:
    """A results folder or HOME the command may not write: one line naming the file."""

    def refuse(args: Any) -> int:
        raise OSError(code, os.strerror(code), "/data/results/run/.attnrmt-run.json")

    monkeypatch.setattr(cli, "_command_validate", refuse)
    assert cli.main(["validate", "x.yaml"]) == cli.EXIT_REFUSED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "cannot write /data/results/run/.attnrmt-run.json" in err and "read-only" in err
