"""A strict, iterative reading of one YAML document from PyYAML's safe event stream.

PyYAML's own composer and constructor keep the last of duplicate keys and resolve
anchors, aliases, merge keys and tags silently, and they recurse once per nesting level.
This module walks ``yaml.parse(text, Loader=SafeLoader)`` events with an explicit stack
instead, refuses those constructs with an issue each, and builds plain Python values:
``dict`` with ``str`` keys, ``list``, and scalars typed by YAML's implicit resolution
(``yes`` is a ``bool``, ``2026-01-01`` a timestamp), never coerced back into strings.
"""

from __future__ import annotations

import datetime
from types import MappingProxyType
from typing import Final, Protocol, cast, final

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

__all__ = [
    "MAX_YAML_DEPTH",
    "ROOT",
    "SYNTAX",
    "YamlDocument",
    "YamlScalar",
    "describe_kind",
    "is_refused",
    "join_path",
    "read_yaml_document",
]

ROOT: Final = "<root>"
MAX_YAML_DEPTH: Final = 64
"""Collections nest at most this deep; reading stops at the first deeper one."""
SYNTAX: Final = "<yaml>"

_STR: Final = "tag:yaml.org,2002:str"
_NULL: Final = "tag:yaml.org,2002:null"
_BOOL: Final = "tag:yaml.org,2002:bool"
_INT: Final = "tag:yaml.org,2002:int"
_FLOAT: Final = "tag:yaml.org,2002:float"
_MERGE: Final = "tag:yaml.org,2002:merge"
_TAG_PREFIX: Final = "tag:yaml.org,2002:"


@final
class _Refused:
    """Stands for a value whose construct was refused; its issue is already recorded."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<refused>"


_REFUSED: Final = _Refused()


def is_refused(value: object) -> bool:
    """Whether ``value`` stands for a refused construct (already reported, not to be checked)."""
    return value is _REFUSED


@final
class YamlScalar:
    """A scalar YAML typed as something that has no plain Python value here (a timestamp).

    Attributes:
        kind: How to name it in a type error, e.g. ``"timestamp"``.
    """

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"<YAML {self.kind}>"


def join_path(parent: str, key: str) -> str:
    """Join a parent issue path and a key or index with a dot (``<root>`` is dropped)."""
    return key if parent == ROOT else f"{parent}.{key}"


@final
class _Sequence:
    __slots__ = ("is_key", "path", "refused", "value")

    def __init__(self, path: str, *, is_key: bool, refused: bool) -> None:
        self.path = path
        self.is_key = is_key
        self.refused = refused
        self.value: list[object] = []


@final
class _Mapping:
    __slots__ = ("expecting_key", "is_key", "key", "key_path", "path", "refused", "seen", "value")

    def __init__(self, path: str, *, is_key: bool, refused: bool) -> None:
        self.path = path
        self.is_key = is_key
        self.refused = refused
        self.value: dict[str, object] = {}
        self.seen: set[str] = set()
        self.expecting_key = True
        # The accepted key awaiting its value, or None when the entry is dropped.
        self.key: str | None = None
        self.key_path = path


@final
class YamlDocument:
    """The result of reading: the document's value (when complete) and every issue found.

    Attributes:
        value: The root value; meaningful only when ``complete``.
        issues: ``(path, message)`` pairs in document order.
        complete: Whether exactly one document was read without a syntax error.
    """

    __slots__ = ("complete", "issues", "value")

    def __init__(self, value: object, issues: list[tuple[str, str]], *, complete: bool) -> None:
        self.value = value
        self.issues = issues
        self.complete = complete


def _describe_yaml_error(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.MarkedYAMLError):
        problem = error.problem or error.context or "malformed document"
        mark = error.problem_mark or error.context_mark
        where = "" if mark is None else f" (line {mark.line + 1}, column {mark.column + 1})"
        text = problem + where
    elif isinstance(error, yaml.reader.ReaderError):
        text = f"{error}"
    else:
        text = str(error)
    return "invalid YAML: " + " ".join(text.split())


class _TagResolver(Protocol):
    """The typed shape of ``Resolver.resolve``, which PyYAML's stubs leave untyped."""

    def resolve(self, kind: type[ScalarNode], value: str, implicit: tuple[bool, bool]) -> object: ...


class _Reader:
    """One pass over one text's events; owns its stack, its issues and its resolver."""

    def __init__(self) -> None:
        self.issues: list[tuple[str, str]] = []
        self.stack: list[_Sequence | _Mapping] = []
        self.root: object = None
        self.resolver = cast(_TagResolver, Resolver())
        self.constructor = SafeConstructor()

    def issue(self, path: str, message: str) -> None:
        self.issues.append((path, message))

    # -------------------------------------------------------------- paths

    def node_path(self) -> str:
        """The path of the node that starts now, from its parent's state."""
        if not self.stack:
            return ROOT
        top = self.stack[-1]
        if isinstance(top, _Sequence):
            return join_path(top.path, str(len(top.value)))
        return top.path if top.expecting_key else top.key_path

    def in_key_position(self) -> bool:
        top = self.stack[-1] if self.stack else None
        return isinstance(top, _Mapping) and top.expecting_key

    # -------------------------------------------------------------- values

    def scalar_tag(self, event: ScalarEvent) -> str:
        tag = self.resolver.resolve(ScalarNode, event.value, event.implicit)
        return tag if isinstance(tag, str) else _STR

    def scalar_value(self, tag: str, text: str) -> object:
        node = ScalarNode(tag, text)
        try:
            if tag == _STR:
                return text
            if tag == _NULL:
                return None
            if tag == _BOOL:
                return self.constructor.construct_yaml_bool(node)
            if tag == _INT:
                return self.constructor.construct_yaml_int(node)
            if tag == _FLOAT:
                return self.constructor.construct_yaml_float(node)
        except (ValueError, OverflowError, KeyError):
            # e.g. "0b_" resolves as an int but has no digits; a huge int exceeds Python's
            # digit limit. It stays a typed, unusable scalar rather than a string.
            return YamlScalar(f"malformed {tag.removeprefix(_TAG_PREFIX)}")
        return YamlScalar(tag.removeprefix(_TAG_PREFIX))

    def check_node(self, event: NodeEvent, path: str) -> bool:
        """Report anchors and explicit tags on a node; return whether a tag refused it."""
        if event.anchor is not None:
            self.issue(path, f"anchors are not allowed (&{event.anchor})")
        tag = event.tag if isinstance(event, ScalarEvent | CollectionStartEvent) else None
        if tag is not None:
            shown = "!!" + tag.removeprefix(_TAG_PREFIX) if tag.startswith(_TAG_PREFIX) else tag
            self.issue(path, f"explicit tags are not allowed ({shown})")
            return True
        return False

    # -------------------------------------------------------------- delivery

    def deliver(self, value: object) -> None:
        """Hand a finished value (not a mapping key) to its parent."""
        if not self.stack:
            self.root = value
            return
        top = self.stack[-1]
        if isinstance(top, _Sequence):
            top.value.append(value)
            return
        if top.key is not None:
            top.value[top.key] = value
        top.key = None
        top.expecting_key = True

    def refuse_key(self, top: _Mapping, key_path: str) -> None:
        top.key = None
        top.key_path = key_path
        top.expecting_key = False

    def accept_scalar_key(self, top: _Mapping, event: ScalarEvent) -> None:
        key_path = join_path(top.path, event.value)
        if self.check_node(event, key_path):
            self.refuse_key(top, key_path)
            return
        tag = self.scalar_tag(event)
        if tag == _MERGE:
            self.issue(key_path, "merge keys are not allowed")
            self.refuse_key(top, key_path)
            return
        if tag != _STR:
            # Reported at the mapping, as for decoded documents: a non-string key has
            # no agreed spelling in a path.
            kind = describe_kind(self.scalar_value(tag, event.value))
            self.issue(top.path, f"keys must be strings, got {kind}")
            self.refuse_key(top, key_path)
            return
        if event.value in top.seen:
            self.issue(key_path, "duplicate key")
            self.refuse_key(top, key_path)
            return
        top.seen.add(event.value)
        top.key = event.value
        top.key_path = key_path
        top.expecting_key = False

    def finish_collection(self, value: object, frame: _Sequence | _Mapping) -> None:
        if frame.is_key:
            parent = self.stack[-1]
            assert isinstance(parent, _Mapping)
            self.issue(parent.path, "keys must be strings, got a collection")
            self.refuse_key(parent, parent.path)
            return
        self.deliver(_REFUSED if frame.refused else value)

    # -------------------------------------------------------------- walk

    def read(self, text: str) -> YamlDocument:
        documents = 0
        try:
            for event in yaml.parse(text, Loader=yaml.SafeLoader):
                if isinstance(event, DocumentStartEvent):
                    documents += 1
                    if documents > 1:
                        self.issue(ROOT, "manifest must contain exactly one YAML document, found several")
                        return YamlDocument(None, self.issues, complete=False)
                elif isinstance(event, ScalarEvent):
                    self.on_scalar(event)
                elif isinstance(event, AliasEvent):
                    path = self.node_path()
                    if self.in_key_position():
                        top = self.stack[-1]
                        assert isinstance(top, _Mapping)
                        self.issue(path, f"aliases are not allowed (*{event.anchor})")
                        self.refuse_key(top, path)
                    else:
                        self.issue(path, f"aliases are not allowed (*{event.anchor})")
                        self.deliver(_REFUSED)
                elif isinstance(event, SequenceStartEvent | MappingStartEvent):
                    is_key = self.in_key_position()
                    path = self.node_path()
                    if len(self.stack) >= MAX_YAML_DEPTH:
                        # Stop reading: PyYAML's scanner costs time quadratic in the flow
                        # nesting depth, and no manifest field nests deeper than three.
                        self.issue(path, f"nesting deeper than {MAX_YAML_DEPTH} levels is not allowed")
                        return YamlDocument(None, self.issues, complete=False)
                    refused = self.check_node(event, path)
                    frame_type = _Sequence if isinstance(event, SequenceStartEvent) else _Mapping
                    self.stack.append(frame_type(path, is_key=is_key, refused=refused))
                elif isinstance(event, SequenceEndEvent | MappingEndEvent):
                    frame = self.stack.pop()
                    self.finish_collection(frame.value, frame)
        except yaml.YAMLError as error:
            self.issue(SYNTAX, _describe_yaml_error(error))
            return YamlDocument(None, self.issues, complete=False)
        if documents == 0:
            self.issue(ROOT, "manifest must contain exactly one YAML document, found none")
            return YamlDocument(None, self.issues, complete=False)
        return YamlDocument(self.root, self.issues, complete=True)

    def on_scalar(self, event: ScalarEvent) -> None:
        if self.in_key_position():
            top = self.stack[-1]
            assert isinstance(top, _Mapping)
            self.accept_scalar_key(top, event)
            return
        path = self.node_path()
        if self.check_node(event, path):
            self.deliver(_REFUSED)
            return
        self.deliver(self.scalar_value(self.scalar_tag(event), event.value))


def read_yaml_document(text: str) -> YamlDocument:
    """Read exactly one YAML document strictly; see the module docstring."""
    return _Reader().read(text)


def describe_kind(value: object) -> str:
    """Name a value's type for a type error: ``string``, ``bool``, ``mapping``, ``timestamp``…"""
    if isinstance(value, YamlScalar):
        return value.kind
    kind = type(value)
    if value is None:
        return "null"
    return _KIND_NAMES.get(kind, f"object of type {kind.__qualname__}")


_KIND_NAMES: Final[dict[type, str]] = {
    str: "string",
    bool: "bool",
    int: "int",
    float: "float",
    dict: "mapping",
    MappingProxyType: "mapping",
    list: "sequence",
    tuple: "sequence",
    datetime.date: "timestamp",
    datetime.datetime: "timestamp",
}
