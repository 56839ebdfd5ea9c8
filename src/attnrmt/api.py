"""``attnrmt.run``: a whole run from Python, as ``attnrmt run`` does
(:func:`attnrmt.driver.execute_run`) but without a signal handler (docs/python-api.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from attnrmt.driver import DEFAULT_PROFILE


class RunFailed(RuntimeError):
    """A run from :func:`run` ended with an error; :attr:`log` is its full log,
    :attr:`errors` the error lines that were shown."""

    def __init__(self, message: str, log: os.PathLike[str], errors: tuple[str, ...]) -> None:
        super().__init__(message)
        self.log = log
        self.errors = errors


def run(
    config: str | os.PathLike[str],
    cores: int | str | None = None,
    profile: str | os.PathLike[str] = DEFAULT_PROFILE,
    snakefile: str | os.PathLike[str] | None = None,
    squeeze: bool = False,
    display: Any = None,
) -> Any:
    """Run the sweep of ``config`` in the working directory; its results as an
    :class:`xarray.DataTree` (:func:`attnrmt.open_results`). Arguments and exceptions:
    docs/python-api.md."""
    import sys

    from attnrmt.driver import execute_run
    from attnrmt.sweep.spec.config import load_valid_config
    from attnrmt.sweep.store.cell_table.reader import open_results

    for warning in load_valid_config(Path(config)).warnings:
        print(f"attnrmt run: warning: {warning}", file=sys.stderr)
    outcome = execute_run(config, profile, snakefile, cores, display=display, signal_handlers=False)
    if outcome.interrupted:
        raise KeyboardInterrupt(f"run stopped; finished cells are kept in {outcome.run_dir}")
    if outcome.code != 0:
        raise RunFailed(
            f"the run failed (exit {outcome.code}); full log: {outcome.log}",
            outcome.log,
            outcome.errors,
        )
    return open_results(outcome.run_dir, squeeze=squeeze)
