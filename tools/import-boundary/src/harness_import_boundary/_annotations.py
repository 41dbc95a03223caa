"""Strings that become code: string annotations and the field types of types built by calls.

``typing.get_type_hints`` evaluates a string annotation as an expression in the module's
namespace, builtins included, and msgspec calls it whenever it decodes into a Struct, a
dataclass, a TypedDict or a NamedTuple. So ``x: "__import__('os').system('id') or int"`` on
a Struct field runs when the kernel decodes one. The same holds for the string field types
of the classes that ``typing.NamedTuple("N", [("x", "…")])``, ``dataclasses.make_dataclass``,
``msgspec.defstruct``, ``type(name, bases, namespace)`` and their kin build at run time.

Such strings are parsed here and walked like the source around them (their findings are
placed at the string). Strings inside ``Literal[...]`` are values, not types, and so are the
metadata of ``Annotated[T, ...]``; neither is evaluated. Outside an annotation, a string in a
typing subscript (``List["…"]``) is a forward reference that typing evaluates later, where the
checker cannot follow: it is reported instead.

The collector asks these questions as it walks, of the scopes built so far; the answers are
values (strings, nodes), and the collector records what follows from them.
"""

from __future__ import annotations

import ast
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Final

import libcst as cst

from harness_import_boundary._syntax import (
    BUILTIN_NAMES,
    GENERIC_BUILTINS,
    GENERIC_MODULES,
    NOT_FORWARD_REFERENCES,
    Scope,
    binding_scope,
    identifier,
    qualified_names,
    resolve,
    static_string,
)
from harness_import_boundary._tree import walked_children

__all__ = [
    "ANNOTATION_DEPTH",
    "MAX_ANNOTATION_CHARS",
    "TYPE_ALIAS_NAMES",
    "TYPE_BUILDERS",
    "annotation_strings",
    "field_type_arguments",
    "forward_references",
    "is_type_display",
    "parse_annotation",
    "scope_values",
    "strings_as_code",
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

TYPE_ALIAS_NAMES: Final = frozenset({"typing.TypeAlias", "typing_extensions.TypeAlias"})
"""``X: TypeAlias = …``: the value is a type expression, evaluated like an annotation."""

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
    expression: cst.BaseExpression, scope: Scope
) -> Iterator[tuple[cst.CSTNode, str | None]]:
    """The strings of a type expression that typing would evaluate, with their text.

    A string computed at run time (``"a" + b``, an f-string with fields, ``"".join(…)``)
    comes with ``None``: it cannot be read, so it cannot be verified.

    A name is followed to the values it is bound to (``T = "…"``, ``T = List["…"]``): a type
    alias is evaluated where it is used, so its strings are code there too.

    Args:
        expression: The annotation (or field-type argument).
        scope: The scope the expression is written in, as built so far.
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
            for value in scope_values(scope, identifier(node.value)):
                if id(value) not in followed:
                    followed.add(id(value))
                    stack.append(value)
            continue
        if isinstance(node, cst.Subscript):
            base = qualified_names(scope, node.value)
            if any(name in LITERAL_NAMES for name in base):
                continue  # Literal["..."] holds values
            if any(name in ANNOTATED_NAMES for name in base):
                first = node.slice[0].slice if node.slice else None
                if isinstance(first, cst.Index):
                    stack.append(first.value)  # only the type; the metadata is never evaluated
                continue
        stack.extend(walked_children(node))


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


def strings_as_code(
    expression: cst.BaseExpression, depth: int, scope: Scope, analysed: set[int]
) -> Iterator[tuple[cst.CSTNode, cst.BaseExpression | str]]:
    """The strings of a type expression not yet in ``analysed``, each with the code it becomes.

    Each string comes with its parsed expression, to be walked (and searched for strings in
    turn, one ``depth`` deeper), or with the reason it cannot be verified. A string CPython
    cannot compile raises before any code runs, and is left out. Each string is added to
    ``analysed`` as it is reached, so one reached again, through a type alias or by a walk
    between two steps of this iterator, is not analysed twice.
    """
    for string, text in list(annotation_strings(expression, scope)):
        if id(string) in analysed:
            continue
        analysed.add(id(string))
        parsed: cst.BaseExpression | str | None
        if text is None:
            parsed = "a type from a string computed at run time cannot be verified"
        elif depth < ANNOTATION_DEPTH:
            parsed = parse_annotation(text)
        else:
            parsed = "strings nested this deep"
        if parsed is not None:
            yield string, parsed


def field_type_arguments(call: cst.Call) -> list[cst.Arg]:
    """The arguments of a call that builds a type which may hold its field types (all but the name)."""
    arguments = list(call.args)
    if arguments and arguments[0].keyword is None and not arguments[0].star:
        arguments = arguments[1:]  # the name
    return arguments


# What a field-type argument may be made of, beside names, numbers and strings.
_TYPE_DISPLAY_PARTS: Final = (
    cst.Attribute,
    cst.Subscript,
    cst.SubscriptElement,
    cst.Index,
    cst.BinaryOperation,
    cst.List,
    cst.Tuple,
    cst.Set,
    cst.Dict,
    cst.Element,
    cst.DictElement,
)


def is_type_display(expression: cst.BaseExpression, scope: Scope) -> bool:
    """Whether ``expression`` shows every field type it holds (no variable hides one)."""
    stack: list[cst.CSTNode] = [expression]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            name = identifier(node.value)
            if name not in ("None", "True", "False") and not _names_a_type(scope, name):
                return False
        elif isinstance(node, _TYPE_DISPLAY_PARTS):
            stack.extend(walked_children(node))
        elif not isinstance(node, cst.BaseNumber | cst.SimpleString | cst.ConcatenatedString):
            return False
    return True


def _names_a_type(scope: Scope, name: str) -> bool:
    resolution = resolve(scope, name)
    if resolution.from_import or (resolution.builtin and name in BUILTIN_NAMES):
        return True
    current: Scope | None = scope
    while current is not None:
        if name in current.bindings or name in current.imports:
            return name in current.definitions and name not in current.assignments
        current = current.parent
    return False


def forward_references(
    base: cst.BaseExpression, arguments: Sequence[cst.CSTNode], scope: Scope
) -> list[cst.CSTNode]:
    """The strings (or names bound to strings) that subscribing ``base`` keeps as forward references.

    Only a subscript outside an annotation asks: there a string is a value that carries code
    to whatever evaluates it later. A nested subscript is left out; the walk reaches it on its own.
    """
    qualified = qualified_names(scope, base)
    if not arguments or not _is_generic(base, qualified, scope):
        return []
    if any(name in ANNOTATED_NAMES for name in qualified):
        arguments = arguments[:1]  # the metadata of Annotated[T, ...] is never evaluated
    strings: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = list(arguments)
    while stack:
        node = stack.pop()
        if _is_string_value(node, scope):
            strings.append(node)
        elif not isinstance(node, cst.Subscript):
            stack.extend(walked_children(node))
    return strings


def _is_string_value(node: cst.CSTNode, scope: Scope) -> bool:
    """Whether ``node`` is a string, or a name bound to one in ``scope``."""
    strings = cst.SimpleString | cst.ConcatenatedString | cst.FormattedString
    if isinstance(node, strings):
        return True
    return isinstance(node, cst.Name) and any(
        isinstance(value, strings) for value in scope_values(scope, identifier(node.value))
    )


def _is_generic(base: cst.BaseExpression, qualified: tuple[str, ...], scope: Scope) -> bool:
    """Whether subscribing ``base`` keeps a string argument as a forward reference."""
    if any(name in NOT_FORWARD_REFERENCES for name in qualified):
        return False
    if any(name.startswith(GENERIC_MODULES) or name in GENERIC_BUILTINS for name in qualified):
        return True
    if isinstance(base, cst.Name):
        defining = binding_scope(scope, identifier(base.value))
        return defining is not None and identifier(base.value) in defining.classes
    return False
