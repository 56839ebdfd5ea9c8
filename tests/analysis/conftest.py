"""Shared fixtures of the analysis tests."""

from __future__ import annotations

from typing import Any

import pytest

from attnrmt.analysis.pipeline import ci_settings, settings_with_defaults


@pytest.fixture(scope="session")
def ci() -> dict[str, Any]:
    """``level``, ``n_boot``, ``seed`` of every replicate CI at the schema's defaults."""
    return ci_settings(settings_with_defaults(None))
