"""One Dask cluster per run: started lazily, shared by every block job, shut down at the end.

Modes (config ``dask.mode``; site settings come from Snakemake profiles):

``local`` (default)
    A :class:`distributed.LocalCluster` of worker *processes* sized to the machine, run by a
    detached daemon (``python -m attnrmt.sweep.cluster serve ...``). The first block job
    that needs it starts it under an ``fcntl`` lock (so concurrent jobs start exactly one);
    the daemon writes ``results/<run>/.dask/scheduler.json`` atomically, closes itself after
    the scheduler's idle timeout, and is shut down by the Snakefile's ``onsuccess`` /
    ``onerror`` hooks. A scheduler file left behind by a killed run is detected (dead pid or
    unreachable address) and replaced.
``slurm``
    The same daemon, but it runs a :class:`dask_jobqueue.SLURMCluster` kept at
    ``dask.slurm.n_workers`` jobs; workers get ``--lifetime``/``--lifetime-stagger`` below
    the walltime so they retire before SLURM kills them, and are replaced.
``address``
    Connect to an existing scheduler (``dask.address`` or ``dask.scheduler_file``); never
    started or stopped by us.
``job``
    An in-process LocalCluster sized to the job's allocation (``SLURM_CPUS_PER_TASK`` or
    the usable cores) — for Snakemake's SLURM executor, where each block is its own job.

BLAS threads x worker threads never exceed the cores: worker processes get
``OMP/OPENBLAS/MKL_NUM_THREADS = cores // (n_workers * threads_per_worker)`` (at least 1).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnrmt.sweep.store import write_json_atomically

LOGGER = logging.getLogger(__name__)

DASK_DIRNAME = ".dask"
SCHEDULER_FILENAME = "scheduler.json"
LOCK_FILENAME = "cluster.lock"
STOPPING_FILENAME = "stopping.json"
DAEMON_LOG_FILENAME = "cluster.log"
DAEMON_MODES = ("local", "slurm")
MODES = ("local", "address", "slurm", "job")
BLAS_THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
DEFAULT_IDLE_TIMEOUT_SECONDS = 300.0
DEFAULT_START_TIMEOUT_SECONDS = 180.0
DAEMON_EXIT_GRACE_SECONDS = 30.0
"""Seconds a stopping daemon may take to close its cluster before it kills its group."""


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class ClusterSettings:
    """Validated Dask settings of a run (the ``dask:`` block of the config).

    Attributes
    ----------
    mode : str
        One of :data:`MODES`.
    n_workers : int or None
        Worker processes (``None``: one per usable core; for ``slurm``: number of jobs).
    threads_per_worker : int
        Threads per worker process.
    address : str or None
        Scheduler address for ``mode: address``.
    scheduler_file : str or None
        Scheduler file for ``mode: address`` (alternative to ``address``).
    memory_limit : str or None
        Per-worker memory limit of a local cluster (``None``: Dask's ``"auto"``).
    local_directory : str or None
        Scratch directory of local workers (``None``: ``results/<run>/.dask/workers``).
    dashboard : str or None
        Dashboard bind address (``":0"``: any free port), ``None`` disables it.
    idle_timeout : float
        Seconds without work after which a daemon-run scheduler closes itself.
    task_retries : int
        Dask retries per cell task (transient failures, lost workers).
    max_cores : int or None
        Cap on the cores a ``local`` cluster uses (Snakemake's ``--cores``); ``None``: all.
    slurm : dict
        ``dask_jobqueue.SLURMCluster`` settings for ``mode: slurm``.
    """

    mode: str = "local"
    n_workers: int | None = None
    threads_per_worker: int = 1
    address: str | None = None
    scheduler_file: str | None = None
    memory_limit: str | None = None
    local_directory: str | None = None
    dashboard: str | None = ":0"
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_SECONDS
    task_retries: int = 2
    slurm: dict[str, Any] = field(default_factory=dict)
    max_cores: int | None = None

    @classmethod
    def from_config(
        cls, dask_config: Mapping[str, Any] | None, max_cores: int | None = None
    ) -> ClusterSettings:
        """Build settings from the config's ``dask`` mapping (missing keys take defaults).

        Parameters
        ----------
        dask_config : mapping or None
            The ``dask:`` block of a validated config.
        max_cores : int, optional
            Cores granted to the run (Snakemake's ``--cores``); caps a ``local`` cluster.

        Returns
        -------
        ClusterSettings
        """
        cfg = dict(dask_config or {})
        mode = str(cfg.get("mode") or "local")
        if mode not in MODES:
            raise ValueError(f"dask.mode must be one of {MODES}, got {mode!r}")
        n_workers = cfg.get("n_workers")
        threads = int(cfg.get("threads_per_worker") or 1)
        if n_workers is not None and int(n_workers) < 1:
            raise ValueError(f"dask.n_workers must be >= 1, got {n_workers!r}")
        if threads < 1:
            raise ValueError(f"dask.threads_per_worker must be >= 1, got {threads!r}")
        return cls(
            mode=mode,
            n_workers=None if n_workers is None else int(n_workers),
            threads_per_worker=threads,
            address=cfg.get("address") or None,
            scheduler_file=cfg.get("scheduler_file") or None,
            memory_limit=cfg.get("memory_limit") or None,
            local_directory=cfg.get("local_directory") or None,
            dashboard=dashboard_address(cfg.get("dashboard", True)),
            idle_timeout=float(cfg.get("idle_timeout") or DEFAULT_IDLE_TIMEOUT_SECONDS),
            task_retries=int(cfg.get("task_retries", 2)),
            slurm=dict(cfg.get("slurm") or {}),
            max_cores=None if not max_cores else max(1, int(max_cores)),
        )


def dashboard_address(setting: bool | str | int | None) -> str | None:
    """Normalise the ``dask.dashboard`` setting to a bind address (or ``None`` = off).

    ``True`` means any free port (``":0"``, so several runs on one machine never collide);
    an int is a port; a string is used as given.
    """
    if isinstance(setting, str):  # as written on a command line
        text = setting.strip()
        if text.lower() in ("", "false", "no", "off", "none", "null"):
            return None
        if text.lower() in ("true", "yes", "on"):
            return ":0"
        setting = int(text) if text.isdigit() else text
    if setting is None or setting is False:
        return None
    if setting is True:
        return ":0"
    if isinstance(setting, int):
        return f":{setting}"
    return str(setting)


# --------------------------------------------------------------------------- sizing


def usable_cores() -> int:
    """Cores this process may use (CPU affinity, falling back to ``os.cpu_count``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def allocation_cores(environ: Mapping[str, str] | None = None) -> int:
    """Cores of the current SLURM allocation (``SLURM_CPUS_PER_TASK``) or the usable cores."""
    env = os.environ if environ is None else environ
    value = env.get("SLURM_CPUS_PER_TASK", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    return usable_cores()


@dataclass(frozen=True)
class WorkerLayout:
    """How a machine's cores are split: processes x threads x BLAS threads <= cores."""

    n_workers: int
    threads_per_worker: int
    blas_threads: int


def worker_layout(cores: int, n_workers: int | None, threads_per_worker: int) -> WorkerLayout:
    """Size workers so that ``n_workers * threads_per_worker * blas_threads <= cores``.

    Parameters
    ----------
    cores : int
        Cores available.
    n_workers : int or None
        Requested worker processes; ``None`` means ``max(1, cores // threads_per_worker)``.
    threads_per_worker : int
        Threads per worker.

    Returns
    -------
    WorkerLayout
        BLAS threads per worker are ``cores // (n_workers * threads_per_worker)``, at least 1.
    """
    cores = max(1, int(cores))
    threads = max(1, int(threads_per_worker))
    workers = max(1, cores // threads) if n_workers is None else max(1, int(n_workers))
    blas = max(1, cores // (workers * threads))
    return WorkerLayout(n_workers=workers, threads_per_worker=threads, blas_threads=blas)


def blas_environment(blas_threads: int) -> dict[str, str]:
    """Environment variables pinning BLAS/OpenMP pools to ``blas_threads`` threads."""
    return {name: str(int(blas_threads)) for name in BLAS_THREAD_VARIABLES}


def configure_worker_environment(blas_threads: int) -> None:
    """Make worker processes spawned by Dask nannies start with ``blas_threads`` BLAS threads.

    Dask's nanny sets ``distributed.nanny.pre-spawn-environ`` before the worker imports
    numpy; we overwrite its BLAS entries (default 1) with our layout.
    """
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    environ.update(blas_environment(blas_threads))
    # A cell allocates and frees arrays of tens of MB; trimming the heap after each free
    # (Dask's default threshold, 64 KiB) makes every cell fault its memory in again.
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    dask.config.set(
        {
            "distributed.nanny.pre-spawn-environ": environ,
            # the statistical profiler samples every worker thread every 10 ms: CPU taken
            # from the cells, for a dashboard panel nobody needs for a sweep
            "distributed.worker.profile.enabled": False,
        }
    )


def parse_walltime(walltime: str) -> int:
    """Seconds in a SLURM walltime (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``)."""
    text = str(walltime).strip()
    days = 0
    if "-" in text:
        day_text, text = text.split("-", 1)
        days = int(day_text)
        parts = [int(p) for p in text.split(":")]
        parts += [0] * (3 - len(parts))
        hours, minutes, seconds = parts
    else:
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            hours, minutes, seconds = 0, parts[0], 0
        elif len(parts) == 2:
            hours, (minutes, seconds) = 0, parts
        else:
            hours, minutes, seconds = parts
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def worker_lifetime(walltime_seconds: int) -> tuple[int, int]:
    """Worker ``--lifetime`` and ``--lifetime-stagger`` (seconds) for a SLURM walltime.

    Workers retire (handing their data over) before SLURM kills the job: the lifetime keeps
    a margin of 10% of the walltime (at least 2 minutes, at most 15) plus the stagger
    (5% of the walltime, at most 5 minutes) so that workers do not all leave at once.
    """
    margin = min(max(120, walltime_seconds // 10), 900)
    stagger = min(walltime_seconds // 20, 300)
    lifetime = max(60, walltime_seconds - margin - stagger)
    return lifetime, stagger


# --------------------------------------------------------------------------- scheduler file


def cluster_dir(run_dir: str | os.PathLike[str]) -> Path:
    """Directory holding the run's scheduler file, lock and daemon log."""
    return Path(run_dir) / DASK_DIRNAME


def scheduler_file_path(run_dir: str | os.PathLike[str]) -> Path:
    """Path of the run's scheduler file (``results/<run>/.dask/scheduler.json``)."""
    return cluster_dir(run_dir) / SCHEDULER_FILENAME


def read_scheduler_file(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Contents of a scheduler file, or ``None`` when it is missing or unreadable."""
    try:
        info = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and "address" in info else None


def pid_is_alive(pid: int) -> bool:
    """Whether a live (non-zombie) process with this pid exists on this host."""
    if int(pid) <= 0:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError as exc:  # pragma: no cover - defensive
        return exc.errno != errno.ESRCH
    return not _is_zombie(int(pid))


def address_is_reachable(address: str, timeout: float = 2.0) -> bool:
    """Whether a TCP connection to a ``tcp://host:port`` scheduler address succeeds."""
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def scheduler_is_alive(info: Mapping[str, Any] | None) -> bool:
    """Whether the daemon described by a scheduler file still serves its address.

    A file written on this host whose pid is gone is stale; otherwise the address must
    accept a TCP connection.
    """
    if not info:
        return False
    if info.get("host") == socket.gethostname() and not pid_is_alive(info.get("pid", -1)):
        return False
    return address_is_reachable(str(info["address"]))


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# --------------------------------------------------------------------------- daemon control


def daemon_command(run_dir: str | os.PathLike[str], settings: ClusterSettings) -> list[str]:
    """Command line that starts the run's cluster daemon."""
    cmd = [
        sys.executable,
        "-m",
        "attnrmt.sweep.cluster",
        "serve",
        "--scheduler-file",
        str(scheduler_file_path(run_dir)),
        "--mode",
        settings.mode,
        "--threads-per-worker",
        str(settings.threads_per_worker),
        "--idle-timeout",
        str(settings.idle_timeout),
        "--dashboard",
        settings.dashboard or "none",
        "--slurm",
        json.dumps(settings.slurm, sort_keys=True),
    ]
    if settings.n_workers is not None:
        cmd += ["--n-workers", str(settings.n_workers)]
    if settings.memory_limit:
        cmd += ["--memory-limit", settings.memory_limit]
    if settings.local_directory:
        cmd += ["--local-directory", settings.local_directory]
    if settings.max_cores:
        cmd += ["--max-cores", str(settings.max_cores)]
    return cmd


def daemon_arguments(command: Sequence[str]) -> list[str]:
    """The arguments of a :func:`daemon_command` after the module name (``serve ...``).

    The daemon publishes its own (``sys.argv[1:]``) in the scheduler file, so a caller can
    tell whether a running daemon was started with the settings it wants.
    """
    return list(command[list(command).index("attnrmt.sweep.cluster") + 1 :])


def scheduler_is_idle(info: Mapping[str, Any], timeout: float = 10.0) -> bool:
    """Whether a scheduler has no tasks and no client but the one asking."""
    from distributed import Client

    def load(dask_scheduler: Any) -> tuple[int, int]:
        clients = [key for key in dask_scheduler.clients if key != "fire-and-forget"]
        return len(clients), len(dask_scheduler.tasks)

    try:
        with Client(info["address"], timeout=timeout, set_as_default=False) as client:
            n_clients, n_tasks = client.run_on_scheduler(load)
    except (OSError, TimeoutError):
        return False
    return n_clients <= 1 and n_tasks == 0


def _keep_running_daemon(info: Mapping[str, Any], arguments: Sequence[str]) -> bool:
    """Whether to use a live daemon as it is rather than restart it.

    Yes when it was started with ``arguments``, and also when it was not but runs on
    another host (we cannot stop it) or is in use (never pull a cluster from under running
    work): the new settings then apply once it idles out. An idle daemon of this host with
    other settings (left by a killed run whose ``dask:`` settings have since changed) is
    restarted.
    """
    if info.get("arguments") == list(arguments) or info.get("host") != socket.gethostname():
        return True
    if not scheduler_is_idle(info):
        print(
            f"attnrmt: the Dask cluster {info['address']} was started with other dask "
            "settings and is in use; using it as it is (the new settings apply once it "
            "idles out or the run ends)",
            file=sys.stderr,
            flush=True,
        )
        return True
    print(
        f"attnrmt: dask settings changed since the idle Dask cluster {info['address']} "
        "started; restarting it",
        file=sys.stderr,
        flush=True,
    )
    return False


def ensure_run_cluster(
    run_dir: str | os.PathLike[str],
    settings: ClusterSettings,
    start_timeout: float = DEFAULT_START_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """Return the run's live scheduler info, starting the daemon if there is none.

    Concurrent callers serialise on an ``fcntl`` lock, so exactly one daemon is started;
    a stale scheduler file (killed run) is removed and the daemon restarted. A live daemon
    started with other settings (a killed run's, since changed) is restarted when it is
    idle, and used as it is, with a warning, when it is busy (:func:`_keep_running_daemon`).

    Parameters
    ----------
    run_dir : path
        ``results/<run>``.
    settings : ClusterSettings
        Mode ``local`` or ``slurm``.
    start_timeout : float
        Seconds to wait for a new daemon to publish its scheduler file.

    Returns
    -------
    dict
        The scheduler file's contents (``address``, ``dashboard``, ``pid``, ``host``...).
    """
    if settings.mode not in DAEMON_MODES:
        raise ValueError(f"mode {settings.mode!r} does not use a run daemon")
    sched_file = scheduler_file_path(run_dir)
    command = daemon_command(run_dir, settings)
    with _exclusive_lock(cluster_dir(run_dir) / LOCK_FILENAME):
        info = read_scheduler_file(sched_file)
        if info is not None and scheduler_is_alive(info):
            if _keep_running_daemon(info, daemon_arguments(command)):
                return info
            _stop_daemon(info)
        elif info is not None:
            print(
                f"attnrmt: removing stale scheduler file {sched_file} ({info['address']}); "
                "starting a new Dask cluster",
                file=sys.stderr,
                flush=True,
            )
            _stop_daemon(info)
        with contextlib.suppress(FileNotFoundError):
            sched_file.unlink()
        log_path = cluster_dir(run_dir) / DAEMON_LOG_FILENAME
        daemon_pid = launch_detached(command, log_path)
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            info = read_scheduler_file(sched_file)
            if info is not None and info.get("pid") == daemon_pid:
                print(
                    f"attnrmt: started Dask cluster {info['address']} "
                    f"(dashboard {info.get('dashboard') or 'off'}; daemon pid {daemon_pid}, "
                    f"log {log_path})",
                    file=sys.stderr,
                    flush=True,
                )
                return info
            if not pid_is_alive(daemon_pid):
                raise RuntimeError(f"Dask cluster daemon exited during start-up; see {log_path}")
            time.sleep(0.1)
        _stop_daemon({"pid": daemon_pid, "host": socket.gethostname()})
        raise TimeoutError(f"Dask cluster daemon did not start in {start_timeout}s; see {log_path}")


def launch_detached(command: Sequence[str], log_path: str | os.PathLike[str]) -> int:
    """Start ``command`` as a detached daemon (new session, not our child); return its pid.

    A short-lived launcher process starts the daemon and exits, so the daemon is re-parented
    to init: it outlives the calling job, never becomes our zombie, and its process group
    (its pid) holds all the worker processes it spawns.
    """
    launcher = [sys.executable, "-m", "attnrmt.sweep.cluster", "launch", str(log_path), "--"]
    completed = subprocess.run(
        [*launcher, *command],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(completed.stdout.split()[-1])


def _launch_and_exit(log_path: str, command: Sequence[str]) -> None:
    with open(log_path, "ab") as log_handle:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log_handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    print(process.pid, flush=True)
    os._exit(0)  # leave the daemon running; skip Popen finalisers


def _stop_daemon(info: Mapping[str, Any], timeout: float = 20.0) -> bool:
    """SIGTERM the daemon of a scheduler file (this host only), SIGKILL its group if needed."""
    if not _signal_daemon(info, signal.SIGTERM):
        return False
    pid = int(info["pid"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_is_alive(pid):
            break
        time.sleep(0.1)
    # The daemon leads its own session: its group holds the worker processes it spawned.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return True


def is_cluster_daemon(pid: int) -> bool:
    """Whether ``pid`` is a live ``attnrmt.sweep.cluster`` daemon (never signal a reused pid)."""
    if not pid_is_alive(pid):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # no /proc: trust the pid
        return True
    return b"attnrmt.sweep.cluster" in command


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def shutdown_run_cluster(
    run_dir: str | os.PathLike[str], timeout: float = 20.0, wait: bool = True
) -> bool:
    """Stop the run's cluster daemon if one is running; remove its scheduler file.

    Safe to call when no cluster was started (does nothing). The Snakefile's
    ``onsuccess``/``onerror`` hooks call it with ``wait=False``: the daemon is told to
    stop (SIGTERM) and its scheduler file removed at once, so Snakemake exits without
    waiting for the workers to wind down (the daemon force-exits after
    :data:`DAEMON_EXIT_GRACE_SECONDS` at most).

    Parameters
    ----------
    run_dir : path
        ``results/<run>``.
    timeout : float
        With ``wait``: seconds to wait for a graceful exit before SIGKILLing the daemon's
        process group (daemon and workers).
    wait : bool
        Wait for the daemon to exit.

    Returns
    -------
    bool
        Whether a live daemon was told to stop.
    """
    sched_file = scheduler_file_path(run_dir)
    stopping_file = cluster_dir(run_dir) / STOPPING_FILENAME
    info = read_scheduler_file(sched_file)
    stopped = False
    if info is not None:
        if wait:
            stopped = _stop_daemon(info, timeout=timeout)
        else:
            stopped = _signal_daemon(info, signal.SIGTERM)
            write_json_atomically(stopping_file, info)  # for a later wait=True call
        if read_scheduler_file(sched_file) == info:
            with contextlib.suppress(FileNotFoundError):
                sched_file.unlink()
    if wait:
        previous = read_scheduler_file(stopping_file)
        if previous is not None:
            _stop_daemon(previous, timeout=timeout)
            with contextlib.suppress(FileNotFoundError):
                stopping_file.unlink()
    return stopped


def _signal_daemon(info: Mapping[str, Any], signum: int) -> bool:
    """Send ``signum`` to the daemon of a scheduler file if it runs on this host."""
    pid = int(info.get("pid", -1))
    if pid <= 0 or info.get("host") != socket.gethostname() or not is_cluster_daemon(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
    return True


@contextlib.contextmanager
def run_client(
    run_dir: str | os.PathLike[str], settings: ClusterSettings
) -> Iterator[Any]:
    """A :class:`distributed.Client` connected to the run's cluster, closed on exit.

    ``local``/``slurm`` start (or reuse) the run daemon; ``address`` connects to the given
    scheduler; ``job`` runs an in-process LocalCluster sized to the allocation.
    """
    from distributed import Client

    if settings.mode in DAEMON_MODES:
        info = ensure_run_cluster(run_dir, settings)
        client = Client(info["address"], set_as_default=False, timeout="60s")
        try:
            yield client
        finally:
            client.close()
    elif settings.mode == "address":
        target = settings.address or None
        kwargs: dict[str, Any] = {"set_as_default": False, "timeout": "60s"}
        if target is None:
            if not settings.scheduler_file:
                raise ValueError("dask.mode 'address' needs dask.address or dask.scheduler_file")
            kwargs["scheduler_file"] = settings.scheduler_file
        client = Client(target, **kwargs)
        try:
            yield client
        finally:
            client.close()
    else:  # job
        with local_cluster(allocation_cores(), settings, run_dir) as cluster:
            client = Client(cluster, set_as_default=False)
            try:
                yield client
            finally:
                client.close()


@contextlib.contextmanager
def local_cluster(
    cores: int, settings: ClusterSettings, run_dir: str | os.PathLike[str]
) -> Iterator[Any]:
    """An in-process LocalCluster of worker processes sized to ``cores`` (no oversubscription)."""
    from distributed import LocalCluster

    layout = worker_layout(cores, settings.n_workers, settings.threads_per_worker)
    configure_worker_environment(layout.blas_threads)
    workdir = Path(settings.local_directory or cluster_dir(run_dir) / "workers")
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(
        n_workers=layout.n_workers,
        threads_per_worker=layout.threads_per_worker,
        processes=True,
        host="127.0.0.1",
        # the scheduler's HTTP server always listens (metrics); ":0" avoids port clashes
        dashboard_address=settings.dashboard or ":0",
        local_directory=str(workdir),
        memory_limit=settings.memory_limit or "auto",
        scheduler_kwargs={
            "idle_timeout": f"{settings.idle_timeout}s",
            "dashboard": settings.dashboard is not None,
        },
    )
    LOGGER.info(
        "Dask LocalCluster %s: %d workers x %d threads, %d BLAS threads; dashboard %s",
        cluster.scheduler_address,
        layout.n_workers,
        layout.threads_per_worker,
        layout.blas_threads,
        cluster.dashboard_link if settings.dashboard else "off",
    )
    try:
        yield cluster
    finally:
        cluster.close(timeout=30)


def slurm_cluster_kwargs(slurm: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """Translate ``dask.slurm`` settings into ``SLURMCluster`` kwargs and a job count.

    Recognised keys: ``n_workers`` (jobs kept alive), ``cores``, ``processes``, ``memory``,
    ``walltime``, ``queue`` / ``partition``, ``account``, ``job_extra_directives``,
    ``job_script_prologue``, ``interface``, ``local_directory``, ``log_directory``. Workers
    get ``--lifetime``/``--lifetime-stagger`` derived from the walltime
    (:func:`worker_lifetime`).
    """
    settings = dict(slurm)
    n_jobs = int(settings.pop("n_workers", 1) or 1)
    walltime = str(settings.get("walltime") or "01:00:00")
    kwargs: dict[str, Any] = {
        "cores": int(settings.get("cores") or 1),
        "memory": str(settings.get("memory") or "2GB"),
        "walltime": walltime,
    }
    if settings.get("processes"):
        kwargs["processes"] = int(settings["processes"])
    queue = settings.get("queue") or settings.get("partition")
    if queue:
        kwargs["queue"] = str(queue)
    for key in (
        "account",
        "job_extra_directives",
        "job_script_prologue",
        "interface",
        "local_directory",
        "log_directory",
    ):
        if settings.get(key):
            kwargs[key] = settings[key]
    # dask-jobqueue gives each job's processes x threads = cores: one BLAS thread each.
    blas = 1
    prologue = list(kwargs.get("job_script_prologue", []))
    prologue += [f"export {name}={blas}" for name in BLAS_THREAD_VARIABLES]
    kwargs["job_script_prologue"] = prologue
    lifetime, stagger = worker_lifetime(parse_walltime(walltime))
    kwargs["worker_extra_args"] = [
        "--lifetime",
        f"{lifetime}s",
        "--lifetime-stagger",
        f"{stagger}s",
    ]
    return kwargs, n_jobs


# --------------------------------------------------------------------------- the daemon


def serve(
    scheduler_file: str | os.PathLike[str],
    mode: str = "local",
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_SECONDS,
    dashboard: str | None = ":0",
    slurm: Mapping[str, Any] | None = None,
    memory_limit: str | None = None,
    local_directory: str | None = None,
    max_cores: int | None = None,
    arguments: Sequence[str] = (),
) -> None:
    """Run a cluster until its scheduler goes idle, it is told to stop (SIGTERM/SIGINT).

    Publishes ``{address, dashboard, pid, host, mode, started, arguments}`` atomically in
    ``scheduler_file`` once the scheduler listens, and removes it on exit; ``arguments``
    are the daemon's command-line arguments (:func:`daemon_arguments`), which identify its
    settings.
    """
    from distributed.core import Status

    sched_path = Path(scheduler_file)
    run_dir = sched_path.parent.parent
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    settings = ClusterSettings(
        mode=mode,
        n_workers=n_workers,
        threads_per_worker=threads_per_worker,
        dashboard=dashboard,
        idle_timeout=idle_timeout,
        slurm=dict(slurm or {}),
        memory_limit=memory_limit,
        local_directory=local_directory,
    )
    with contextlib.ExitStack() as stack:
        if mode == "local":
            cores = min(usable_cores(), max_cores or usable_cores())
            cluster = stack.enter_context(local_cluster(cores, settings, run_dir))
        elif mode == "slurm":
            from dask_jobqueue import SLURMCluster

            kwargs, n_jobs = slurm_cluster_kwargs(settings.slurm)
            kwargs.setdefault("log_directory", str(cluster_dir(run_dir) / "slurm-logs"))
            cluster = SLURMCluster(
                scheduler_options={
                    "dashboard_address": dashboard or ":0",
                    "dashboard": dashboard is not None,
                    "idle_timeout": f"{idle_timeout}s",
                },
                **kwargs,
            )
            stack.callback(cluster.close)
            cluster.adapt(minimum_jobs=n_jobs, maximum_jobs=n_jobs)
            LOGGER.info("SLURMCluster job script:\n%s", cluster.job_script())
        else:
            raise ValueError(f"serve supports modes {DAEMON_MODES}, got {mode!r}")
        info = {
            "address": cluster.scheduler_address,
            "dashboard": cluster.dashboard_link if dashboard else None,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "mode": mode,
            "started": time.time(),
            "arguments": list(arguments),
        }
        write_json_atomically(sched_path, info)
        print(f"attnrmt: Dask dashboard {info['dashboard']}", flush=True)
        stack.callback(_remove_if_ours, sched_path, info)
        closed = (Status.closing, Status.closed, Status.failed)
        while not stop.wait(0.1):
            if cluster.scheduler is not None and cluster.scheduler.status in closed:
                LOGGER.info("scheduler closed (idle timeout); daemon exiting")
                break
        # whatever happens while closing, the daemon and its workers are gone soon
        watchdog = threading.Timer(DAEMON_EXIT_GRACE_SECONDS, _kill_own_group)
        watchdog.daemon = True
        watchdog.start()


def _kill_own_group() -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _remove_if_ours(path: Path, info: Mapping[str, Any]) -> None:
    if read_scheduler_file(path) == dict(info):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``serve`` (run the daemon) or ``shutdown RUN_DIR``."""
    parser = argparse.ArgumentParser(prog="python -m attnrmt.sweep.cluster")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_parser = sub.add_parser("serve", help="run a cluster daemon until idle or stopped")
    serve_parser.add_argument("--scheduler-file", required=True)
    serve_parser.add_argument("--mode", choices=DAEMON_MODES, default="local")
    serve_parser.add_argument("--n-workers", type=int, default=None)
    serve_parser.add_argument("--threads-per-worker", type=int, default=1)
    serve_parser.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_SECONDS)
    serve_parser.add_argument("--dashboard", default=":0", help="bind address or 'none'")
    serve_parser.add_argument("--slurm", default="{}", help="dask.slurm settings as JSON")
    serve_parser.add_argument("--memory-limit", default=None)
    serve_parser.add_argument("--local-directory", default=None)
    serve_parser.add_argument("--max-cores", type=int, default=None)
    stop_parser = sub.add_parser("shutdown", help="stop the daemon of a run directory")
    stop_parser.add_argument("run_dir")
    launch_parser = sub.add_parser("launch", help="start COMMAND detached, print its pid")
    launch_parser.add_argument("log_file")
    launch_parser.add_argument("daemon_command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "launch":
        command = args.daemon_command
        _launch_and_exit(args.log_file, command[1:] if command[:1] == ["--"] else command)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.command == "serve":
        serve(
            args.scheduler_file,
            mode=args.mode,
            n_workers=args.n_workers,
            threads_per_worker=args.threads_per_worker,
            idle_timeout=args.idle_timeout,
            dashboard=None if args.dashboard == "none" else args.dashboard,
            slurm=json.loads(args.slurm),
            memory_limit=args.memory_limit,
            local_directory=args.local_directory,
            max_cores=args.max_cores,
            arguments=list(sys.argv[1:] if argv is None else argv),
        )
    else:
        shutdown_run_cluster(args.run_dir)
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through subprocess
    raise SystemExit(main())
