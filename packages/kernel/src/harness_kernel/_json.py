"""The kernel's JSON data: strict validation, deep-frozen copies and the shared msgspec codec.

"JSON data" (spec §1) is accepted only as exact ``dict`` (exact ``str`` keys), ``list``,
``tuple``, ``str``, ``int``, ``float``, ``bool``, ``None`` and the kernel's own frozen
types. Everything is checked with ``type(x) is …``: subclasses, other mappings and arbitrary
objects are rejected without reading their attributes or calling any of their methods, so a
hostile value cannot run code here. Walks are iterative, so deep input cannot exhaust the
interpreter stack.

Internal API, reused by the kernel's events, state, models and store:

- :class:`FrozenDict`, :class:`FrozenList` and the :data:`JsonValue` alias;
- :func:`freeze_json` validates JSON data and returns a deep-frozen copy;
- :func:`check_json_document` checks only that a value could have come out of a JSON parser
  (it copies nothing and allows integers of any size);
- :class:`JsonDataError` is what both raise; callers turn it into their own typed error;
- :func:`thaw_json` turns frozen JSON back into plain ``dict``/``list`` values;
- :func:`encode_json` and :func:`decode_json` share one msgspec encoder and decoder; the
  encoder understands the frozen types.
"""

from __future__ import annotations

import math
import re
from collections.abc import ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from typing import Final, NoReturn, TypeAlias, TypeGuard, final, overload

import msgspec

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_NODES",
    "MAX_FROZEN_DEPTH",
    "MAX_SAFE_INTEGER",
    "FrozenDict",
    "FrozenList",
    "JsonDataError",
    "JsonValue",
    "check_json_document",
    "decode_json",
    "encode_json",
    "freeze_json",
    "has_lone_surrogate",
    "is_exact_array",
    "is_exact_dict",
    "is_frozen_json",
    "is_json_object",
    "json_type_name",
    "thaw_json",
]

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Integers beyond ±(2**53-1) are not exact for JSON peers that use doubles."""

DEFAULT_MAX_DEPTH: Final = 64
"""Deepest container nesting that :func:`freeze_json` allows by default (root container = 0)."""

DEFAULT_MAX_NODES: Final = 100_000
"""Most values (containers and scalars, not keys) :func:`freeze_json` allows by default."""

MAX_FROZEN_DEPTH: Final = 128
"""Hard cap on ``max_depth``: equality, hashing and :func:`thaw_json` recurse through frozen
values, so their nesting must stay far below the interpreter's recursion limit."""

_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_MAX_KEY_IN_LOCATION: Final = 40


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is read-only")


@final
class FrozenDict(Mapping[str, "JsonValue"]):
    """A read-only JSON object owned by the kernel.

    It keeps insertion order (so encoding is byte-stable), compares ``==`` to a plain
    ``dict`` or another ``FrozenDict`` with equal content, is hashable, and raises
    ``TypeError`` on every attempt to change it.

    Args:
        data: A ``dict`` of JSON data (or a ``FrozenDict``); it is validated with the default
            limits of :func:`freeze_json` and copied.

    Raises:
        JsonDataError: ``data`` is not a JSON object within the default limits.
    """

    __slots__ = ("_data", "_hash", "_height", "_size")

    _data: dict[str, JsonValue]
    _height: int
    _size: int
    _hash: int | None

    def __init__(self, data: object = None) -> None:
        frozen = freeze_json({} if data is None else data)
        if type(frozen) is not FrozenDict:
            raise JsonDataError("$", f"expected a JSON object, not {json_type_name(data)}")
        _init_frozen(self, "_data", frozen._data, frozen._height, frozen._size)

    def __getitem__(self, key: str) -> JsonValue:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return type(key) is str and key in self._data

    def keys(self) -> KeysView[str]:
        """The keys, in insertion order (a read-only view)."""
        return self._data.keys()

    def values(self) -> ValuesView[JsonValue]:
        """The values, in insertion order (a read-only view)."""
        return self._data.values()

    def items(self) -> ItemsView[str, JsonValue]:
        """The ``(key, value)`` pairs, in insertion order (a read-only view)."""
        return self._data.items()

    def __eq__(self, other: object) -> bool:
        if type(other) is FrozenDict:
            return self._data == other._data
        if type(other) is dict:
            return self._data == other
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(frozenset(self._data.items())))
        assert self._hash is not None
        return self._hash

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: object) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[object, ...]:
        return (FrozenDict, (thaw_json(self),))

    __setattr__ = _read_only
    __delattr__ = _read_only
    __setitem__ = _read_only
    __delitem__ = _read_only
    __ior__ = _read_only
    clear = _read_only
    pop = _read_only
    popitem = _read_only
    setdefault = _read_only
    update = _read_only


@final
class FrozenList(Sequence["JsonValue"]):
    """A read-only JSON array owned by the kernel.

    It compares ``==`` to a plain ``list`` or another ``FrozenList`` with equal content (not
    to a ``tuple``, as ``list`` does not), is hashable, and raises ``TypeError`` on every
    attempt to change it. Slices are ``FrozenList`` too.

    Args:
        data: A ``list`` or ``tuple`` of JSON data (or a ``FrozenList``); it is validated with
            the default limits of :func:`freeze_json` and copied.

    Raises:
        JsonDataError: ``data`` is not a JSON array within the default limits.
    """

    __slots__ = ("_hash", "_height", "_items", "_size")

    _items: tuple[JsonValue, ...]
    _height: int
    _size: int
    _hash: int | None

    def __init__(self, data: object = ()) -> None:
        frozen = freeze_json(data)
        if type(frozen) is not FrozenList:
            raise JsonDataError("$", f"expected a JSON array, not {json_type_name(data)}")
        _init_frozen(self, "_items", frozen._items, frozen._height, frozen._size)

    @overload
    def __getitem__(self, index: int) -> JsonValue: ...
    @overload
    def __getitem__(self, index: slice) -> FrozenList: ...
    def __getitem__(self, index: int | slice) -> JsonValue | FrozenList:
        if isinstance(index, slice):
            return _make_list(self._items[index])
        return self._items[index]

    def __iter__(self) -> Iterator[JsonValue]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if type(other) is FrozenList:
            return self._items == other._items
        if is_exact_array(other) and type(other) is list:
            return len(self._items) == len(other) and self._items == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(self._items))
        assert self._hash is not None
        return self._hash

    def __repr__(self) -> str:
        return f"FrozenList({list(self._items)!r})"

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: object) -> FrozenList:
        return self

    def __reduce__(self) -> tuple[object, ...]:
        return (FrozenList, (thaw_json(self),))

    __setattr__ = _read_only
    __delattr__ = _read_only
    __setitem__ = _read_only
    __delitem__ = _read_only
    __iadd__ = _read_only
    __imul__ = _read_only
    append = _read_only
    clear = _read_only
    extend = _read_only
    insert = _read_only
    pop = _read_only
    remove = _read_only
    reverse = _read_only
    sort = _read_only


JsonValue: TypeAlias = bool | int | float | str | FrozenList | FrozenDict | None
"""A deep-frozen JSON value as the kernel stores it."""


def _init_frozen(target: FrozenDict | FrozenList, slot: str, content: object, height: int, size: int) -> None:
    object.__setattr__(target, slot, content)
    object.__setattr__(target, "_height", height)
    object.__setattr__(target, "_size", size)
    object.__setattr__(target, "_hash", None)


def _measure(children: Iterator[JsonValue] | tuple[JsonValue, ...]) -> tuple[int, int]:
    """Height (container levels below, 0 for none) and size (values, self included)."""
    height = 0
    size = 1
    for child in children:
        if type(child) is FrozenDict or type(child) is FrozenList:
            height = max(height, child._height + 1)  # pyright: ignore[reportPrivateUsage]
            size += child._size  # pyright: ignore[reportPrivateUsage]
        else:
            size += 1
    return height, size


def _make_dict(data: dict[str, JsonValue], height: int, size: int) -> FrozenDict:
    frozen = FrozenDict.__new__(FrozenDict)
    _init_frozen(frozen, "_data", data, height, size)
    return frozen


def _make_list(items: tuple[JsonValue, ...], measure: tuple[int, int] | None = None) -> FrozenList:
    height, size = _measure(items) if measure is None else measure
    frozen = FrozenList.__new__(FrozenList)
    _init_frozen(frozen, "_items", items, height, size)
    return frozen


class JsonDataError(ValueError):
    """A value is not JSON data within the limits asked for.

    Attributes:
        location: Where, as ``$`` then ``.key`` and ``[index]`` steps.
        reason: What is wrong, without the location.
    """

    location: str
    reason: str

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"{reason} at {location}")
        self.location = location
        self.reason = reason


def is_exact_dict(value: object) -> TypeGuard[dict[object, object]]:
    """Whether ``value`` is an exact ``dict`` (its keys are not checked here)."""
    return type(value) is dict


def is_json_object(value: object) -> TypeGuard[dict[str, object]]:
    """Whether ``value`` is an exact ``dict``; for values past a JSON check, so keys are ``str``."""
    return type(value) is dict


def is_exact_array(value: object) -> TypeGuard[list[object] | tuple[object, ...]]:
    """Whether ``value`` is an exact ``list`` or an exact ``tuple``."""
    return type(value) is list or type(value) is tuple


def is_frozen_json(value: object) -> TypeGuard[FrozenDict | FrozenList]:
    """Whether ``value`` is exactly one of the kernel's frozen JSON containers."""
    return type(value) is FrozenDict or type(value) is FrozenList


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate code point (not encodable as UTF-8)."""
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def json_type_name(value: object) -> str:
    """A short name of ``value``'s JSON type for messages (Python type name otherwise)."""
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "boolean"
    if kind is int:
        return "integer"
    if kind is float:
        return "number"
    if kind is str:
        return "string"
    if kind is list or kind is tuple or kind is FrozenList:
        return "array"
    if kind is dict or kind is FrozenDict:
        return "object"
    return kind.__name__


class _Frame:
    """One container being walked: its entries, where the walk is, and the copy so far."""

    __slots__ = ("depth", "entries", "identity", "index", "is_object", "keys", "values")

    def __init__(self, value: dict[object, object] | list[object] | tuple[object, ...], depth: int) -> None:
        self.identity = id(value)
        self.depth = depth
        self.index = 0
        self.is_object = type(value) is dict
        self.keys: tuple[object, ...] = ()
        if isinstance(value, dict):
            # Exact dict (checked by the caller): iterating it runs no foreign code.
            self.keys = tuple(value)
            self.entries: tuple[object, ...] = tuple(value.values())
        else:
            self.entries = tuple(value)
        self.values: list[JsonValue] = []


class _Walker:
    """The one iterative walk behind :func:`freeze_json` and :func:`check_json_document`."""

    __slots__ = ("_active", "_allow_shared", "_build", "_max_depth", "_max_nodes", "_nodes", "_safe", "_seen")

    def __init__(
        self, *, max_depth: int, max_nodes: int | None, allow_shared: bool, safe_integers: bool, build: bool
    ) -> None:
        if not 0 <= max_depth <= MAX_FROZEN_DEPTH:
            raise ValueError(f"max_depth must be between 0 and {MAX_FROZEN_DEPTH}")
        self._max_depth = max_depth
        self._max_nodes = max_nodes
        self._allow_shared = allow_shared
        self._safe = safe_integers
        self._build = build
        self._nodes = 0
        self._active: set[int] = set()
        self._seen: set[int] = set()

    def run(self, value: object) -> JsonValue:
        stack: list[_Frame] = []
        result = self._visit(value, 0, stack)
        while stack:
            frame = stack[-1]
            if frame.index < len(frame.entries):
                position = frame.index
                frame.index += 1
                if frame.is_object:
                    key = frame.keys[position]
                    if type(key) is not str:
                        raise JsonDataError(_location(stack), f"object key of type {type(key).__name__}")
                    if has_lone_surrogate(key):
                        raise JsonDataError(_location(stack), "object key with a lone surrogate")
                child = self._visit(frame.entries[position], frame.depth + 1, stack)
                if stack[-1] is frame:
                    frame.values.append(child)
                continue
            stack.pop()
            self._active.discard(frame.identity)
            built = self._finish(frame)
            if stack:
                stack[-1].values.append(built)
            else:
                result = built
        return result

    def _count(self, count: int, stack: list[_Frame]) -> None:
        self._nodes += count
        if self._max_nodes is not None and self._nodes > self._max_nodes:
            raise JsonDataError(_location(stack), f"more than {self._max_nodes} values")

    def _visit(self, value: object, depth: int, stack: list[_Frame]) -> JsonValue:
        """Check ``value``; scalars and frozen values are returned, containers pushed."""
        kind = type(value)
        if kind is str:
            assert isinstance(value, str)
            self._count(1, stack)
            if has_lone_surrogate(value):
                raise JsonDataError(_location(stack), "string with a lone surrogate")
            return value
        if value is None or kind is bool:
            self._count(1, stack)
            return value  # pyright: ignore[reportReturnType]
        if kind is int:
            assert isinstance(value, int)
            self._count(1, stack)
            if self._safe and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                raise JsonDataError(_location(stack), "integer outside ±(2**53-1)")
            return value
        if kind is float:
            assert isinstance(value, float)
            self._count(1, stack)
            if not math.isfinite(value):
                raise JsonDataError(_location(stack), "non-finite number")
            return value
        if kind is FrozenDict or kind is FrozenList:
            assert isinstance(value, FrozenDict | FrozenList)
            # Built only from validated content, so only the limits remain to check.
            if depth + value._height > self._max_depth:  # pyright: ignore[reportPrivateUsage]
                raise JsonDataError(_location(stack), f"nesting deeper than {self._max_depth} levels")
            self._note_shared(id(value), stack)
            self._count(value._size, stack)  # pyright: ignore[reportPrivateUsage]
            return value
        if is_exact_dict(value) or is_exact_array(value):
            self._count(1, stack)
            if depth > self._max_depth:
                raise JsonDataError(_location(stack), f"nesting deeper than {self._max_depth} levels")
            identity = id(value)
            if identity in self._active:
                raise JsonDataError(_location(stack), "a cycle")
            self._note_shared(identity, stack)
            self._active.add(identity)
            stack.append(_Frame(value, depth))
            return None
        raise JsonDataError(_location(stack), f"a non-JSON value of type {kind.__name__}")

    def _note_shared(self, identity: int, stack: list[_Frame]) -> None:
        if self._allow_shared:
            return
        if identity in self._seen:
            raise JsonDataError(_location(stack), "a container that appears twice")
        self._seen.add(identity)

    def _finish(self, frame: _Frame) -> JsonValue:
        if not self._build:
            return None
        if frame.is_object:
            data = dict(zip(frame.keys, frame.values, strict=True))
            height, size = _measure(iter(frame.values))
            return _make_dict(data, height, size)  # pyright: ignore[reportArgumentType]
        return _make_list(tuple(frame.values))


class _Unsure(Exception):
    """The fast walk met something it leaves to the exact walk (an error, a limit, a cycle)."""


class _FastWalk:
    """The recursive walk of :func:`freeze_json` for the common case: valid, small JSON data.

    It answers only "certainly valid" (the result) or :class:`_Unsure`; every doubt (any
    error, a limit reached, a container met twice) is handed to :class:`_Walker`, which
    finds and reports it exactly as before. Recursion is safe here: a container deeper than
    ``max_depth`` (at most :data:`MAX_FROZEN_DEPTH`) is itself a doubt, so the walk never
    nests further, and a cycle ends as a doubt at that depth. Only exact built-in types are
    touched, so no foreign code runs.
    """

    __slots__ = ("_max_depth", "_max_nodes", "_nodes", "_seen")

    def __init__(self, *, max_depth: int, max_nodes: int | None, allow_shared: bool) -> None:
        self._max_depth = max_depth
        self._max_nodes = -1 if max_nodes is None else max_nodes
        self._nodes = 0
        self._seen: set[int] | None = None if allow_shared else set()

    def _count(self, count: int) -> None:
        self._nodes += count
        if self._max_nodes >= 0 and self._nodes > self._max_nodes:
            raise _Unsure

    def _note_shared(self, value: object) -> None:
        if self._seen is not None:
            identity = id(value)
            if identity in self._seen:
                raise _Unsure
            self._seen.add(identity)

    def _container(self, value: object, depth: int) -> None:
        if depth > self._max_depth:
            raise _Unsure
        self._note_shared(value)
        self._count(1)

    def visit(self, value: object, depth: int) -> JsonValue:
        kind = type(value)
        if kind is str:
            assert isinstance(value, str)
            if not value.isascii() and _LONE_SURROGATE.search(value) is not None:
                raise _Unsure
            self._count(1)
            return value
        if kind is int:
            assert isinstance(value, int)
            if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                raise _Unsure
            self._count(1)
            return value
        if value is None or kind is bool:
            self._count(1)
            return value  # pyright: ignore[reportReturnType]
        if kind is float:
            assert isinstance(value, float)
            if not math.isfinite(value):
                raise _Unsure
            self._count(1)
            return value
        if kind is FrozenDict or kind is FrozenList:
            assert isinstance(value, FrozenDict | FrozenList)
            if depth + value._height > self._max_depth:  # pyright: ignore[reportPrivateUsage]
                raise _Unsure
            self._note_shared(value)
            self._count(value._size)  # pyright: ignore[reportPrivateUsage]
            return value
        if kind is dict:
            assert isinstance(value, dict)
            return self._object(value, depth)  # pyright: ignore[reportUnknownArgumentType]
        if kind is list or kind is tuple:
            assert isinstance(value, list | tuple)
            return self._array(value, depth)  # pyright: ignore[reportUnknownArgumentType]
        raise _Unsure

    def _object(self, value: dict[object, object], depth: int) -> JsonValue:
        self._container(value, depth)
        data: dict[str, JsonValue] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Unsure
            assert isinstance(key, str)
            if not key.isascii() and _LONE_SURROGATE.search(key) is not None:
                raise _Unsure
            data[key] = self.visit(item, depth + 1)
        height, size = _measure(iter(data.values()))
        return _make_dict(data, height, size)

    def _array(self, value: list[object] | tuple[object, ...], depth: int) -> JsonValue:
        self._container(value, depth)
        items = tuple([self.visit(item, depth + 1) for item in value])
        return _make_list(items)


def _plain_document(value: object, depth: int, max_depth: int) -> bool:
    """Whether ``value`` is certainly what a JSON parser could produce (any integer size).

    The fast form of :func:`check_json_document` for the common, valid case; false means
    "not sure", and the exact walk then finds and reports the problem. It recurses only
    into containers within ``max_depth`` (at most :data:`MAX_FROZEN_DEPTH`), so a cycle or
    deep input ends as false at that depth.
    """
    if type(value) is str:
        return value.isascii() or _LONE_SURROGATE.search(value) is None
    if type(value) is int or type(value) is bool or value is None:
        return True
    if is_exact_dict(value):
        if depth > max_depth:
            return False
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or _LONE_SURROGATE.search(key) is None):
                return False
            if not _plain_document(item, depth + 1, max_depth):
                return False
        return True
    if type(value) is FrozenDict or type(value) is FrozenList:
        return depth + value._height <= max_depth  # pyright: ignore[reportPrivateUsage]
    if is_exact_array(value):
        if depth > max_depth:
            return False
        return all(_plain_document(item, depth + 1, max_depth) for item in value)
    if type(value) is float:
        return math.isfinite(value)
    return False


def _location(stack: list[_Frame]) -> str:
    parts = ["$"]
    for frame in stack:
        position = frame.index - 1
        if position < 0:
            break
        if frame.is_object:
            raw = frame.keys[position]
            key = raw if type(raw) is str else "<non-string key>"
            assert isinstance(key, str)
            if len(key) > _MAX_KEY_IN_LOCATION:
                key = key[:_MAX_KEY_IN_LOCATION] + "…"
            parts.append("." + key)
        else:
            parts.append(f"[{position}]")
    return "".join(parts)


def freeze_json(
    value: object,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int | None = DEFAULT_MAX_NODES,
    allow_shared: bool = True,
) -> JsonValue:
    """Validate JSON data and return a deep-frozen copy.

    Scalars come back unchanged; ``dict`` becomes :class:`FrozenDict`, ``list`` and ``tuple``
    become :class:`FrozenList`. Frozen values are reused as they are (they were validated when
    built), after checking them against these limits.

    Args:
        value: The candidate JSON data.
        max_depth: Deepest container nesting allowed; the root container is depth 0. At most
            :data:`MAX_FROZEN_DEPTH`.
        max_nodes: Most values in the tree (containers and scalars, not keys); ``None`` for
            no limit.
        allow_shared: If false, a container met twice (shared, not only cyclic) is an error.

    Raises:
        JsonDataError: ``value`` is not JSON data (non-exact or non-JSON type, non-``str``
            key, NaN/±inf, integer outside ±(2**53-1), lone surrogate, cycle) or breaks a
            limit.
        ValueError: ``max_depth`` is out of range.
    """
    if not 0 <= max_depth <= MAX_FROZEN_DEPTH:
        raise ValueError(f"max_depth must be between 0 and {MAX_FROZEN_DEPTH}")
    try:
        return _FastWalk(max_depth=max_depth, max_nodes=max_nodes, allow_shared=allow_shared).visit(value, 0)
    except (_Unsure, RecursionError):
        walker = _Walker(
            max_depth=max_depth,
            max_nodes=max_nodes,
            allow_shared=allow_shared,
            safe_integers=True,
            build=True,
        )
        return walker.run(value)


def check_json_document(value: object, *, max_depth: int = MAX_FROZEN_DEPTH) -> None:
    """Check that ``value`` is what a JSON parser could have produced, copying nothing.

    This is the "is it JSON at all" gate for caller-supplied decoded documents: exact JSON
    types, ``str`` keys, finite numbers, no lone surrogates, no cycles, nesting within
    ``max_depth``. Integers of any size pass (range rules belong to the schema).

    Raises:
        JsonDataError: ``value`` could not have come from a JSON parser, or is too deep.
        ValueError: ``max_depth`` is out of range.
    """
    if 0 <= max_depth <= MAX_FROZEN_DEPTH:
        try:
            if _plain_document(value, 0, max_depth):
                return
        except RecursionError:
            pass
    walker = _Walker(max_depth=max_depth, max_nodes=None, allow_shared=True, safe_integers=False, build=False)
    walker.run(value)


def thaw_json(value: JsonValue) -> object:
    """A plain, mutable deep copy of frozen JSON (``dict``/``list``); scalars unchanged."""
    if type(value) is FrozenDict:
        return {key: thaw_json(item) for key, item in value.items()}
    if type(value) is FrozenList:
        return [thaw_json(item) for item in value]
    return value


def _encode_frozen(value: object) -> object:
    if type(value) is FrozenDict:
        return value._data  # pyright: ignore[reportPrivateUsage]
    if type(value) is FrozenList:
        return value._items  # pyright: ignore[reportPrivateUsage]
    raise TypeError(f"cannot encode a value of type {type(value).__name__} as JSON")


_ENCODER: Final = msgspec.json.Encoder(enc_hook=_encode_frozen)
_DECODER: Final = msgspec.json.Decoder()


def encode_json(value: object) -> bytes:
    """Compact UTF-8 JSON of ``value``; frozen JSON and msgspec Structs are understood.

    The encoder does not validate: check values first (msgspec writes NaN/±inf as ``null``).

    Raises:
        TypeError: a value of an unsupported type.
        msgspec.EncodeError: msgspec could not encode ``value``.
    """
    return _ENCODER.encode(value)


def decode_json(data: bytes | str) -> object:
    """Decode JSON text into plain Python values (``dict``, ``list``, scalars).

    Raises:
        msgspec.DecodeError: malformed JSON, or a number out of the float range.
        RecursionError: nesting deeper than the interpreter allows.
        UnicodeError: ``data`` is a ``str`` holding a lone surrogate.
    """
    return _DECODER.decode(data)
