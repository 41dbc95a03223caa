"""Strict conversion of model-supplied arguments into a tool's parameters.

Arguments come from a model and are hostile by assumption. They are first checked to be
bounded, acyclic JSON data (exact built-in types, limited depth, lengths and size), then
converted with ``msgspec.convert(..., strict=True)`` so that wrong types and unknown keys
are rejected rather than coerced or stripped. Integers follow the contract's JSON rule
(within ±(2**53-1)). Every failure is one typed error.
"""

from __future__ import annotations

import math
import re
from typing import Final, TypeGuard, TypeVar

import msgspec

from harness_tools._errors import InvalidToolArgumentsError
from harness_tools._model import Tool

__all__ = ["ArgumentLimits", "parse_tool_arguments"]

P = TypeVar("P")

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Integers beyond ±(2**53-1) are not exact for JSON peers that use doubles."""

_ERROR_PATH: Final = re.compile(r" - at `(\$[^`]*)`$")


class ArgumentLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds on model-supplied arguments, checked before conversion.

    Attributes:
        max_depth: Deepest container nesting: containers are allowed through this depth
            (the arguments object itself is depth 0).
        max_string_length: Longest string, in code points (keys included).
        max_items: Most items in one object or array.
        max_nodes: Most values in the whole argument tree.
    """

    max_depth: int = 32
    max_string_length: int = 1_048_576
    max_items: int = 10_000
    max_nodes: int = 100_000


DEFAULT_ARGUMENT_LIMITS: Final = ArgumentLimits()


def _is_container(value: object) -> TypeGuard[dict[object, object] | list[object]]:
    return type(value) is dict or type(value) is list


class _Walker:
    __slots__ = ("_limits", "_nodes", "_path")

    def __init__(self, limits: ArgumentLimits) -> None:
        self._limits = limits
        self._nodes = 0
        self._path: set[int] = set()

    def check(self, value: object, depth: int, where: str) -> None:
        self._nodes += 1
        if self._nodes > self._limits.max_nodes:
            raise InvalidToolArgumentsError(
                f"tool arguments hold more than {self._limits.max_nodes} values", where
            )
        if value is None or type(value) is bool:
            return
        if type(value) is str:
            self._check_string(value, where)
            return
        if type(value) is int:
            if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                raise InvalidToolArgumentsError("tool arguments hold an integer out of range", where)
            return
        if type(value) is float:
            if not math.isfinite(value):
                raise InvalidToolArgumentsError("tool arguments hold a non-finite number", where)
            return
        if not _is_container(value):
            raise InvalidToolArgumentsError(
                f"tool arguments hold a non-JSON value of type {type(value).__name__}", where
            )
        if depth > self._limits.max_depth:
            raise InvalidToolArgumentsError(
                f"tool arguments are nested deeper than {self._limits.max_depth} levels", where
            )
        if len(value) > self._limits.max_items:
            raise InvalidToolArgumentsError(
                f"tool arguments hold a container of more than {self._limits.max_items} items", where
            )
        identity = id(value)
        if identity in self._path:
            raise InvalidToolArgumentsError("tool arguments are cyclic", where)
        self._path.add(identity)
        try:
            if isinstance(value, list):
                for index, item in enumerate(tuple(value)):
                    self.check(item, depth + 1, f"{where}[{index}]")
            else:
                for key, item in tuple(value.items()):
                    if type(key) is not str:
                        raise InvalidToolArgumentsError("tool arguments hold a non-string key", where)
                    self._check_string(key, where)
                    self.check(item, depth + 1, f"{where}.{key}")
        finally:
            self._path.discard(identity)

    def _check_string(self, value: str, where: str) -> None:
        if len(value) > self._limits.max_string_length:
            raise InvalidToolArgumentsError(
                f"tool arguments hold a string longer than {self._limits.max_string_length} characters", where
            )


def parse_tool_arguments(
    tool: Tool[P], arguments: object, *, limits: ArgumentLimits = DEFAULT_ARGUMENT_LIMITS
) -> P:
    """Check model-supplied ``arguments`` and convert them into ``tool.parameters``.

    Args:
        tool: The tool being called.
        arguments: The decoded JSON arguments; they must form a JSON object.
        limits: Bounds checked before conversion.

    Raises:
        InvalidToolArgumentsError: the arguments are not a bounded JSON object or do not fit
            the parameters (wrong type, missing or unknown key, constraint); ``.path`` says
            where.
    """
    # Exact dict: a subclass could show the walker one thing and msgspec another.
    if not _is_container(arguments) or type(arguments) is not dict:
        raise InvalidToolArgumentsError("tool arguments must be a JSON object")
    _Walker(limits).check(arguments, 0, "$")
    try:
        return msgspec.convert(arguments, type=tool.parameters, strict=True)
    except msgspec.ValidationError as error:
        message = str(error)
        match = _ERROR_PATH.search(message)
        raise InvalidToolArgumentsError(
            f"invalid arguments for tool {tool.name}: {message}", match.group(1) if match else "$"
        ) from error
