"""Griffe extension for the API reference: attnrmt's lazy doors and Sphinx-style docstrings.

- A lazy door (PEP 562, e.g. ``src/attnrmt/model/__init__.py``) lists its public names in
  a module-level dict ``_EXPORTS = {name: "defining.module"}`` and imports them on first
  use, so static analysis sees no member of that name. Each of them is added to the door
  as an alias of ``defining.module.name``: the reference documents them under the door's
  own path (``attnrmt.model.simulate_cell``), as users import them.
- The docstrings cross-reference with Sphinx roles (``:func:`simulate_cell```), which
  Markdown would print as typed; they become code spans (``simulate_cell``).
- A class's attributes without a docstring of their own are described in the class
  docstring's "Attributes" section; they are not listed a second time.

Used by mkdocs.yml (``mkdocstrings`` handler ``python``, ``extensions``) and by
tests/test_docs.py. O(objects) per package.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

import griffe

__all__ = ["ApiReference", "lazy_exports", "plain_roles"]

#: ``:func:`name```, ``:class:`~pkg.Name``` ... (a Sphinx role and its target).
_ROLE = re.compile(r":(?:py:)?(?:func|data|class|mod|meth|attr|exc|obj|const):`~?([^`]+)`")


def plain_roles(text: str) -> str:
    """``text`` with every Sphinx cross-reference role replaced by a code span of its
    target (``:func:`a.b``` -> ```a.b```). O(len(text))."""
    return _ROLE.sub(lambda match: f"`{match.group(1)}`", text)


def lazy_exports(module: griffe.Module) -> dict[str, str]:
    """``{name: defining module}`` of a module's ``_EXPORTS`` dict literal ({} without one)."""
    member = module.members.get("_EXPORTS")
    if not isinstance(member, griffe.Attribute) or member.value is None:
        return {}
    exports = ast.literal_eval(str(member.value))
    if not isinstance(exports, dict):
        raise TypeError(f"{module.path}._EXPORTS is not a dict literal")
    return {str(name): str(target) for name, target in exports.items()}


def _objects(obj: griffe.Object) -> Iterator[griffe.Object]:
    """``obj`` and every object defined under it (aliases are not followed)."""
    yield obj
    for member in list(obj.members.values()):
        if isinstance(member, griffe.Object):
            yield from _objects(member)


class ApiReference(griffe.Extension):
    """Apply the three rules of the module docstring to every loaded package."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for obj in list(_objects(pkg)):
            if obj.docstring is not None:
                obj.docstring.value = plain_roles(obj.docstring.value)
            if isinstance(obj, griffe.Module):
                for name, target in lazy_exports(obj).items():
                    if name not in obj.members:
                        obj.set_member(name, griffe.Alias(name, f"{target}.{name}", parent=obj))
            if isinstance(obj, griffe.Class):
                for name, member in list(obj.members.items()):
                    if isinstance(member, griffe.Attribute) and member.docstring is None:
                        obj.del_member(name)
