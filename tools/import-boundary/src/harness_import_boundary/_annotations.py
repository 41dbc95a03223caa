"""Strings that become code: string annotations and the field types of types built by calls.

``typing.get_type_hints`` evaluates a string annotation as an expression in the module's
namespace, builtins included, and msgspec calls it whenever it decodes into a Struct, a
dataclass, a TypedDict or a NamedTuple. So ``x: "__import__('os').system('id') or int"`` on
a Struct field runs when the kernel decodes one. The same holds for the string field types
of the classes that ``typing.NamedTuple("N", [("x", "…")])``, ``dataclasses.make_dataclass``,
``msgspec.defstruct``, ``type(name, bases, namespace)`` and their kin build at run time.

Such strings are parsed here and walked like the source around them (their findings are
placed at the string). Strings inside ``Literal[...]`` are values, not types, and so are the
metadata of ``Annotated[T, ...]``; neither is evaluated.
"""

from __future__ import annotations

import ast
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Final

import libcst as cst

from harness_import_boundary._syntax import Scope, static_string

__all__ = [
    "ANNOTATION_DEPTH",
    "MAX_ANNOTATION_CHARS",
    "TYPE_BUILDERS",
    "annotation_strings",
    "parse_annotation",
    "scope_values",
]

MAX_ANNOTATION_CHARS: Final = 4096
"""A longer string annotation is unverifiable rather than parsed."""

ANNOTATION_DEPTH: Final = 4
"""Strings nested deeper in string annotations than this are unverifiable."""

LITERAL_NAMES: Final = frozenset({"typing.Literal", "typing_extensions.Literal"})
ANNOTATED_NAMES: Final = frozenset({"typing.Annotated", "typing_extensions.Annotated"})

TYPE_BUILDERS: Final = frozenset(
    {
        "typing.NamedTuple",
        "typing.TypedDict",
        "typing.NewType",
        "typing.TypeVar",
        "typing_extensions.NamedTuple",
        "typing_extensions.TypedDict",
        "dataclasses.make_dataclass",
        "msgspec.defstruct",
        "types.new_class",
        "builtins.type",
    }
)
"""Calls whose arguments after the name may hold field types that are evaluated later."""

_GUARD_RECURSION_LIMIT: Final = 1_000  # CPython's default, as for whole files


def parse_annotation(text: str) -> cst.BaseExpression | str | None:
    """Parse a string the interpreter would evaluate as a type.

    Returns:
        The expression; ``None`` when CPython itself cannot compile the text (so evaluating it
        raises before any code runs); or a reason, when it cannot be verified.
    """
    if len(text) > MAX_ANNOTATION_CHARS:
        return f"a string annotation over {MAX_ANNOTATION_CHARS} characters cannot be verified"
    caller_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_GUARD_RECURSION_LIMIT)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    finally:
        sys.setrecursionlimit(caller_limit)
    try:
        return cst.parse_expression(text.strip())
    except Exception:  # libcst's grammar refuses what CPython accepts: not verifiable
        return "a string annotation that libcst cannot parse cannot be verified"


def annotation_strings(
    expression: cst.BaseExpression,
    qualified: Callable[[cst.BaseExpression], tuple[str, ...]],
    string_values: Callable[[str], list[cst.BaseExpression]],
    children: Callable[[cst.CSTNode], list[cst.CSTNode]],
) -> Iterator[tuple[cst.CSTNode, str | None]]:
    """The strings of a type expression that typing would evaluate, with their text.

    A string computed at run time (``"a" + b``, an f-string with fields, ``"".join(…)``)
    comes with ``None``: it cannot be read, so it cannot be verified.

    Args:
        expression: The annotation (or field-type argument).
        qualified: What a name or attribute chain resolves to, in the current scope.
        string_values: The values a local name is bound to (``T = "…"``, ``T = List["…"]``):
            a type alias is evaluated where it is used, so its strings are code there too.
        children: The walk's child nodes of a node.
    """
    stack: list[cst.CSTNode] = [expression]
    followed: set[int] = set()
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleString | cst.ConcatenatedString):
            text = static_string(node)
            if text is not None:
                yield node, text
            continue
        if _computes_text(node):
            yield node, None
            continue
        if isinstance(node, cst.Name):
            for value in string_values(node.value):
                if id(value) not in followed:
                    followed.add(id(value))
                    stack.append(value)
            continue
        if isinstance(node, cst.Subscript):
            base = qualified(node.value)
            if any(name in LITERAL_NAMES for name in base):
                continue  # Literal["..."] holds values
            if any(name in ANNOTATED_NAMES for name in base):
                first = node.slice[0].slice if node.slice else None
                if isinstance(first, cst.Index):
                    stack.append(first.value)  # only the type; the metadata is never evaluated
                continue
        stack.extend(children(node))


def _computes_text(node: cst.CSTNode) -> bool:
    """Whether ``node`` may build a string at run time (no type expression does this)."""
    if isinstance(node, cst.BinaryOperation):
        return not isinstance(node.operator, cst.BitOr)
    if isinstance(node, cst.FormattedString):
        return static_string(node) is None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        receiver = node.func.value
        return isinstance(receiver, cst.SimpleString | cst.ConcatenatedString | cst.FormattedString)
    return False


def scope_values(scope: Scope, name: str) -> list[cst.BaseExpression]:
    """The values ``name`` is assigned in ``scope`` or an enclosing one (nearest first)."""
    current: Scope | None = scope
    while current is not None:
        if name in current.bindings or name in current.imports:
            return current.assignments.get(name, [])
        current = current.parent
    return []
