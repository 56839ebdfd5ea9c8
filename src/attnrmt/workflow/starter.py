"""``attnrmt init [DIR]``: ``DIR/config.yaml`` (:data:`STARTER_CONFIG`, a small valid sweep
with every common key explained) and ``DIR/profiles/<name>/`` (a copy of a shipped profile)
to edit (docs/cluster.md). O(files copied)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from attnrmt.workflow import WORKFLOW_DIR, profile_path

STARTER_CONFIG = WORKFLOW_DIR / "starter-config.yaml"
"""The commented starter config (valid as shipped: tests/test_cli.py runs its plan)."""
CONFIG_NAME = "config.yaml"


def write_starter(
    directory: str | os.PathLike[str], profile: str = "slurm-dask", overwrite: bool = False
) -> list[Path]:
    """Write the starter config and the copy of ``profile`` under ``directory`` (made if
    needed); the paths written, the config first and the profile's ``config.yaml`` second.
    ValueError (nothing written) for a profile not shipped, or a file that exists unless
    ``overwrite``."""
    source = profile_path(profile)
    if source.parent != profile_path("default").parent:
        raise ValueError(f"profile {profile!r}: attnrmt init copies a shipped profile")
    root = Path(directory)
    target = root / "profiles" / source.name
    files = sorted(path for path in source.rglob("*") if path.is_file())
    files.sort(key=lambda path: path.name != "config.yaml")  # the profile's settings first
    copies = [(STARTER_CONFIG, root / CONFIG_NAME)]
    copies += [(path, target / path.relative_to(source)) for path in files]
    existing = [str(dst) for _, dst in copies if dst.exists()]
    if existing and not overwrite:
        raise ValueError(f"{', '.join(existing)}: exists, nothing written (--force overwrites)")
    for src, dst in copies:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    return [dst for _, dst in copies]
