"""The Snakemake config adapter: validate Snakemake's ``config`` once, restoring the schema's
scalar types of values from its command line (they arrive as strings). O(size)."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from attnrmt.sweep.spec.config import ValidConfig, read_config_source, validate_config
from attnrmt.sweep.spec.schema import load_schema


def _resolve(schema: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow a local ``$ref`` (``#/$defs/name``); anything else is returned as is."""
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            break
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        schema = target
    return schema if isinstance(schema, Mapping) else {}


def _alternatives(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[Mapping]:
    """The schema and its ``anyOf``/``oneOf``/``allOf``/``then``/``else`` branches."""
    found = [schema]
    for keyword in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(keyword, []) or []:
            found.extend(_alternatives(_resolve(branch, root), root))
    for keyword in ("then", "else"):  # if/then/else: either branch may describe the value
        if isinstance(schema.get(keyword), Mapping):
            found.extend(_alternatives(_resolve(schema[keyword], root), root))
    return found


def allowed_types(schema: Mapping[str, Any], root: Mapping[str, Any]) -> set[str]:
    """JSON types a (sub)schema accepts, from ``type`` of itself and its alternatives."""
    types: set[str] = set()
    for alternative in _alternatives(schema, root):
        declared = alternative.get("type")
        if isinstance(declared, str):
            types.add(declared)
        elif isinstance(declared, list):
            types.update(str(item) for item in declared)
    return types


#: JSON type of each Python type YAML produces (anything else: a string).
_JSON_TYPES = {type(None): "null", bool: "boolean", int: "integer", float: "number"}
_JSON_TYPES |= {list: "array", dict: "object"}


def coerce_scalar(text: str, types: set[str]) -> Any:
    """``text`` read as YAML would read it when the schema accepts that type (``"4"`` -> ``4``,
    ``"false"`` -> ``False``, ``"null"`` -> ``None``), else unchanged."""
    if not types:
        return text
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    kind = _JSON_TYPES.get(type(parsed), "string")
    if kind in types or (kind == "integer" and "number" in types):
        return parsed
    return text


def _child_schema(
    schema: Mapping[str, Any], key: str, root: Mapping[str, Any]
) -> Mapping[str, Any]:
    for alternative in _alternatives(schema, root):
        properties = alternative.get("properties") or {}
        if key in properties:
            return _resolve(properties[key], root)
    for alternative in _alternatives(schema, root):
        extra = alternative.get("additionalProperties")
        if isinstance(extra, Mapping):
            return _resolve(extra, root)
    return {}


def _item_schema(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    for alternative in _alternatives(schema, root):
        items = alternative.get("items")
        if isinstance(items, Mapping):
            return _resolve(items, root)
    return {}


def restore_scalar_types(value: Any, schema: Mapping[str, Any], root: Mapping | None = None) -> Any:
    """``value`` with its strings converted to the scalar types ``schema`` (a subtree of
    ``root``, for ``$ref``) expects; mappings and lists are updated in place (Snakemake's
    ``config`` stays the same object). O(size of ``value``)."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if isinstance(value, MutableMapping):
        for key in list(value):
            child = _child_schema(schema, str(key), root)
            value[key] = restore_scalar_types(value[key], child, root)
        return value
    if isinstance(value, list):
        item = _item_schema(schema, root)
        value[:] = [restore_scalar_types(element, item, root) for element in value]
        return value
    if isinstance(value, str):
        return coerce_scalar(value, allowed_types(schema, root))
    return value


def command_line_values(merged: Any, from_files: Any) -> Any:
    """The leaves of Snakemake's ``config`` that differ from the config files' (they came from
    ``--config`` or a profile), as a nested dict; None when there is none. O(size)."""
    if isinstance(merged, Mapping):
        files = from_files if isinstance(from_files, Mapping) else {}
        found = {}
        for key, value in merged.items():
            part = command_line_values(value, files.get(key, _ABSENT))
            if part is not None:
                found[key] = part
        return found or None
    return None if merged == from_files else merged


_ABSENT = object()


def snakemake_config(config: dict[str, Any], config_files: Sequence[str | Path]) -> ValidConfig:
    """Validate Snakemake's ``config`` once and replace its contents by the filled config:
    command-line values get the schema's type back, a quoted number in a file stays refused;
    the run defaults to the last config file's stem. O(size)."""
    from snakemake.utils import update_config

    from_files: dict[str, Any] = {}
    for path in config_files:
        update_config(from_files, read_config_source(path))
    typed = command_line_values(config, from_files)
    if typed:
        update_config(config, restore_scalar_types(typed, load_schema()))
    source = Path(config_files[-1]) if config_files else None
    valid = validate_config(config, source)
    config.clear()
    config.update(valid.config)
    return valid
