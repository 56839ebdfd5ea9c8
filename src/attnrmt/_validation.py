"""Boundary checks shared by every public function.

Each check raises :class:`ValueError` whose message names the argument and the value,
so a bad input never turns into a NaN result or a hang.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from numbers import Integral, Real
from typing import Any, SupportsInt, cast

import numpy as np


def _fail(name: str, value: Any, requirement: str) -> ValueError:
    return ValueError(f"{name}={value!r}: {requirement}")


def check_finite_array(name: str, value: Any) -> np.ndarray:
    """Return ``value`` as a float64 array, rejecting NaN and infinities."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise _fail(name, value, "must be numeric") from error
    if not np.all(np.isfinite(array)):
        raise _fail(name, value, "must be finite (no NaN or inf)")
    return array


def check_positive(name: str, value: Any, *, allow_zero: bool = False) -> np.ndarray:
    """Array of ``value``; every entry must be > 0 (>= 0 with ``allow_zero``)."""
    array = check_finite_array(name, value)
    bad = array < 0 if allow_zero else array <= 0
    if np.any(bad):
        bound = ">= 0" if allow_zero else "> 0"
        raise _fail(name, value, f"must be {bound}")
    return array


def check_open_interval(name: str, value: Any, low: float, high: float) -> np.ndarray:
    """Array of ``value``; every entry must lie strictly between ``low`` and ``high``."""
    array = check_finite_array(name, value)
    if np.any((array <= low) | (array >= high)):
        raise _fail(name, value, f"must lie strictly between {low} and {high}")
    return array


def check_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` as a Python int (bools rejected), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral | Real):
        raise _fail(name, value, "must be an integer")
    # typeshed's numbers.Real has no __int__ (python/mypy#3186); every Real here (int, float,
    # numpy scalars) has one, so the cast only tells mypy what the isinstance check proved.
    number = cast(SupportsInt, value)
    if isinstance(value, Real) and not isinstance(value, Integral):
        if not math.isfinite(value) or value != int(number):
            raise _fail(name, value, "must be an integer")
    integer = int(number)
    if minimum is not None and integer < minimum:
        raise _fail(name, value, f"must be >= {minimum}")
    return integer


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """``value`` must be one of ``choices``."""
    options = tuple(choices)
    if value not in options:
        raise _fail(name, value, f"must be one of {', '.join(map(repr, options))}")
    return value


def spec_dict(spec: Mapping[str, Any] | str) -> dict[str, Any]:
    """A model spec as a dict, for error messages: ``"prefix"`` -> ``{"kind": "prefix"}``."""
    return {"kind": spec} if isinstance(spec, str) else dict(spec)


def split_model_spec(
    argument: str,
    spec: Any,
    allowed: Mapping[str, Sequence[str]],
    required: Mapping[str, Sequence[str]] | None = None,
) -> tuple[str, dict[str, Any]]:
    """``(kind, parameters)`` of a model spec such as ``{"kind": "prefix", "L": 4}``.

    A bare string is a kind without parameters. ``allowed`` maps every kind to the names of
    its parameters, ``required`` to those it needs; an unknown kind, an unexpected or a
    missing parameter raises ValueError naming ``argument`` and the spec.
    """
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, Mapping):
        raise _fail(argument, spec, "must be a name or a dict with a 'kind' key")
    if "kind" not in spec:
        raise _fail(argument, dict(spec), "missing 'kind'")
    kind = check_choice(f"{argument}.kind", spec["kind"], allowed)
    params = {key: value for key, value in spec.items() if key != "kind"}
    unexpected = sorted(set(params) - set(allowed[kind]))
    if unexpected:
        raise _fail(
            argument,
            dict(spec),
            f"unexpected parameter(s) {unexpected} for kind {kind!r} "
            f"(allowed: {list(allowed[kind])})",
        )
    needed = (required or {}).get(kind, ())
    if any(name not in params for name in needed):
        raise _fail(argument, dict(spec), f"{kind} needs {' and '.join(map(repr, needed))}")
    return kind, params


def check_numeric(name: str, value: Any) -> np.ndarray:
    """``value`` as a finite float64 array; text and booleans are rejected, not parsed."""
    try:
        kind = np.asarray(value).dtype.kind
    except (TypeError, ValueError):  # ragged nesting
        kind = "O"
    if kind not in "iuf":
        raise _fail(name, value, "must be numeric")
    return check_finite_array(name, value)
