"""Helpers for end-to-end tests: real Snakemake (subprocess), real Dask, real Zarr.

A :class:`Workdir` is a scratch directory holding a ``config.yaml``; Snakemake runs the
shipped Snakefile (:data:`attnrmt.workflow.SNAKEFILE`) in it (``--directory``), so outputs
land in ``<workdir>/results``.
:meth:`Workdir.run` returns a :class:`RunResult` with the exit code, output and how many
cells the run computed or reused (read from the fragments the run wrote).
:meth:`Workdir.close` kills background runs (their Dask clusters live in the Snakemake
process); use it in fixture finalizers so no test leaves Dask processes behind.

Typical use::

    workdir = Workdir.create(tmp_path, tiny_config(run="t"))
    try:
        first = workdir.run()
        assert first.computed == first.n_cells
        assert workdir.run("-n").nothing_to_do
    finally:
        workdir.close()
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from attnrmt import workflow
from attnrmt.contract import PROVENANCE_FIELDS
from tests.conftest import build_tiny_config

REPO_ROOT = Path(__file__).resolve().parents[2]
SNAKEFILE = workflow.SNAKEFILE
"""The shipped workflow (the checkout's root Snakefile includes the same file)."""
DEFAULT_PROFILE = workflow.PROFILES_DIR / "default"
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
ATTNRMT = Path(sys.executable).with_name("attnrmt")
NOTHING_TO_DO = "Nothing to be done"
STORES_TARGET = "stores"
"""Snakemake target of the simulation and theory stores only (no analysis, no report)."""
DEFAULT_TIMEOUT_SECONDS = 300.0


def tiny_config(run: str = "e2e", **overrides: Any) -> dict[str, Any]:
    """The end-to-end member of the tiny-config family (tests/conftest.py): one small sweep
    (d = 20: each cell takes milliseconds).

    Sweep ``grid``: 2 weights x 3 snr x 2 replicates = 12 cells; ``block_size`` 4, so
    each weights line of 6 cells makes 2 blocks (4 blocks in all). Top-level keys in
    ``overrides`` replace the defaults (deep-copied); use :func:`with_sweep` to edit the
    sweep.
    """
    config = build_tiny_config(
        sweep={
            "d": [20],
            "T": [4],
            "weights": ["mean", "causal1"],
            "snr": [0.0, 1.0, 2.0],
            "centered": [True],
        },
        run=run,
        seed=11,
        weight_models={"causal1": {"kind": "causal_limit", "tau": 1.0}},
    )
    config.update(copy.deepcopy(overrides))
    return config


def with_sweep(config: Mapping[str, Any], sweep: str = "grid", **changes: Any) -> dict[str, Any]:
    """A deep copy of ``config`` with keys of one sweep replaced."""
    changed = copy.deepcopy(dict(config))
    changed["sweeps"][sweep].update(copy.deepcopy(changes))
    return changed


@dataclass(frozen=True)
class CellCounts:
    """Cells in fragments written by one run: computed there, or copied from older ones."""

    computed: int
    reused: int


@dataclass(frozen=True)
class RunResult:
    """Outcome of one Snakemake invocation."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    counts: CellCounts

    @property
    def output(self) -> str:
        """stdout and stderr together (Snakemake logs to stderr)."""
        return self.stdout + self.stderr

    @property
    def computed(self) -> int:
        """Cells computed by this run."""
        return self.counts.computed

    @property
    def reused(self) -> int:
        """Cells copied bit for bit from earlier fragments by this run."""
        return self.counts.reused

    @property
    def nothing_to_do(self) -> bool:
        """Whether Snakemake reported that nothing had to be done."""
        return NOTHING_TO_DO in self.output


def fragment_files(workdir: str | os.PathLike[str]) -> dict[Path, int]:
    """Every fragment (current, orphaned, salvaged: old-style files and each block's task
    files) under ``workdir/results`` -> mtime_ns."""
    root = Path(workdir) / "results"
    found: dict[Path, int] = {}
    for pattern in ("*/*/fragments/*.npz", "*/*/salvage/*.npz", "*/*/salvage/*/*.npz"):
        for path in root.glob(pattern):
            if not path.name.startswith("."):
                found[path] = path.stat().st_mtime_ns
    return found


def count_cells(paths: Iterable[str | os.PathLike[str]]) -> CellCounts:
    """Sum the per-cell ``computed`` flags of fragment files."""
    computed = reused = 0
    for path in paths:
        with np.load(path, allow_pickle=False) as npz:
            flags = np.asarray(npz["computed"], dtype=bool)
        computed += int(flags.sum())
        reused += int((~flags).sum())
    return CellCounts(computed=computed, reused=reused)


def written_since(before: Mapping[Path, int], after: Mapping[Path, int]) -> list[Path]:
    """Fragments created or rewritten between two :func:`fragment_files` snapshots."""
    return sorted(path for path, mtime in after.items() if before.get(path) != mtime)


def snakemake_command(
    workdir: Path,
    args: Iterable[str],
    cores: int = 2,
    targets: Sequence[str] = (STORES_TARGET,),
) -> list[str]:
    """Command line running the shipped Snakefile in ``workdir`` with the default profile.

    ``targets`` default to the stores only; pass ``()`` for the whole pipeline (rule all).
    """
    return [
        str(SNAKEMAKE),
        "--snakefile",
        str(SNAKEFILE),
        "--directory",
        str(workdir),
        "--workflow-profile",
        str(DEFAULT_PROFILE),
        "--cores",
        str(cores),
        *args,
        *targets,
    ]


def attnrmt_run_command(cores: int = 2) -> list[str]:
    """``attnrmt run config.yaml`` (the one documented command: sweep, report, summary)
    with the repository's Snakefile and default profile, run in a workdir."""
    return [
        str(ATTNRMT),
        "run",
        "config.yaml",
        "--snakefile",
        str(SNAKEFILE),
        "--profile",
        str(DEFAULT_PROFILE),
        "--cores",
        str(cores),
    ]


def subprocess_environment() -> dict[str, str]:
    """Environment for Snakemake subprocesses: this interpreter's bin first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONWARNINGS", None)
    return env


@dataclass
class Workdir:
    """A scratch directory with a ``config.yaml`` in which Snakemake runs the pipeline."""

    path: Path
    config: dict[str, Any]
    _processes: list[subprocess.Popen] = field(default_factory=list, repr=False)

    @classmethod
    def create(cls, path: str | os.PathLike[str], config: Mapping[str, Any]) -> Workdir:
        """Make ``path`` (if needed) and write ``config`` as its ``config.yaml``."""
        workdir = cls(Path(path), {})
        workdir.path.mkdir(parents=True, exist_ok=True)
        workdir.write_config(config)
        return workdir

    def copy_to(self, path: str | os.PathLike[str]) -> Workdir:
        """A copy of this workdir (results and Snakemake metadata, mtimes preserved)."""
        target = Path(path)
        shutil.copytree(
            self.path,
            target,
            symlinks=True,
            ignore=shutil.ignore_patterns(".dask", "incomplete", "locks"),
        )
        return Workdir(target, copy.deepcopy(self.config))

    @property
    def run_name(self) -> str:
        """The config's run name."""
        return str(self.config.get("run", "default"))

    @property
    def run_dir(self) -> Path:
        """``<workdir>/results/<run>``."""
        return self.path / "results" / self.run_name

    def sweep_dir(self, sweep: str = "grid") -> Path:
        """``<workdir>/results/<run>/<sweep>``."""
        return self.run_dir / sweep

    def write_config(self, config: Mapping[str, Any]) -> None:
        """Replace ``config.yaml``."""
        self.config = copy.deepcopy(dict(config))
        (self.path / "config.yaml").write_text(yaml.safe_dump(self.config, sort_keys=False))

    def run(
        self,
        *args: str,
        cores: int = 2,
        targets: Sequence[str] = (STORES_TARGET,),
        check: bool = True,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> RunResult:
        """Run Snakemake to completion; count the cells computed/reused by this run.

        ``args`` are extra command-line arguments; ``targets`` default to the stores only
        (``()``: the whole pipeline).

        Raises
        ------
        AssertionError
            When ``check`` and Snakemake fails (its output is in the message).
        """
        before = fragment_files(self.path)
        started = time.perf_counter()
        completed = subprocess.run(
            snakemake_command(self.path, args, cores, targets),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=subprocess_environment(),
            check=False,
        )
        seconds = time.perf_counter() - started
        counts = count_cells(written_since(before, fragment_files(self.path)))
        result = RunResult(
            args=tuple(args),
            returncode=completed.returncode,
            stdout=completed.stdout,
            stderr=completed.stderr,
            seconds=seconds,
            counts=counts,
        )
        if check and completed.returncode != 0:
            raise AssertionError(
                f"snakemake {' '.join(args)} failed ({completed.returncode}):\n{result.output}"
            )
        return result

    def start(
        self, *args: str, cores: int = 2, targets: Sequence[str] = (STORES_TARGET,)
    ) -> subprocess.Popen:
        """Start Snakemake in the background, in its own process group (see :meth:`kill`)."""
        log = open(self.path / "snakemake-background.log", "ab")
        process = subprocess.Popen(
            snakemake_command(self.path, args, cores, targets),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=subprocess_environment(),
            start_new_session=True,
        )
        log.close()
        self._processes.append(process)
        return process

    def kill(self, process: subprocess.Popen) -> None:
        """SIGKILL a background Snakemake's process group (its in-process Dask cluster and
        the worker processes go with it)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)

    def start_attnrmt_run(
        self, cores: int = 2, log_name: str = "attnrmt-run.log"
    ) -> subprocess.Popen:
        """Start ``attnrmt run`` (:func:`attnrmt_run_command`) in the background, in its own
        session; it runs Snakemake in a session of its own (:func:`snakemake_child`)."""
        log = open(self.path / log_name, "wb")
        process = subprocess.Popen(
            attnrmt_run_command(cores),
            cwd=self.path,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=subprocess_environment(),
            start_new_session=True,
        )
        log.close()
        self._processes.append(process)
        return process

    def worker_pids(self, timeout: float = 120) -> dict[str, int]:
        """Worker address -> pid of the run's live cluster (connects with the run's TLS
        credentials, as the owner of the run)."""
        from attnrmt.sweep.compute.cluster import connect

        with connect(self.run_dir, timeout=f"{timeout}s") as client:
            return {address: int(pid) for address, pid in client.run(os.getpid).items()}

    def wait_for_fragments(self, count: int, process: subprocess.Popen, timeout: float) -> int:
        """Wait until at least ``count`` fragments exist; return how many there are."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            n_found = len(fragment_files(self.path))
            if n_found >= count:
                return n_found
            if process.poll() is not None:
                raise AssertionError(f"snakemake exited ({process.returncode}) too early")
            time.sleep(0.02)
        raise AssertionError(f"fewer than {count} fragments after {timeout} s")

    def close(self) -> None:
        """Kill background Snakemake runs we started (with their Dask clusters); remove the
        run's scheduler file and credentials if a killed run left them."""
        from attnrmt.sweep.compute.cluster import shutdown_run_cluster

        for process in self._processes:
            if process.poll() is None:
                for child in child_pids(process.pid):  # attnrmt run's Snakemake session
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(child, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=60)
        self._processes.clear()
        shutdown_run_cluster(self.run_dir)

    def open_cells(self, sweep: str = "grid") -> Any:
        """``cells.zarr`` of a sweep (through its pointer), loaded into memory."""
        from attnrmt.sweep.store.cell_table.reader import open_cells

        return open_cells(self.sweep_dir(sweep) / "cells.zarr").load()

    def open_theory(self, sweep: str = "grid") -> Any:
        """``theory.zarr`` of a sweep, loaded into memory."""
        import xarray as xr

        with xr.open_zarr(self.sweep_dir(sweep) / "theory.zarr") as dataset:
            return dataset.load()


def child_pids(pid: int) -> list[int]:
    """Pids of the direct children of a process (``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in children.read_text().split()]
    return found


def snakemake_child(process: subprocess.Popen, timeout: float = 60) -> int:
    """Pid of the Snakemake that an ``attnrmt run`` process started (its own session: the
    pid is also its process group)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        children = child_pids(process.pid)
        if children:
            return children[0]
        time.sleep(0.02)
    raise AssertionError("attnrmt run started no Snakemake")


def wait_until(
    predicate: Any, timeout: float, what: str, process: subprocess.Popen | None = None
) -> None:
    """Poll ``predicate()`` every 20 ms until true; fail naming ``what`` after ``timeout``
    seconds or when ``process`` exits first."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"exited ({process.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {timeout} s")
        time.sleep(0.02)


def stop_seconds(
    process: subprocess.Popen, signum: int, group: int | None = None, timeout: float = 120
) -> float:
    """Send ``signum`` to ``process``; seconds until it and every process of ``group``
    (default: its own) are gone."""
    started = time.monotonic()
    os.kill(process.pid, signum)
    process.wait(timeout=timeout)
    pgid = process.pid if group is None else group
    while process_group(pgid) and time.monotonic() - started < timeout:
        time.sleep(0.02)
    return time.monotonic() - started


def damage_file(path: Path, how: str, rng: np.random.Generator) -> None:
    """Damage a file as a disk or a stray writer would, keeping its mtime (so that only
    reading it can tell): ``truncate`` to half its size, or ``flip`` (every bit of 64
    bytes at a random place in its middle half inverted)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    if how == "truncate":
        data = data[: len(data) // 2]
    elif how == "flip":
        start = int(rng.integers(len(data) // 4, 3 * len(data) // 4 - 64))
        data[start : start + 64] = bytes(byte ^ 0xFF for byte in data[start : start + 64])
    else:
        raise ValueError(f"how={how!r}")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def finished_cells_now(workdir: Workdir) -> set[tuple[str, str]]:
    """Cell ids with a finished result on disk (in any fragment, cache entry or salvage
    file of the run that is intact: read whole and verified), read from a copy of
    ``results/`` so that nothing is moved aside or restored by the reading."""
    import tempfile

    from attnrmt.sweep.store import fragments

    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "results"
        shutil.copytree(
            workdir.path / "results", copy, symlinks=True, ignore=shutil.ignore_patterns(".dask")
        )
        found: set[tuple[str, str]] = set()
        for sweep_dir in sorted((copy / workdir.run_name).iterdir()):
            for path in fragments.fragment_paths(sweep_dir) if sweep_dir.is_dir() else []:
                with contextlib.redirect_stderr(io.StringIO()):
                    arrays = fragments.read_fragment_arrays(path)
                if arrays is not None:
                    found.update(
                        zip(arrays["cell_key"].tolist(), arrays["cell_seed"].tolist(), strict=True)
                    )
        return found


def numeric_variables(
    dataset: Any, exclude: Iterable[str] = ("compute_seconds", *PROVENANCE_FIELDS)
) -> Any:
    """The dataset without timing and provenance (which differ between identical runs)."""
    kept = dataset.drop_vars([name for name in exclude if name in dataset.variables])
    kept.attrs = {key: value for key, value in kept.attrs.items() if key != "environments"}
    return kept


# --------------------------------------------------------------------------- crash reports

#: What a crash prints instead of a clear error. A Python traceback has its header and its
#: ``File "...", line N`` frames; Snakemake's own error report for an exception in the
#: Snakefile or an included file prints no "Traceback" header but names the exception and
#: the place (``KeyError in file "/.../Snakefile", line 2:``) and then the same frames, and a
#: failed job gives ``Error in rule NAME:``.
CRASH_REPORT_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"Traceback \(most recent call last\):"),
    re.compile(r'\s*File "[^"]*", line \d+'),
    re.compile(r'\w+ in file "[^"]*", line \d+'),
    re.compile(r"Error in rule "),
)


def crash_report_lines(output: str) -> list[str]:
    """The lines of ``output`` that start like a line of a crash report
    (:data:`CRASH_REPORT_PATTERNS`): a Python traceback or Snakemake's error report.
    O(len(output))."""
    return [
        line
        for line in output.splitlines()
        if any(pattern.match(line) for pattern in CRASH_REPORT_PATTERNS)
    ]


def assert_no_crash_report(output: str, what: str = "a bad input") -> None:
    """Fail when ``output`` shows a Python traceback or Snakemake's error report instead
    of a clear error (:func:`crash_report_lines`), quoting the end of ``output``."""
    found = crash_report_lines(output)
    assert not found, (
        f"{what} gave a crash report instead of a clear error ({found[:3]}):\n{output[-3000:]}"
    )


# --------------------------------------------------------------------------- security

OTHER_USER = "attnrmt-other"
"""A second Unix user (tests/harness/other-user.sh, run by .ci/run)."""
INTRUDER = REPO_ROOT / "tests" / "harness" / "intruder.py"
WILDCARD_HOSTS = ("0.0.0.0", "*", "[::]", "::")


def require_other_user() -> None:
    """Skip (fail under ``CI=true``) unless we are root and :data:`OTHER_USER` exists."""
    import pwd

    import pytest

    reason = None
    if os.geteuid() != 0:
        reason = "acting as another user needs root"
    else:
        try:
            pwd.getpwnam(OTHER_USER)
        except KeyError:
            reason = f"user {OTHER_USER} missing: run tests/harness/other-user.sh"
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason} (required under CI=true)")
        pytest.skip(reason)


def wait_for_scheduler_file(
    workdir: Workdir, process: subprocess.Popen, timeout: float = 180
) -> dict[str, Any]:
    """Contents of the run's scheduler file once its cluster is up."""
    from attnrmt.sweep.compute.cluster import read_scheduler_file, scheduler_file_path

    deadline = time.monotonic() + timeout
    path = scheduler_file_path(workdir.run_dir)
    while (info := read_scheduler_file(path)) is None:
        if process.poll() is not None or time.monotonic() > deadline:
            log = (workdir.path / "snakemake-background.log").read_text(errors="replace")
            raise AssertionError(f"no Dask cluster appeared:\n{log[-4000:]}")
        time.sleep(0.05)
    return info


def credential_files(run_dir: Path) -> list[Path]:
    """The run's secret files: TLS certificate and key, scheduler file."""
    from attnrmt.sweep.compute.cluster import cluster_dir, scheduler_file_path
    from attnrmt.sweep.compute.cluster.security import credential_paths

    return [*credential_paths(cluster_dir(run_dir)), scheduler_file_path(run_dir)]


def intruder_report(
    address: str, files: Iterable[Path], site_packages: Path | None = None
) -> dict[str, Any]:
    """What :data:`OTHER_USER` achieves against a scheduler and files
    (tests/harness/intruder.py); with ``site_packages``, the intruder imports its packages
    from there only (``python -S``)."""

    env = subprocess_environment()
    flags = []
    if site_packages is not None:
        env["PYTHONPATH"], flags = str(site_packages), ["-S"]
    done = subprocess.run(
        [sys.executable, *flags, str(INTRUDER), OTHER_USER, address, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_locked_out(report: Mapping[str, Any]) -> None:
    """The other user read no credential file and ran no code on the scheduler, each
    attempt refused by the scheduler (not failing to import what it needed)."""
    assert report["uid"] != 0, report
    assert "No module named" not in json.dumps(report), report
    assert report["files"] and set(report["files"].values()) == {"PermissionError"}, report
    assert report["plain_tcp"] != "ran", report
    assert report["own_tls"] != "ran", report
    assert report["anonymous_tls"] != "connected", report


def assert_private_modes(run_dir: Path) -> None:
    """.dask/ and tls/ are 0700; credentials, scheduler file and cluster log 0600."""
    from attnrmt.sweep.compute.cluster import cluster_dir

    dask_dir = cluster_dir(run_dir)
    for directory in (dask_dir, dask_dir / "tls"):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    for path in [*credential_files(run_dir), dask_dir / "cluster.log"]:
        assert path.stat().st_mode & 0o777 == 0o600, path


def process_group(pgid: int) -> set[int]:
    """Pids of a process group (a background Snakemake and the worker processes it spawned)."""
    done = subprocess.run(["ps", "-o", "pid=", "-g", str(pgid)], capture_output=True, text=True)
    return {int(pid) for pid in done.stdout.split()}


def tcp_listeners(pids: Iterable[int]) -> list[tuple[str, int]]:
    """(local address, pid) of every TCP listener of these processes (``ss -ltnp``)."""
    import re

    wanted = set(pids)
    done = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True)
    found = []
    for line in done.stdout.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        for pid in map(int, re.findall(r"pid=(\d+)", line)):
            if pid in wanted:
                found.append((fields[3], pid))
    return found


def is_wildcard(address: str) -> bool:
    """Whether an ``ss`` local address (``host:port``) listens on every interface."""
    host = address.rsplit(":", 1)[0]
    return host in WILDCARD_HOSTS or host.endswith("%*")
