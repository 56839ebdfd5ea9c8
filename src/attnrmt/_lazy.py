"""One helper for the packages' doors: public names imported on first use (PEP 562).

A package lists ``{name: module}`` and binds the two functions this returns as its module
``__getattr__`` and ``__dir__``; importing the package then imports none of its modules,
so a light caller (config validation, ``open_results``) never pays for a heavy one (the
cell's scipy, Dask, Zarr). Cost: one dict look-up per first access of a name.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_door(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose public names live in ``exports``."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
