"""The config schema (``workflow/schemas/config.schema.yaml``) and the one accessor of its
defaults (:func:`schema_default`, :func:`with_defaults`); parsed once per process."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

import yaml

from attnrmt.workflow import SCHEMA_PATH


@functools.cache
def load_schema() -> dict[str, Any]:
    """The config schema, parsed once (libyaml's safe loader when PyYAML has it;
    docs/scaling.md, "Pipeline overhead"); treat the returned dict as read-only."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with SCHEMA_PATH.open(encoding="utf-8") as handle:
        return yaml.load(handle, Loader=loader)  # a safe loader: plain data only


def schema_node(*path: str) -> Mapping[str, Any]:
    """The schema of the config key at ``path`` (``("execution",)``, ``("dask", "mode")``;
    ``("sweep", key)`` for a key of any sweep). Raises KeyError for a key the schema lacks."""
    schema = load_schema()
    node: Mapping[str, Any] = schema["$defs"]["sweep"] if path[:1] == ("sweep",) else schema
    for key in path[1:] if path[:1] == ("sweep",) else path:
        node = node["properties"][key]
    return node


def _default_of(node: Mapping[str, Any]) -> Any:
    """A schema node's default; an object's defaults filled in from its properties' (a
    property without a default gives None)."""
    if "properties" in node:
        nested = {key: _default_of(child) for key, child in node["properties"].items()}
        return {**copy.deepcopy(dict(node.get("default") or {})), **nested}
    return copy.deepcopy(node.get("default"))


def schema_default(*path: str) -> Any:
    """The schema's default of the config key at ``path`` (see :func:`schema_node`); for an
    object, its properties' defaults filled in recursively (a fresh copy)."""
    return _default_of(schema_node(*path))


def with_defaults(values: Mapping[str, Any] | None, *path: str) -> dict[str, Any]:
    """The config block ``values`` at ``path`` with the schema's defaults of its missing keys
    (for library calls given a partial block)."""
    defaults = {
        key: _default_of(child)
        for key, child in schema_node(*path)["properties"].items()
        if "default" in child
    }
    return {**defaults, **dict(values or {})}
