"""The config schema file (attnrmt.sweep.spec.schema)."""

from __future__ import annotations

import yaml

from attnrmt.sweep.spec.schema import SCHEMA_PATH, load_schema


def test_the_schema_parses_the_same_with_either_yaml_loader() -> None:

    assert load_schema() == yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
