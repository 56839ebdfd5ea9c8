"""The README's five-line example runs and prints what the README says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_five_line_example_prints_what_the_readme_claims() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## One point of the theory in five lines", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    claimed = re.search(r"prints `([-0-9. ]+)`", section)
    assert claimed, "the README no longer says what the example prints"
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, str(README), "exec"), {})
    printed = [float(value) for value in output.getvalue().split()]
    expected = [float(value) for value in claimed.group(1).split()]
    # the README rounds to 3 decimals; the seed is fixed, so only rounding separates them
    assert printed == pytest.approx(expected, abs=5e-4)
