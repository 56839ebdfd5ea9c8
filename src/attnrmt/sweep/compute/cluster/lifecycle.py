"""Start and stop one Dask cluster per run, in the Snakemake process (docs/cluster.md;
docs/scaling.md, "Pipeline overhead").

Block jobs are threads of one Snakemake process: the first that needs the cluster starts
it (LocalCluster or dask-jobqueue), later ones share it and its one client;
``onsuccess``/``onerror`` close it and ``onstart`` installs :func:`stop_on_signals`. Every
connection is mutual TLS with the run's own credentials (:mod:`.security`);
``results/<run>/.dask/scheduler.json`` (0600) serves the owner's clients (:func:`connect`)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnrmt.sweep.compute.cluster import jobqueue, security
from attnrmt.sweep.compute.cluster.settings import LOOPBACK, ClusterSettings
from attnrmt.sweep.compute.cluster.sizing import (
    allocation_cores,
    configure_worker_environment,
    usable_cores,
    worker_layout,
)

DASK_DIRNAME = ".dask"
SCHEDULER_FILENAME = "scheduler.json"
CLUSTER_LOG_FILENAME = "cluster.log"
CLOSE_TIMEOUT_SECONDS = 20
"""Seconds a closing cluster may take (nannies, batch-job cancellation)."""
CLIENT_TIMEOUT = "60s"
LOGGED = ("distributed", "dask_jobqueue", "attnrmt")
"""Loggers copied to ``.dask/cluster.log``."""
LOGGER = logging.getLogger("attnrmt.cluster")


class RunStopped(RuntimeError):
    """The run's cluster was stopped (a signal, or a batch request that can never run)."""


@dataclass
class RunCluster:
    """A run's live cluster and who uses it."""

    run_dir: Path
    settings: ClusterSettings
    cluster: Any
    security: Any
    watch: Any = None
    log_handler: logging.Handler | None = None
    client: Any = None
    client_lock: threading.Lock = field(default_factory=threading.Lock)

    def shared_client(self) -> Any:
        """The run's one :class:`distributed.Client` in this process, reopened after it was closed
        (a walltime deadline closes it); thread-safe."""
        from distributed import Client

        with self.client_lock:
            if self.client is None or self.client.status in ("closing", "closed"):
                self.client = Client(
                    self.cluster.scheduler_address,
                    security=self.security,
                    set_as_default=False,
                    timeout=CLIENT_TIMEOUT,
                )
            return self.client

    def scheduler_info(self) -> dict[str, Any]:
        """What :func:`connect` needs: address, dashboard link, credential files."""
        cert, key = security.credential_paths(cluster_dir(self.run_dir))
        return {
            "address": self.cluster.scheduler_address,
            "dashboard": self.cluster.dashboard_link if self.settings.dashboard else None,
            "mode": self.settings.mode,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "tls_cert": str(cert),
            "tls_key": str(key),
        }


_RUNS: dict[Path, RunCluster] = {}
_CLIENTS: dict[Path, list[Any]] = {}
"""Clients of running block jobs, by run (every mode), once per block using it (block jobs
share the run's client): closed when the run is stopped."""
_STOPPED: dict[Path, str] = {}
_DASHBOARDS: dict[Path, str] = {}
_REGISTRY_LOCK = threading.RLock()


def cluster_dir(run_dir: str | os.PathLike[str]) -> Path:
    """``results/<run>/.dask``: scheduler file, credentials, cluster log, worker logs."""
    return Path(run_dir) / DASK_DIRNAME


def scheduler_file_path(run_dir: str | os.PathLike[str]) -> Path:
    """``results/<run>/.dask/scheduler.json``."""
    return cluster_dir(run_dir) / SCHEDULER_FILENAME


def read_scheduler_file(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Contents of a scheduler file, or ``None`` when it is missing or unreadable."""
    try:
        info = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and "address" in info else None


def _key(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir).resolve()


def say(message: str) -> None:
    """One line on stderr for the person running the pipeline, as one ``os.write`` (safe in a
    signal handler, never interleaved); a stream without a descriptor gets a ``print``."""
    line = f"attnrmt: {message}\n"
    try:
        descriptor = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        print(line, end="", file=sys.stderr, flush=True)
        return
    with contextlib.suppress(OSError):
        sys.stderr.flush()
        os.write(descriptor, line.encode())


# --------------------------------------------------------------------------- start


def local_cluster(run_dir: Path, cores: int, settings: ClusterSettings, secured: Any) -> Any:
    """A LocalCluster of worker processes sized to ``cores``, everything on 127.0.0.1 over
    TLS (``secured``), no worker dashboards, spawned without re-running the main script."""
    from distributed import LocalCluster

    workdir = Path(settings.local_directory or cluster_dir(run_dir) / "workers")
    workdir.mkdir(parents=True, exist_ok=True)
    layout = worker_layout(cores, settings.n_workers, settings.threads_per_worker)
    configure_worker_environment(layout.blas_threads)
    scheduler_kwargs: dict[str, Any] = {"dashboard": settings.dashboard is not None}
    if settings.idle_timeout is not None:
        scheduler_kwargs["idle_timeout"] = f"{settings.idle_timeout}s"
    with spawning_without_main_script():
        return LocalCluster(
            n_workers=layout.n_workers,
            threads_per_worker=layout.threads_per_worker,
            processes=True,
            host=LOOPBACK,
            protocol="tls://",
            security=secured,
            dashboard_address=settings.dashboard or f"{LOOPBACK}:0",
            worker_dashboard_address=None,
            local_directory=str(workdir),
            memory_limit=settings.memory_limit or "auto",
            scheduler_kwargs=scheduler_kwargs,
            silence_logs=False,  # INFO to .dask/cluster.log (worker deaths, restarts)
        )


@contextlib.contextmanager
def spawning_without_main_script() -> Iterator[None]:
    """Worker processes spawned inside this block do not re-run ``__main__.__file__`` (here the
    ``snakemake`` executable). O(1)."""
    main = sys.modules.get("__main__")
    main_file = getattr(main, "__file__", None)
    if main is None or main_file is None:
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = main_file


def _attach_cluster_log(run_dir: Path) -> logging.Handler:
    """Copy distributed's log lines to ``.dask/cluster.log`` (0600); consoles keep warnings."""
    path = cluster_dir(run_dir) / CLUSTER_LOG_FILENAME
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, security.PRIVATE_FILE_MODE)
    os.close(descriptor)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    handler.setLevel(logging.INFO)
    for name in LOGGED:
        logger = logging.getLogger(name)
        for console in logger.handlers:  # the terminal keeps showing warnings only
            if console.level == logging.NOTSET:
                console.setLevel(logging.WARNING)
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
    return handler


def _detach_cluster_log(handler: logging.Handler | None) -> None:
    if handler is None:
        return
    for name in LOGGED:
        logging.getLogger(name).removeHandler(handler)
    handler.close()


def start_run_cluster(run_dir: str | os.PathLike[str], settings: ClusterSettings) -> RunCluster:
    """Create the run's cluster with fresh credentials and publish its scheduler file; raises
    :class:`RunStopped` for a batch request that can never run."""
    run_path = Path(run_dir)
    dask_dir = security.private_directory(cluster_dir(run_path))
    run_security = security.new_run_credentials(dask_dir)
    handler = _attach_cluster_log(run_path)
    try:
        if settings.is_jobqueue:
            cert, _ = security.credential_paths(dask_dir)
            kwargs = jobqueue.cluster_kwargs(
                settings, run_security, cert.parent, dask_dir / f"{settings.mode}-logs"
            )
            cluster = jobqueue.new_jobqueue_cluster(settings, kwargs)
            LOGGER.info("worker job script:\n%s", cluster.job_script())
            objection = jobqueue.unsatisfiable_request(settings, cluster, dask_dir)
            if objection is not None:
                cluster.close()
                raise RunStopped(objection)
            n_jobs = int(settings.jobqueue["n_workers"])
            cluster.scale(jobs=n_jobs)
        else:
            cores = min(usable_cores(), settings.max_cores or usable_cores())
            cluster = local_cluster(run_path, cores, settings, run_security)
    except BaseException:
        _detach_cluster_log(handler)
        raise
    run = RunCluster(run_path, settings, cluster, run_security, log_handler=handler)
    if settings.mode == "slurm":
        run.watch = jobqueue.pending_watch(
            settings, cluster, lambda message: stop_run(run_path, message)
        ).start()
    info = run.scheduler_info()
    security.write_private_file(scheduler_file_path(run_path), json.dumps(info, indent=1))
    say(
        f"Dask cluster {info['address']} ({settings.mode}, TLS); "
        f"dashboard {info['dashboard'] or 'off'}"
    )
    return run


def get_run_cluster(run_dir: str | os.PathLike[str], settings: ClusterSettings) -> RunCluster:
    """The run's cluster of this process, started on first use (thread-safe); raises
    :class:`RunStopped` once the run was stopped."""
    key = _key(run_dir)
    with _REGISTRY_LOCK:
        if key in _STOPPED:
            raise RunStopped(_STOPPED[key])
        run = _RUNS.get(key)
        if run is not None and _is_running(run.cluster):
            return run
        if run is not None:  # closed under us (idle timeout): start again
            _close(run)
        try:
            run = start_run_cluster(run_dir, settings)
        except RunStopped as stopped:
            _STOPPED[key] = str(stopped)
            say(f"stopping the run: {stopped}")
            raise
        _RUNS[key] = run
        if settings.dashboard is not None:
            _DASHBOARDS[key] = run.cluster.dashboard_link
        return run


def dashboard_link(run_dir: str | os.PathLike[str]) -> str | None:
    """The dashboard link of the run's cluster in this process (also after it closed), or None."""
    with _REGISTRY_LOCK:
        return _DASHBOARDS.get(_key(run_dir))


def _is_running(cluster: Any) -> bool:
    from distributed.core import Status

    return getattr(cluster, "status", None) == Status.running


# --------------------------------------------------------------------------- clients


@contextlib.contextmanager
def run_client(run_dir: str | os.PathLike[str], settings: ClusterSettings) -> Iterator[Any]:
    """A :class:`distributed.Client` of the run's cluster: the shared one of this process
    (``local``, batch systems), the user's scheduler with the user's TLS settings
    (``address``), or an in-process LocalCluster sized to the allocation (``job``)."""
    from distributed import Client

    if settings.mode == "address":
        with _address_client(settings) as client, _registered(run_dir, client):
            yield client
    elif settings.mode == "job":
        job_security = security.in_memory_security()
        with (
            local_cluster(Path(run_dir), allocation_cores(), settings, job_security) as cluster,
            Client(cluster, security=job_security, set_as_default=False) as client,
            _registered(run_dir, client),
        ):
            yield client
    else:
        run = get_run_cluster(run_dir, settings)
        with _registered(run_dir, run.shared_client()) as client:
            yield client  # closed with the cluster (_close) or by stop_run


@contextlib.contextmanager
def _registered(run_dir: str | os.PathLike[str], client: Any) -> Iterator[Any]:
    """Book a block job's client under its run while it works (see :func:`stop_run`)."""
    key = _key(run_dir)
    with _REGISTRY_LOCK:
        if key in _STOPPED:
            raise RunStopped(_STOPPED[key])
        _CLIENTS.setdefault(key, []).append(client)
    try:
        yield client
    finally:
        with _REGISTRY_LOCK:
            _CLIENTS.get(key, []).remove(client)


@contextlib.contextmanager
def _address_client(settings: ClusterSettings) -> Iterator[Any]:
    """Client of a scheduler the user runs; TLS from the user's Dask config (docs/cluster.md)."""
    from distributed import Client
    from distributed.security import Security

    if not (settings.address or settings.scheduler_file):
        raise ValueError("dask.mode 'address' needs dask.address or dask.scheduler_file")
    if settings.address and not settings.address.startswith("tls://"):
        say(
            f"warning: {settings.address} is not a tls:// address: anyone who can reach it "
            "can run code as its owner (docs/cluster.md, Security)"
        )
    kwargs: dict[str, Any] = {"set_as_default": False, "timeout": CLIENT_TIMEOUT}
    kwargs["security"] = Security()  # distributed.comm.tls.* of the user's configuration
    if settings.address:
        client = Client(settings.address, **kwargs)
    else:
        client = Client(scheduler_file=settings.scheduler_file, **kwargs)
    try:
        yield client
    finally:
        client.close()


def connect(run_dir: str | os.PathLike[str], timeout: str = CLIENT_TIMEOUT) -> Any:
    """A Client of a running run's cluster for its owner (scheduler file + credentials)."""
    from distributed import Client

    info = read_scheduler_file(scheduler_file_path(run_dir))
    if info is None:
        raise FileNotFoundError(f"no running Dask cluster for {run_dir}")
    return Client(
        info["address"],
        security=security.run_security(cluster_dir(run_dir)),
        set_as_default=False,
        timeout=timeout,
    )


# --------------------------------------------------------------------------- stop


def run_stop_reason(run_dir: str | os.PathLike[str]) -> str | None:
    """Why the run's cluster was stopped (signal, unsatisfiable request), or ``None``."""
    with _REGISTRY_LOCK:
        return _STOPPED.get(_key(run_dir))


def stop_run(run_dir: str | os.PathLike[str], reason: str) -> None:
    """Stop a run's work at once: refuse new block jobs and close running ones' clients (their
    futures cancel, blocks salvage what finished), the cluster closed in the background.
    Returns at once: safe in a signal handler."""
    key = _key(run_dir)
    with _REGISTRY_LOCK:
        if key in _STOPPED:
            return
        _STOPPED[key] = reason
        clients = list({id(client): client for client in _CLIENTS.get(key, ())}.values())
    _in_background(_close_clients_then_cluster, run_dir, clients)
    say(f"stopping the run: {reason}")


def _close_clients_then_cluster(run_dir: str | os.PathLike[str], clients: list[Any]) -> None:
    for client in clients:
        with contextlib.suppress(Exception):
            client.close(timeout=5)
    shutdown_run_cluster(run_dir)


def stop_all_runs(reason: str) -> None:
    """:func:`stop_run` for every run with a cluster or a working client in this process."""
    with _REGISTRY_LOCK:
        run_dirs = set(_RUNS) | {key for key, clients in _CLIENTS.items() if clients}
    for run_dir in sorted(run_dirs):
        stop_run(run_dir, reason)


def stop_on_signals(
    release_locks: Callable[[], None] | None = None,
    batch_workers: bool = True,
    store_finished: Callable[[], None] | None = None,
) -> None:
    """Make SIGINT and SIGTERM stop the run (from ``onstart``): the first stops the block jobs and
    reaches the previous handler; :data:`STOP_GRACE_SECONDS` later the process stores what
    finished, releases its locks and exits. ``batch_workers``: undo dask-jobqueue's SIGINT hook."""
    if batch_workers:
        before = signal.getsignal(signal.SIGINT)
        with contextlib.suppress(ImportError):
            import dask_jobqueue  # noqa: F401
        signal.signal(signal.SIGINT, before)
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)

        def handler(number: int, frame: Any, previous: Any = previous) -> None:
            if not _exit_if_still_running_after(
                STOP_GRACE_SECONDS, number, release_locks, store_finished
            ):
                return  # a repeated signal: the stop is under way
            stop_all_runs(f"{signal.Signals(number).name} received")
            if callable(previous):
                previous(number, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(number, signal.SIG_DFL)
                os.kill(os.getpid(), number)

        signal.signal(signum, handler)


#: Seconds a stopped run may take to wind down before the process stores the finished
#: cells itself and exits (as safe as a SIGKILL, which every run survives; the next run
#: removes the stale lock, :mod:`attnrmt.sweep.store.guard`).
STOP_GRACE_SECONDS = 3.0
_EXIT_TIMER: list[threading.Timer] = []


def _exit_if_still_running_after(
    seconds: float,
    signum: int,
    release_locks: Callable[[], None] | None = None,
    store_finished: Callable[[], None] | None = None,
) -> bool:
    """Start (once; False when already started) a daemon timer exiting the process ``seconds``
    after a stop signal, after ``store_finished()`` and ``release_locks()``."""
    with _REGISTRY_LOCK:
        if _EXIT_TIMER:
            return False

        def hard_exit() -> None:
            say(
                f"still running {seconds:.0f} s after {signal.Signals(signum).name}: storing "
                "the finished cells and exiting; rerun the same command to resume"
            )
            for step in (store_finished, release_locks):
                if step is not None:
                    try:
                        step()
                    except Exception as exc:  # the exit must happen
                        say(f"while stopping: {exc!r}")
            os._exit(128 + signum)

        timer = threading.Timer(seconds, hard_exit)
        timer.daemon = True
        _EXIT_TIMER.append(timer)
    timer.start()
    return True


def _close(run: RunCluster) -> None:
    """Close a cluster, then delete its credentials (restarting nannies still read them)."""
    if run.watch is not None:
        run.watch.stop()
    if run.client is not None:
        with contextlib.suppress(Exception):
            run.client.close(timeout=5)
    with contextlib.suppress(Exception):
        run.cluster.close(timeout=CLOSE_TIMEOUT_SECONDS)
    _detach_cluster_log(run.log_handler)
    _remove_credentials(run.run_dir)


def shutdown_run_cluster(run_dir: str | os.PathLike[str], wait: bool = True) -> bool:
    """Close the run's cluster of this process, if any (``wait=False``: in the background),
    remove its scheduler file and credentials; whether a live cluster was closed. O(workers)."""
    with _REGISTRY_LOCK:
        run = _RUNS.pop(_key(run_dir), None)
    with contextlib.suppress(FileNotFoundError):
        scheduler_file_path(run_dir).unlink()
    if run is None:
        _remove_credentials(run_dir)
        return False
    link = dashboard_link(run_dir)
    say(f"Dask cluster closed (its dashboard was {link})" if link else "Dask cluster closed")
    if wait:
        _close(run)
    else:
        _in_background(_close, run)
    return True


_CLOSING: list[threading.Thread] = []
"""Threads closing clients or clusters in the background, joined at exit."""


def _in_background(target: Callable[..., None], *args: Any) -> None:
    """Run ``target(*args)`` in a daemon thread joined at exit before distributed's own
    ``atexit`` (two closes of one cluster at once raise in distributed)."""
    thread = threading.Thread(target=target, args=args, daemon=True)
    with _REGISTRY_LOCK:
        if not _CLOSING:
            import atexit

            import distributed.deploy.spec  # noqa: F401  (its atexit first, so ours runs before it)

            atexit.register(_finish_closing)
        _CLOSING.append(thread)
    thread.start()


def _finish_closing() -> None:
    """Wait (at most :data:`CLOSE_TIMEOUT_SECONDS` plus 10 s in all) for the closing threads."""
    deadline = time.monotonic() + CLOSE_TIMEOUT_SECONDS + 10
    for thread in list(_CLOSING):
        thread.join(max(0.0, deadline - time.monotonic()))


class BlocksLeft:
    """The fragments a run's block jobs have still to write, so the cluster is released after
    the last one (fragments on disk when built are not waited for). Thread-safe."""

    def __init__(self, fragments: Iterable[str | os.PathLike[str]]) -> None:
        self._left = {os.path.normpath(path) for path in fragments if not os.path.exists(path)}
        self._lock = threading.Lock()

    def finished(self, fragment: str | os.PathLike[str]) -> bool:
        """Record that ``fragment`` was written; True once: when it was the last one left."""
        with self._lock:
            if not self._left:
                return False
            self._left.discard(os.path.normpath(fragment))
            return not self._left


#: In the ``__qualname__`` of the wake-up callbacks Snakemake's job rate limiter arms.
RATE_LIMITER_WAKEUP = "JobScheduler._schedule_reevalutation"


def cancel_rate_limiter_wakeups() -> int:
    """Cancel the pending wake-up timers of Snakemake 9's job rate limiter (snakemake/snakemake
    #3744; docs/scaling.md, "Pipeline overhead"); how many. O(threads)."""
    cancelled = 0
    for thread in threading.enumerate():
        wakeup = getattr(thread, "function", None)
        if isinstance(thread, threading.Timer) and RATE_LIMITER_WAKEUP in getattr(
            wakeup, "__qualname__", ""
        ):
            thread.cancel()
            cancelled += 1
    return cancelled


def _remove_credentials(run_dir: str | os.PathLike[str]) -> None:
    for path in security.credential_paths(cluster_dir(run_dir)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
