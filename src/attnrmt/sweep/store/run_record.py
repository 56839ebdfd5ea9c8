"""The run-folder record ``results/<run>/.attnrmt-run.json``: which config file a results
folder belongs to, so that no run silently writes into another config's results.
Cost: one small file read (and one atomic write on a run's first start).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from attnrmt.sweep.spec.config import ConfigError
from attnrmt.sweep.store.atomic import write_text_atomically
from attnrmt.sweep.store.layout import RunLayout

#: File in ``results/<run>/`` naming the config file the folder belongs to.
RUN_RECORD = RunLayout(".").record.name


def _config_file_label(config_file: str | os.PathLike[str]) -> str:
    """The config file as recorded: relative to the working directory when inside it."""
    absolute = Path(config_file).absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def claim_run_dir(
    run_dir: str | os.PathLike[str], config_file: str | os.PathLike[str], write: bool = True
) -> None:
    """Make sure ``results/<run>/`` belongs to ``config_file``; record it when new.

    The first run of a config writes ``<run_dir>/.attnrmt-run.json`` (``config_file``:
    the path relative to the working directory, ``config_path``: the absolute path); a
    later run of ANOTHER config file with the same run name is refused, so no run silently
    writes into another config's results. The same file is recognised by either path (a
    copied project keeps its relative path; ``attnrmt plan`` from elsewhere gives the
    absolute one). Each gathered sweep keeps a copy (:func:`copy_run_record`), so a
    deleted record is still known: the owner is then read from a copy, and a run of the
    right config recreates the record. A folder without any record (made before records
    existed) is adopted. ``write=False`` only checks (``attnrmt plan``).

    Raises
    ------
    RunDirConflict
        Naming both config files and the two ways out.
    """
    run_dir = Path(run_dir)
    record = RunLayout(run_dir).record
    mine = {
        "config_file": _config_file_label(config_file),
        "config_path": str(Path(config_file).resolve()),
    }
    for copy in (record, *sorted(run_dir.glob(f"*/{RUN_RECORD}"))):
        try:
            owner = json.loads(copy.read_text(encoding="utf-8"))
            owner_name = str(owner["config_file"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not any(owner.get(k) == v for k, v in mine.items()):
            label = mine["config_file"]
            raise RunDirConflict(
                f"run {run_dir.name!r}: {run_dir}/ holds the results of the config file "
                f"{owner_name!r} (recorded in {copy}), not of {label!r}. Give {label!r} "
                f"its own run name (set run: in it, or remove run: to use "
                f"{Path(label).stem!r}), or delete {run_dir}/ to replace those results"
            )
        if copy == record:
            return
        break  # the record was deleted; a sweep's copy says it is ours: recreate it
    if write:
        write_text_atomically(record, json.dumps(mine, indent=2) + "\n", durable=False)


def copy_run_record(sweep_dir: str | os.PathLike[str]) -> None:
    """Keep a copy of the run's record in the sweep folder ``<run>/<sweep>/`` (written by
    the gather, beside the sweep's stores; nothing when the run has no record). O(1)."""
    sweep_dir = Path(sweep_dir)
    record = RunLayout(sweep_dir.parent).record
    try:
        text = record.read_text(encoding="utf-8")
    except OSError:
        return
    copy = sweep_dir / RUN_RECORD
    if not copy.is_file() or copy.read_text(encoding="utf-8") != text:
        write_text_atomically(copy, text, durable=False)


class RunDirConflict(ConfigError):
    """``results/<run>/`` belongs to another config file (see :func:`claim_run_dir`)."""


__all__ = ["RUN_RECORD", "RunDirConflict", "claim_run_dir", "copy_run_record"]
