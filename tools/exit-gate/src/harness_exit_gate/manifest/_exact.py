"""Exact built-in type tests for a decoded manifest, each narrowing for the type checker.

A manifest document is accepted only as exact built-in types (``type(v) is dict``), never
subclasses, so that no caller code runs while it is read.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Final, TypeGuard

from harness_kernel.policy import EFFECTS, Effect

__all__ = ["has_lone_surrogate", "is_effect", "is_exact_array", "is_mapping", "is_str"]

_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def is_str(value: object) -> TypeGuard[str]:
    """Whether ``value`` is an exact ``str``."""
    return type(value) is str


def is_mapping(value: object) -> TypeGuard[dict[object, object] | MappingProxyType[object, object]]:
    """Whether ``value`` is an exact ``dict`` or an exact read-only view."""
    return type(value) in (dict, MappingProxyType)


def is_exact_array(value: object) -> TypeGuard[list[object] | tuple[object, ...]]:
    """Whether ``value`` is an exact ``list`` or an exact ``tuple``."""
    return type(value) in (list, tuple)


def is_effect(value: object) -> TypeGuard[Effect]:
    """Whether ``value`` is exactly one of the strings ``allow``, ``ask`` or ``deny``."""
    # The type test comes first so that no foreign ``__eq__`` runs.
    return is_str(value) and value in EFFECTS


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate code point (not encodable as UTF-8)."""
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None
