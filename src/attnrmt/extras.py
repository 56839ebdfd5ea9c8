"""Which optional extra a command needs (``workflow``: running sweeps; ``hpc``: clusters;
docs/python-api.md), and the one message naming the pip command when it is missing.
Cost: one :func:`importlib.util.find_spec` per module of the extra (no import)."""

from __future__ import annotations

import importlib.util

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "workflow": ("snakemake", "distributed", "cryptography", "bokeh", "matplotlib", "pygments"),
    "hpc": ("dask_jobqueue", "snakemake_executor_plugin_slurm"),
}
"""Importable modules each extra installs (pyproject.toml ``[project.optional-dependencies]``)."""


class MissingExtra(ImportError):
    """A command needs an optional extra that is not installed (the message says which
    and how to install it)."""


def require_extra(extra: str, needed_by: str) -> None:
    """Raise :class:`MissingExtra` when a module of ``extra`` (:data:`EXTRA_MODULES`) is
    missing: ``attnrmt run needs the 'workflow' extra (snakemake not installed): pip install
    'attnrmt[workflow]'`` (``needed_by``: ``"attnrmt run"``)."""
    missing = [name for name in EXTRA_MODULES[extra] if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtra(
            f"{needed_by} needs the {extra!r} extra ({', '.join(missing)} not installed): "
            f"pip install 'attnrmt[{extra}]'"
        )
