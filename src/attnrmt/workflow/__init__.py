"""Where the Snakemake workflow is: ``attnrmt/workflow/files``, in a checkout a link to the
top-level ``workflow/``, in a wheel a copy made at build time, so ``attnrmt run`` runs
:data:`SNAKEFILE` from any directory (docs/architecture.md); and the profile look-up."""

from __future__ import annotations

import os
from pathlib import Path

WORKFLOW_DIR = (Path(__file__).parent / "files").resolve()
"""Folder of the workflow (``Snakefile``, ``rules/``, ``schemas/``, ``report/``,
``profiles/``): the checkout's ``workflow/`` or the wheel's copy of it."""
SNAKEFILE = WORKFLOW_DIR / "Snakefile"
"""The workflow's main Snakefile."""
PROFILES_DIR = WORKFLOW_DIR / "profiles"
"""The shipped workflow profiles, one folder each."""
SCHEMA_PATH = WORKFLOW_DIR / "schemas" / "config.schema.yaml"
"""The config schema (JSON Schema draft 2020-12): the one place defaults are written."""
DEFAULT_PROFILE = "default"
"""Profile of ``attnrmt run`` unless ``--profile`` names another."""


def shipped_profiles() -> list[str]:
    """Names of the shipped profiles (folders of :data:`PROFILES_DIR` with a
    ``config.yaml``), sorted. O(profiles)."""
    return sorted(path.parent.name for path in PROFILES_DIR.glob("*/config.yaml"))


def profile_path(profile: str | os.PathLike[str]) -> Path:
    """The profile folder ``profile`` names: an existing directory (relative to the working
    directory) as given, else the shipped profile of that name; ValueError listing the shipped
    ones otherwise. O(profiles)."""
    given = Path(profile)
    if given.is_dir():
        return given
    shipped = PROFILES_DIR / str(profile)
    if given.name == str(profile) and (shipped / "config.yaml").is_file():
        return shipped
    raise ValueError(
        f"profile {str(profile)!r}: no such directory, and not a shipped profile "
        f"({', '.join(shipped_profiles())}); `attnrmt init DIR` copies one to edit"
    )


_LOCAL_DASK_MODES = ("local", "job")
"""Dask modes (config ``dask.mode``) that need no batch-system package."""


def profile_extras(folder: str | os.PathLike[str]) -> list[str]:
    """Optional extras a profile needs beyond ``workflow``: ``["hpc"]`` when it uses
    Snakemake's SLURM executor or Dask workers as batch jobs (dask-jobqueue), else ``[]``.
    Reads the profile's ``config.yaml`` (an unreadable one needs nothing here: Snakemake
    reports it). O(size of the file)."""
    import yaml

    try:
        settings = yaml.safe_load((Path(folder) / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    settings = settings if isinstance(settings, dict) else {}
    config = settings.get("config")
    dask = config.get("dask") if isinstance(config, dict) else None
    mode = dask.get("mode", "local") if isinstance(dask, dict) else "local"
    return ["hpc"] if settings.get("executor") == "slurm" or mode not in _LOCAL_DASK_MODES else []


__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES_DIR",
    "SCHEMA_PATH",
    "SNAKEFILE",
    "WORKFLOW_DIR",
    "profile_extras",
    "profile_path",
    "shipped_profiles",
]
