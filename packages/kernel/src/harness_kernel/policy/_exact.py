"""Exact built-in type checks that also narrow for the type checker.

Policy inputs and decoded manifests are accepted only as exact built-in types
(``type(v) is dict``), never subclasses, so that no caller code runs while they are read.
Exact arrays use :func:`harness_kernel._json.is_exact_array`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TypeGuard

__all__ = ["is_mapping", "is_str"]


def is_str(value: object) -> TypeGuard[str]:
    """Whether ``value`` is an exact ``str``."""
    return type(value) is str


def is_mapping(value: object) -> TypeGuard[dict[object, object] | MappingProxyType[object, object]]:
    """Whether ``value`` is an exact ``dict`` or an exact read-only view (``MappingProxyType``)."""
    return type(value) is dict or type(value) is MappingProxyType
