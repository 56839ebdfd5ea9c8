"""The xarray backend of attnrmt results, engine ``"attnrmt"`` (pyproject.toml's
``xarray.backends`` entry point): ``xr.open_dataset(sweep_dir, engine="attnrmt")`` is
``open_results(run_dir)["<sweep>/cells"]`` (a run folder with ``group=``), and
``xr.open_datatree(run_dir, engine="attnrmt")`` is :func:`open_results`
(``docs/data-contract.md``, "Opening the results"). Lazy: O(metadata)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xarray.backends import BackendEntrypoint


def _path(filename_or_obj: Any) -> Path | None:
    try:
        return Path(os.fspath(filename_or_obj))
    except TypeError:
        return None


class AttnrmtBackend(BackendEntrypoint):
    """``engine="attnrmt"``: a sweep's cells as the dense grid of the data contract."""

    description = "attnrmt sweep results: the gridded cells, theory and analysis stores"
    url = "https://attnrmt.github.io/attnrmt/data-contract/"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group")
    supports_groups = True

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        group: str | None = None,
    ) -> Any:
        """The sweep folder's cells (or the store ``group`` names: ``"<sweep>"``,
        ``"<sweep>/cells"``, ``"<sweep>/theory"``, ``"<sweep>/analysis"`` of a run folder,
        ``"cells"``/``"theory"``/``"analysis"`` of a sweep folder), with the contract's
        attributes. Raises FileNotFoundError when there is no such store."""
        from attnrmt.sweep.store.cell_table.reader import open_results

        path = _path(filename_or_obj)
        if path is None:
            raise TypeError(f"engine='attnrmt' opens a folder, not {type(filename_or_obj)}")
        parts = [part for part in (group or "").strip("/").split("/") if part]
        store = parts.pop() if parts and parts[-1] in ("cells", "theory", "analysis") else "cells"
        sweep = path.joinpath(*parts)
        tree = open_results(sweep.parent)
        try:
            dataset = tree[f"{sweep.name}/{store}"].to_dataset()
        except KeyError:
            raise FileNotFoundError(f"{str(sweep)!r}: no {store} store (group={group!r})") from None
        return dataset.drop_vars(drop_variables or [], errors="ignore")

    def open_datatree(
        self, filename_or_obj: Any, *, drop_variables: str | Iterable[str] | None = None
    ) -> Any:
        """:func:`open_results` of the run folder."""
        from attnrmt.sweep.store.cell_table.reader import open_results

        tree = open_results(Path(os.fspath(filename_or_obj)))
        return tree if drop_variables is None else tree.drop_vars(drop_variables, errors="ignore")

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """A sweep folder holding a cell table (``cell_table.zarr``)."""
        path = _path(filename_or_obj)
        return path is not None and (path / "cell_table.zarr").is_dir()
