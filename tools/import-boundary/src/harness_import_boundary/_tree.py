"""The walk's view of a libcst tree: the child nodes that can hold a name, in source order.

Tokens and whitespace never hold a name, so neither the collector's walk nor the search for
strings that become code (``_annotations``) descends into them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

import libcst as cst

__all__ = ["walked_children"]

_TRIVIA: Final = frozenset(
    cls
    for cls in vars(cst).values()
    if isinstance(cls, type)
    and issubclass(cls, cst.CSTNode)
    and (
        cls.__module__ in ("libcst._nodes.op", "libcst._nodes.whitespace")
        or cls.__name__.startswith(("Left", "Right"))
    )
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(kind: type) -> tuple[str, ...]:
    names = _CHILD_FIELDS.get(kind)
    if names is None:
        names = tuple(
            item.name
            for item in dataclasses.fields(kind)
            if not item.name.startswith(("whitespace", "lpar", "rpar", "leading_lines", "lines_after"))
            and item.name not in ("header", "footer", "trailing_whitespace", "semicolon", "comma", "newline")
        )
        _CHILD_FIELDS[kind] = names
    return names


# Whether a value of a given type is a node the walk descends into. CSTNode is an abstract
# base class, whose isinstance check is the walk's costliest step: it is asked once a type.
_WALKED: dict[type, bool] = {}


def _learn(value: object) -> bool:
    walked = _WALKED[type(value)] = isinstance(value, cst.CSTNode) and type(value) not in _TRIVIA
    return walked


def walked_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The children of ``node`` that can hold a name (no tokens, no whitespace), in source order."""
    children: list[cst.CSTNode] = []
    walked = _WALKED
    kind = type(node)
    for name in _CHILD_FIELDS.get(kind) or _child_fields(kind):
        value: object = getattr(node, name)
        value_kind: type = type(value)
        if value_kind is list or value_kind is tuple:
            items: Sequence[object] = value  # pyright: ignore[reportAssignmentType] - checked above
            for item in items:
                if walked.get(type(item)) or (type(item) not in walked and _learn(item)):
                    children.append(item)  # pyright: ignore[reportArgumentType] - a node, by _WALKED
        elif walked.get(value_kind) or (value_kind not in walked and _learn(value)):
            children.append(value)  # pyright: ignore[reportArgumentType] - a node, by _WALKED
    return children
