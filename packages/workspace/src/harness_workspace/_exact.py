"""Exact built-in type checks that also narrow for the type checker.

The contract accepts only exact built-in containers (``type(v) is dict``), never
subclasses, so these are deliberately not ``isinstance`` checks.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from types import CoroutineType, MappingProxyType
from typing import TypeGuard

__all__ = ["is_array", "is_awaitable", "is_object", "is_object_or_proxy"]


def is_object(value: object) -> TypeGuard[dict[object, object]]:
    """Whether ``value`` is an exact ``dict`` (its keys are not checked here)."""
    return type(value) is dict


def is_array(value: object) -> TypeGuard[list[object] | tuple[object, ...]]:
    """Whether ``value`` is an exact ``list`` or an exact ``tuple``."""
    return type(value) is list or type(value) is tuple


def is_object_or_proxy(value: object) -> TypeGuard[dict[object, object] | MappingProxyType[object, object]]:
    """Whether ``value`` is an exact ``dict`` or an exact ``MappingProxyType``."""
    return type(value) is dict or type(value) is MappingProxyType


def is_awaitable(value: object) -> TypeGuard[Awaitable[object]]:
    """Whether ``value`` can be awaited; a coroutine, the common case, is tested first."""
    return type(value) is CoroutineType or inspect.isawaitable(value)
