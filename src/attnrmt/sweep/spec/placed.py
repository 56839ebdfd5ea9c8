"""snr axes placed by the theory: ``snr: {around, span, points}`` (docs/getting-started.md,
"snr placed by the theory"): ``points`` values evenly spaced from ``span[0] t_min`` to
``span[1] t_max``, ``t_min``/``t_max`` the smallest and largest predicted threshold ``> 0``
of the ``around`` transitions over every variant; with a threshold ``<= 0`` the axis
starts at ``snr = 0``. Thresholds from :func:`attnrmt.theory.predict.predict_point` at the
sweep's nominal ``delta``, ``gamma``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from attnrmt.contract import TRANSITIONS, VARIANTS, round_significant

#: Axes that must have one value in a sweep with a placed snr axis (its one setting).
SETTING_AXES: tuple[str, ...] = ("delta", "gamma", "T", "positional", "weights", "centered")


def is_placed(raw: Any) -> bool:
    """Whether an ``snr`` value is a placed spec (a mapping with ``around``). O(1)."""
    return isinstance(raw, Mapping) and "around" in raw


def place_points(thresholds: Sequence[float], span: Sequence[float], points: int) -> list[float]:
    """The placed snr values for ``thresholds`` (module docstring), rounded, ascending;
    ValueError when no threshold is finite and ``> 0``. O(points)."""
    positive = [t for t in thresholds if math.isfinite(t) and t > 0]
    if not positive:
        raise ValueError(
            f"no predicted threshold > 0 to place the axis around (thresholds: "
            f"{', '.join(f'{t:.4g}' for t in thresholds)})"
        )
    below = any(not t > 0 for t in thresholds)
    count = points - 1 if below else points
    low, high = span[0] * min(positive), span[1] * max(positive)
    step = (high - low) / (count - 1) if count > 1 else 0.0
    values = [low + i * step for i in range(count - 1)] + [high] if count > 1 else [low]
    return [round_significant(v) for v in ([0.0] if below else []) + values]


def placed_axis(
    prefix: str,
    spec: Mapping[str, Any],
    axes: Mapping[str, list],
    positional_specs: Mapping[tuple[str, int], Mapping[str, Any]],
    weights_specs: Mapping[tuple[str, int], Mapping[str, Any]],
) -> tuple[list[float], dict[str, Any]]:
    """The snr axis of a placed spec and its record ``{"around", "span", "points",
    "thresholds"}``; :class:`ConfigError` naming ``<prefix>.snr`` and the value (an unknown
    transition, a span not ``0 < low < high``, several settings, no threshold ``> 0``).
    O(T^2 + points)."""
    from attnrmt.sweep.spec.config import ConfigError

    around, span, points = list(spec["around"]), list(spec["span"]), int(spec["points"])
    for index, name in enumerate(around):
        if name not in TRANSITIONS:
            raise ConfigError(
                f"{prefix}.snr.around[{index}]={name!r}: must be one of {', '.join(TRANSITIONS)}"
            )
    if not (len(span) == 2 and 0 < span[0] < span[1] and math.isfinite(span[1])):
        raise ConfigError(f"{prefix}.snr.span={span!r}: must be [low, high] with 0 < low < high")
    several = [axis for axis in SETTING_AXES if len(axes[axis]) > 1]
    if several:
        axis = several[0]
        raise ConfigError(
            f"{prefix}.{axis}={axes[axis]!r}: a sweep whose snr is placed by the theory "
            f"({prefix}.snr={dict(spec)!r}) has one setting (one value of "
            f"{', '.join(SETTING_AXES)}; d may vary): give each setting its own sweep"
        )
    from attnrmt.theory.predict import predict_point

    T = axes["T"][0]
    positional = positional_specs[(axes["positional"][0], T)]
    weights = weights_specs[(axes["weights"][0], T)]
    delta, gamma, centered = (axes[axis][0] for axis in ("delta", "gamma", "centered"))
    point = predict_point(delta, gamma, 1.0, T, positional, weights, centered, VARIANTS)
    thresholds = {  # "<variant> <transition>": snr of each transition in around
        f"{variant} {transition}": float(point[f"threshold_snr_{transition}"].sel(variant=variant))
        for variant in VARIANTS
        for transition in around
    }
    try:
        values = place_points(list(thresholds.values()), span, points)
    except ValueError as error:
        raise ConfigError(f"{prefix}.snr={dict(spec)!r}: {error}") from error
    record = {"around": around, "span": span, "points": points, "thresholds": thresholds}
    return values, record
