"""Moved to :mod:`attnrmt.driver` (CHANGELOG.md); this alias keeps old imports working."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("attnrmt.driver")
