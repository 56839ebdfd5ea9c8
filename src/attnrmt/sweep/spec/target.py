"""Precision targets of a sweep and the design of its next round (docs/architecture.md,
"Rounds: sweeps that stop at a precision target").

A sweep's ``target: {threshold_halfwidth, relative, budget_cpu_hours, transitions}`` asks
for every threshold of the named transitions to a CI half-width (absolute, or a fraction
of the estimate when ``relative``; each one value or a mapping per transition): the
``d -> inf`` limit when the sweep has several ``d``, each ``d``'s threshold otherwise. A
threshold's *distance* is its half-width over the goal (``<= 1``: met; a bound or a failed
fit: infinite). :func:`next_design` turns the last round's thresholds into the next
round's ``(replicates per d, snr)``:

* a CI that is a bound gets an snr point past the end of the axis it leaves (one spacing
  below the lowest point, never below 0, or above the highest); a crossing fitted on fewer
  than :data:`MIN_DETECTED` points gets the midpoints of the two gaps above its estimate;
  one whose lowest detected point lies more than half a spacing above it gets the point
  halfway (the crossing is extrapolated: a nearer point shrinks the line's leverage,
  docs/thresholds.md);
* the replicates grow so that the widest finite CI meets its goal under the ``1/sqrt(R)``
  law (``R (distance)^2``), at most ``max_growth`` times per round: by one factor at every
  ``d``, or spread over the ``d`` by :func:`replicates_per_d` when the caller gives that
  allocation (a ``d -> inf`` limit);
* the round's price (``price(replicates, snr)``: CPU seconds of the whole design, the cost
  model's) must fit the budget left, else the replicates shrink to what it affords.

:func:`replicates_per_d` spreads a ``d -> inf`` limit's replicates over its ``d`` (each
``d``'s share of the limit's variance against the price of one of its replicates).

Pure and O(points + thresholds); no file, no cluster.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Fewest detected snr points a crossing's line may rest on before points are added.
MIN_DETECTED = 3
#: Replicates are sized for ``SAFETY`` times the variance the ``1/sqrt(R)`` law predicts
#: (1: aim at the goal; an undershoot costs one more small round, an overshoot cells).
SAFETY = 1.0


@dataclass(frozen=True)
class Target:
    """A sweep's precision target (schema ``sweep.target``; defaults written there):
    ``halfwidth`` and ``relative`` per transition."""

    halfwidth: Mapping[str, float]
    relative: Mapping[str, bool]
    budget_cpu_hours: float
    transitions: tuple[str, ...]
    max_growth: float

    def goal(self, row: Mapping[str, Any]) -> float:
        """The half-width ``row`` (of ``row["transition"]``) must reach. O(1)."""
        t = row["transition"]
        return self.halfwidth[t] * (abs(float(row["estimate"])) if self.relative[t] else 1.0)


def _per_transition(value: Any, transitions: Sequence[str]) -> dict[str, Any]:
    return {t: value[t] if isinstance(value, Mapping) else value for t in transitions}


def parse_target(prefix: str, raw: Mapping[str, Any]) -> Target:
    """The checked :class:`Target` of a schema-valid ``raw`` (its defaults filled); a
    ``ConfigError`` names ``prefix.key=value`` the schema cannot judge. O(1)."""
    from attnrmt.sweep.spec.config import ConfigError

    transitions = tuple(raw["transitions"])
    for key in ("threshold_halfwidth", "relative"):
        value = raw[key]
        if isinstance(value, Mapping) and set(value) != set(transitions):
            raise ConfigError(
                f"{prefix}.{key}={dict(value)!r}: must give every transition of "
                f"{prefix}.transitions={list(transitions)!r}, no other"
            )
    halfwidth = _per_transition(raw["threshold_halfwidth"], transitions)
    relative = _per_transition(raw["relative"], transitions)
    for t in transitions:
        if relative[t] and halfwidth[t] >= 1:
            raise ConfigError(
                f"{prefix}.threshold_halfwidth={raw['threshold_halfwidth']!r}: a relative "
                f"half-width ({t}) is a fraction of the threshold (e.g. 0.05 for +-5%), below 1"
            )
    budget, growth = float(raw["budget_cpu_hours"]), float(raw["max_growth"])
    return Target(halfwidth, relative, budget, transitions, growth)


def distance(target: Target, row: Mapping[str, Any]) -> float:
    """Half-width of ``row`` (``transition``, ``estimate``, ``ci_low``, ``ci_high``,
    ``bound``) over its goal: ``<= 1`` met, ``inf`` for a bound or a failed fit. O(1)."""
    low, high, estimate = (float(row[k]) for k in ("ci_low", "ci_high", "estimate"))
    if row.get("bound", "none") != "none" or not math.isfinite(high - low + estimate):
        return math.inf
    goal = target.goal(row)
    return (high - low) / 2 / goal if goal > 0 else math.inf


def _new_points(snr: list[float], rows: Sequence[Mapping[str, Any]]) -> set[float]:
    """snr points the unmet ``rows`` ask for (module docstring). O(points x rows)."""
    step = float(sorted(b - a for a, b in itertools.pairwise(snr))[len(snr) // 2 - 1])
    added: set[float] = set()
    nan = math.nan
    for row in rows:
        if row.get("bound") == "below" and snr[0] > 0:
            added.add(max(0.0, snr[0] - step))
        elif row.get("bound") == "above":
            added.add(snr[-1] + step)
        elif row.get("bound", "none") == "none" and math.isfinite(row.get("n_detected", nan)):
            estimate, detected = float(row["estimate"]), int(row["n_detected"])
            above = [i for i in range(len(snr) - 1) if snr[i + 1] > estimate]
            if detected < MIN_DETECTED:
                added.update((snr[i] + snr[i + 1]) / 2 for i in above[:2])
            elif snr[-detected] - estimate > step / 2:  # the line's lever: a point nearer
                added.add((estimate + snr[-detected]) / 2)
    return {round(x, 6) for x in added} - set(snr)


def next_design(
    target: Target,
    replicates: Sequence[int],
    snr: Sequence[float],
    rows: Sequence[Mapping[str, Any]],
    price: Callable[[list[int], Sequence[float]], float],
    spent_seconds: float,
    per_d: Sequence[int] | None = None,
) -> tuple[list[int], list[float]] | None:
    """The next round's ``(replicates per d, snr)`` of a sweep with ``replicates`` per d
    whose last round gave the threshold ``rows`` of its target (module docstring; ``per_d``:
    the :func:`replicates_per_d` allocation, else one factor), or ``None`` when every row
    is met or the budget affords nothing more. O(d (points + rows + log replicates))."""
    points, now = sorted(float(x) for x in snr), list(replicates)
    unmet = [row for row in rows if distance(target, row) > 1]
    if not unmet:
        return None
    grown = points if len(points) < 2 else sorted({*points, *_new_points(points, unmet)})
    finite = [distance(target, row) for row in unmet if math.isfinite(distance(target, row))]
    wanted = now
    if finite or grown == points:  # a round must add something
        growth = min(max(finite, default=2.0) ** 2 * SAFETY, target.max_growth)
        wanted = [max(r + 1, math.ceil(r * growth)) for r in now]
        wanted = list(per_d) if per_d is not None and finite and per_d != now else wanted
    left = target.budget_cpu_hours * 3600 - spent_seconds
    base = price(now, points)
    while wanted != now and price(wanted, grown) - base > left:
        wanted = [r + (w - r) // 2 for r, w in zip(now, wanted, strict=True)]
    if price(wanted, grown) - base > left or (wanted, grown) == (now, points):
        return None
    return wanted, grown


def replicates_per_d(
    replicates: Sequence[int],
    share: Sequence[float],
    cost: Sequence[float],
    distance: float,
    max_growth: float,
) -> list[int]:
    """Replicates per ``d`` that bring a ``d -> inf`` limit from ``distance`` times its goal
    to the goal at the least price. The limit's variance is ``sum_d share_d R_d / R'_d``
    (``share_d``: ``d``'s part of it now, ``w_d^2 var_d`` with ``w_d`` the limit's weight
    on ``d``'s threshold; ``1/sqrt(R)`` law) and the price ``sum_d cost_d R'_d`` (``cost_d``:
    one replicate at ``d``); Lagrange gives ``R'_d = sqrt(share_d R_d / cost_d) K`` with
    ``K`` fixing the variance at ``SAFETY sum share / distance^2``, re-solved for the ``d``
    left when a ``d`` would fall below ``R_d`` (cells are never dropped). Then each is cut
    to ``max_growth R_d``: a round's step towards that design, never past it at any ``d``.
    docs/architecture.md, "Rounds". O(d^2)."""
    a = [s * r for s, r in zip(share, replicates, strict=True)]
    kept: set[int] = set()  # the d held at R_d
    for _ in range(len(a)):
        free = [i for i in range(len(a)) if i not in kept]
        left = sum(share) / distance**2 / SAFETY - sum(share[i] for i in kept)
        k = sum(math.sqrt(a[i] * cost[i]) for i in free) / left if left > 0 else math.inf
        want = [math.sqrt(a[i] / cost[i]) * k if i in free else 0.0 for i in range(len(a))]
        low = {i for i in free if want[i] < replicates[i]}
        kept |= low
        if not low:
            break
    return [
        min(max(r, math.ceil(x - 1e-9)), math.floor(r * max_growth))
        for x, r in zip(want, replicates, strict=True)
    ]
