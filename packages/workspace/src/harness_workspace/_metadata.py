"""Validation and detachment of snapshot metadata (arbitrary JSON chosen by an adapter)."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import MappingProxyType
from typing import Final, TypeVar

from harness_workspace._errors import WorkspaceOperationMalformedError
from harness_workspace._exact import is_array, is_object_or_proxy
from harness_workspace._types import JsonValue

__all__ = ["MAX_ARRAY_LENGTH", "MAX_METADATA_DEPTH", "MAX_SAFE_INTEGER", "normalize_metadata"]

MAX_SAFE_INTEGER: Final = 2**53 - 1
MAX_ARRAY_LENGTH: Final = 100_000
MAX_METADATA_DEPTH: Final = 64

_NON_OBJECT: Final = "snapshot returned a snapshot with non-object metadata"
_NON_JSON: Final = "snapshot returned a snapshot containing non-JSON metadata"
_CYCLIC: Final = "snapshot returned a snapshot containing cyclic metadata"
_NON_STRING_KEYS: Final = "snapshot returned a snapshot containing non-string metadata keys"


_Container = TypeVar("_Container")


def _fail(message: str) -> WorkspaceOperationMalformedError:
    return WorkspaceOperationMalformedError(message, "snapshot")


class _Normalizer:
    """One normalisation pass: the ancestor path for cycles and the memo for shared values.

    The memo maps a source container's identity to ``(source, copy, height)``, where height
    is how many container levels lie below it. Keeping ``source`` alive stops its ``id``
    from being reused by another object during the pass. A shared container reached again
    deeper must still fit: ``depth + height`` may not exceed the depth limit.
    """

    __slots__ = ("_memo", "_path")

    def __init__(self) -> None:
        self._path: set[int] = set()
        self._memo: dict[int, tuple[object, JsonValue, int]] = {}

    def copy(self, value: object, depth: int) -> tuple[JsonValue, int]:
        """Return ``(detached copy, container height)``; height is -1 for a primitive."""
        if value is None or type(value) is str or type(value) is bool:
            return value, -1
        if type(value) is int:
            if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                return value, -1
            raise _fail(_NON_JSON)
        if type(value) is float:
            if math.isfinite(value):
                return value, -1
            raise _fail(_NON_JSON)
        if depth > MAX_METADATA_DEPTH:
            raise _fail(_NON_JSON)
        if is_array(value):
            return self._copy_container(value, depth, self._copy_array)
        if is_object_or_proxy(value):
            return self._copy_container(value, depth, self._copy_object)
        raise _fail(_NON_JSON)

    def _copy_container(
        self, value: _Container, depth: int, copy_items: Callable[[_Container, int], tuple[JsonValue, int]]
    ) -> tuple[JsonValue, int]:
        identity = id(value)
        if identity in self._path:
            raise _fail(_CYCLIC)
        memoised = self._memo.get(identity)
        if memoised is not None:
            _, copied, height = memoised
            if depth + height > MAX_METADATA_DEPTH:
                raise _fail(_NON_JSON)
            return copied, height
        self._path.add(identity)
        try:
            copied, height = copy_items(value, depth)
        finally:
            self._path.discard(identity)
        self._memo[identity] = (value, copied, height)
        return copied, height

    def _copy_array(self, value: list[object] | tuple[object, ...], depth: int) -> tuple[JsonValue, int]:
        if len(value) > MAX_ARRAY_LENGTH:
            raise _fail(_NON_JSON)
        items: list[JsonValue] = []
        height = 0
        for item in tuple(value):
            copied, child_height = self.copy(item, depth + 1)
            items.append(copied)
            height = max(height, child_height + 1)
        return tuple(items), height

    def _copy_object(
        self, value: dict[object, object] | MappingProxyType[object, object], depth: int
    ) -> tuple[JsonValue, int]:
        # A proxy may wrap any mapping; read its items exactly once and work on that copy.
        entries = tuple(value.items())
        for key, _ in entries:
            if type(key) is not str:
                raise _fail(_NON_STRING_KEYS)
        fields: dict[str, JsonValue] = {}
        height = 0
        for key, item in entries:
            copied, child_height = self.copy(item, depth + 1)
            fields[key] = copied  # type: ignore[index]  # every key was checked to be an exact str
            height = max(height, child_height + 1)
        return MappingProxyType(fields), height


def normalize_metadata(metadata: object) -> MappingProxyType[str, JsonValue] | None:
    """Validate snapshot metadata and return a detached, read-only copy.

    Raises:
        WorkspaceOperationMalformedError: the metadata is not bounded, acyclic JSON.
    """
    if metadata is None:
        return None
    if not is_object_or_proxy(metadata):
        raise _fail(_NON_OBJECT)
    copied, _ = _Normalizer().copy(metadata, 0)
    return copied  # type: ignore[return-value]  # an object always copies to a proxy
