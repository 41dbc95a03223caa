"""What the collector and the resolver share: scopes, records of references, name helpers."""

from __future__ import annotations

import builtins
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final, Literal

import libcst as cst

PATH_CLASSES: Final = frozenset({"pathlib.Path", "pathlib.PosixPath", "pathlib.WindowsPath"})
PATH_DERIVATIONS: Final = frozenset(
    {
        "absolute",
        "expanduser",
        "joinpath",
        "relative_to",
        "resolve",
        "with_name",
        "with_stem",
        "with_suffix",
        "with_segments",
        "readlink",
    }
)
WRITE_METHODS: Final = frozenset(
    {
        "write_text",
        "write_bytes",
        "mkdir",
        "unlink",
        "rename",
        "replace",
        "touch",
        "rmdir",
        "symlink_to",
        "hardlink_to",
        "chmod",
    }
)
UNKNOWN_RECEIVER_METHODS: Final = frozenset(
    {"write_text", "write_bytes", "mkdir", "unlink", "touch", "rmdir", "symlink_to", "hardlink_to"}
)
TYPE_CHECKING_NAMES: Final = frozenset({"typing.TYPE_CHECKING", "typing_extensions.TYPE_CHECKING"})
DUNDER_IMPORTS: Final = frozenset({"builtins.__import__", "importlib.__import__"})
LOADER_MODULES: Final = frozenset({"runpy", "importlib.machinery"})
LOADER_PREFIXES: Final = ("runpy.", "importlib.machinery.")
EXACT_LOADERS: Final = frozenset(
    {"importlib.util.spec_from_file_location", "importlib.util.module_from_spec"}
)
NON_PATH_LITERALS: Final = (
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.List,
    cst.Tuple,
    cst.Dict,
    cst.Set,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
)


INTROSPECTION_ATTRIBUTES: Final = frozenset(
    {
        # string annotations are code once msgspec or typing evaluates them
        "__annotations__",
        # functions, methods and builtins that lead to globals, builtins or code
        "__globals__",
        "__builtins__",
        "__code__",
        "__closure__",
        "__self__",
        # every class in the process
        "__subclasses__",
        # the module's loader reads files; its spec names the loader
        "__loader__",
        "__spec__",
        # frames and what they hold
        "f_back",
        "f_builtins",
        "f_code",
        "f_globals",
        "f_locals",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "gi_code",
        "cr_code",
        "ag_code",
    }
)
"""Attribute names that reach frames, globals, builtins, code objects or all classes: an
IB002 on any receiver, since the checker does not know types."""

DYNAMIC_ATTRIBUTE_METHODS: Final = frozenset({"__getattribute__", "__getattr__"})
"""Methods that read an attribute by a name given at run time, like ``getattr``."""

DANGEROUS_BUILTINS: Final = frozenset(
    {
        "compile",
        "breakpoint",
        "input",
        "help",
        "exit",
        "quit",
        "copyright",
        "credits",
        "license",
        "globals",
        "locals",
        "vars",
        "__build_class__",
        "__loader__",
        "__spec__",
    }
)
"""Builtins other than open, exec, eval and __import__ (which have their own forms) whose
every reference is IB002: they compile or run code, reach namespaces, or do console I/O."""

ATTRIBUTE_BY_NAME: Final = frozenset({"builtins.getattr", "builtins.setattr", "builtins.delattr"})
"""Builtins that take an attribute name as their second argument."""

NAME_GETTERS: Final = frozenset({"operator.attrgetter", "operator.methodcaller"})
"""Callables that build an attribute reader from names given as arguments."""

BUILTIN_NAMES: Final = frozenset(dir(builtins))
"""The names the running interpreter's builtins module holds (an unbound name is not one)."""

DICT_LOOKUPS: Final = frozenset({"get", "pop", "setdefault"})
"""Methods of ``__dict__`` that take a key, like a subscript."""

PLAIN_DUNDERS: Final = frozenset(
    {
        # names and places, and the class an object has: strings and classes, no code
        "__name__",
        "__qualname__",
        "__module__",
        "__doc__",
        "__class__",
        "__mro__",
        "__bases__",
        "__slots__",
        "__match_args__",
        "__struct_fields__",
        "__struct_config__",
        # an exception's chain and notes
        "__cause__",
        "__context__",
        "__suppress_context__",
        "__traceback__",
        "__notes__",
        # protocol methods: calling one gives no more than the syntax or builtin it serves
        "__aiter__",
        "__anext__",
        "__iter__",
        "__next__",
        "__enter__",
        "__exit__",
        "__aenter__",
        "__aexit__",
        "__await__",
        "__call__",
        "__len__",
        "__contains__",
        "__getitem__",
        "__setitem__",
        "__delitem__",
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__hash__",
        "__bool__",
        "__repr__",
        "__str__",
    }
)
"""Dunder attributes that are plain data or stand for syntax: free on any receiver. Every
other dunder, and every private name, needs a receiver the checker knows is the module's own
(``forward_ref.__forward_arg__``, ``alias.__args__``, ``ref._evaluate(…)`` are findings)."""

GENERIC_MODULES: Final = ("typing.", "typing_extensions.", "collections.")
"""Modules whose subscripted names turn a string argument into a forward reference."""

GENERIC_BUILTINS: Final = frozenset(
    f"builtins.{name}" for name in ("list", "dict", "set", "frozenset", "tuple", "type")
)
"""Builtin classes whose subscription keeps a string argument that typing evaluates later."""

NOT_FORWARD_REFERENCES: Final = frozenset({"typing.Literal", "typing_extensions.Literal"})
"""Subscripts whose strings are values, never evaluated."""


def is_private_name(name: str) -> bool:
    """Whether an attribute name is private (``_x``) or a dunder that is not plain data."""
    return name.startswith("_") and name not in PLAIN_DUNDERS


def introspection_message(name: str) -> str:
    """The message of an ``introspection`` finding about the attribute ``name``."""
    return f'"{name}" reaches frames, globals, builtins, code objects or every class; it cannot be verified'


def identifier(name: str) -> str:
    """``name`` as the interpreter sees it: identifiers are NFKC-normalised when parsed."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def is_dynamic_loader(name: str) -> bool:
    return name in LOADER_MODULES or name.startswith(LOADER_PREFIXES) or name in EXACT_LOADERS


@dataclass(eq=False)
class Scope:
    kind: Literal["module", "function", "class", "comprehension"]
    parent: Scope | None
    imports: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    bindings: set[str] = field(default_factory=set[str])
    global_names: set[str] = field(default_factory=set[str])
    assignments: dict[str, list[cst.BaseExpression]] = field(
        default_factory=dict[str, list[cst.BaseExpression]]
    )
    path_annotated: set[str] = field(default_factory=set[str])
    path_names: set[str] = field(default_factory=set[str])
    definitions: set[str] = field(default_factory=set[str])
    """Names bound by ``class`` or ``def`` statements (types, not values)."""
    classes: set[str] = field(default_factory=set[str])
    """Names bound by ``class`` statements."""
    receivers: set[str] = field(default_factory=set[str])
    """The first parameter of a method: the instance (or class) of a class of this module."""
    narrowed: dict[str, list[cst.BaseExpression]] = field(default_factory=dict[str, list[cst.BaseExpression]])
    """Types a name is annotated with or tested against (``isinstance``, ``type(x) is``)."""


def binding_scope(scope: Scope, name: str) -> Scope | None:
    """The scope whose binding ``name`` refers to from ``scope``, or ``None`` (import, builtin)."""
    if name in scope.global_names:
        while scope.parent is not None:
            scope = scope.parent
    current: Scope | None = scope
    first = True
    while current is not None:
        if current.kind == "class" and not first:
            current = current.parent
            continue
        if name in current.imports:
            return None
        if name in current.bindings:
            return current
        first = False
        current = current.parent
    return None


def bind_name(scope: Scope, module_scope: Scope, name: str) -> None:
    """Bind ``name`` in ``scope``, or in ``module_scope`` when ``scope`` declares it ``global``."""
    name = identifier(name)
    if name in scope.global_names:
        scope = module_scope
    scope.bindings.add(name)


@dataclass(frozen=True)
class Resolution:
    """What a name refers to: import targets, a builtin, or a local (unknown) value."""

    qualified: tuple[str, ...]
    builtin: bool
    from_import: bool


@dataclass(eq=False)
class Reference:
    """A load of a name or of a pure attribute chain ``base.a.b``, with how it is used."""

    scope: Scope
    statement: int
    names: list[str]
    nodes: list[cst.CSTNode]
    call: cst.Call | None = None
    subscript: cst.Subscript | None = None


@dataclass(eq=False)
class WriteAccess:
    """``receiver.<method>`` where the method may write through pathlib."""

    scope: Scope
    statement: int
    receiver: cst.BaseExpression | None
    """The object written through, or ``None`` when unknown (``operator.methodcaller``)."""
    method: str
    node: cst.CSTNode
    call: cst.Call | None


@dataclass(eq=False)
class PendingFinding:
    """A finding before positions: ``statement`` is the index of its top-level statement."""

    node: cst.CSTNode
    statement: int
    rule: str
    module: str
    form: str
    message: str


def flatten_chain(expression: cst.BaseExpression) -> tuple[list[str], list[cst.CSTNode]] | None:
    """Flatten ``a.b.c`` into names and nodes (the base Name, then each attribute's Name)."""
    names: list[str] = []
    nodes: list[cst.CSTNode] = []
    current = expression
    while isinstance(current, cst.Attribute):
        names.append(identifier(current.attr.value))
        nodes.append(current.attr)
        current = current.value
    if not isinstance(current, cst.Name):
        return None
    names.append(identifier(current.value))
    nodes.append(current)
    names.reverse()
    nodes.reverse()
    return names, nodes


def chain_parts(expression: cst.BaseExpression) -> Iterator[cst.CSTNode]:
    current = expression
    while isinstance(current, cst.Attribute):
        yield current
        yield current.attr
        current = current.value
    yield current


def dotted_name(expression: cst.BaseExpression) -> str:
    if isinstance(expression, cst.Name):
        return identifier(expression.value)
    if isinstance(expression, cst.Attribute):
        return f"{dotted_name(expression.value)}.{identifier(expression.attr.value)}"
    raise TypeError(f"not a dotted name: {type(expression).__name__}")


def static_string(expression: cst.BaseExpression) -> str | None:
    """The value of a plain literal, an implicit concatenation of them, or a plain f-string."""
    if isinstance(expression, cst.SimpleString):
        value = expression.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(expression, cst.ConcatenatedString):
        left = static_string(expression.left)
        right = static_string(expression.right)
        return None if left is None or right is None else left + right
    if isinstance(expression, cst.FormattedString):
        parts: list[str] = []
        for part in expression.parts:
            if not isinstance(part, cst.FormattedStringText):
                return None
            parts.append(part.value.replace("{{", "{").replace("}}", "}"))
        return "".join(parts)
    return None


def call_argument(call: cst.Call, position: int, keyword: str | None) -> cst.BaseExpression | None:
    """The argument passed at ``position`` or as ``keyword`` (``None`` when absent or unclear)."""
    index = 0
    for argument in call.args:
        if argument.star:
            return None  # *args / **kwargs: the position of what follows is unknown
        if argument.keyword is not None:
            if identifier(argument.keyword.value) == keyword:
                return argument.value
            continue
        if index == position:
            return argument.value
        index += 1
    return None


def has_star_arguments(call: cst.Call) -> bool:
    """Whether ``call`` passes ``*args`` or ``**kwargs`` (so any argument may be anything)."""
    return any(argument.star for argument in call.args)


def positional_arguments(call: cst.Call) -> list[cst.BaseExpression] | None:
    """The positional arguments, or ``None`` when a star argument hides some of them."""
    values: list[cst.BaseExpression] = []
    for argument in call.args:
        if argument.star:
            return None
        if argument.keyword is None:
            values.append(argument.value)
    return values


def resolve(scope: Scope, name: str) -> Resolution:
    """Resolve ``name`` as seen from ``scope`` (class scopes are invisible to nested scopes)."""
    current: Scope | None = scope
    if name in scope.global_names:
        while scope.parent is not None:
            scope = scope.parent
        current = scope
    first = True
    while current is not None:
        if current.kind == "class" and not first:
            current = current.parent
            continue
        imported = current.imports.get(name)
        if imported is not None:
            return Resolution(tuple(imported), builtin=False, from_import=True)
        if name in current.bindings:
            return Resolution((), builtin=False, from_import=False)
        first = False
        current = current.parent
    return Resolution((), builtin=True, from_import=False)


def qualified_names(scope: Scope, expression: cst.BaseExpression) -> tuple[str, ...]:
    """What a name or attribute chain may stand for, as seen from ``scope`` (empty for other expressions)."""
    chain = flatten_chain(expression)
    if chain is None:
        return ()
    names, _ = chain
    resolution = resolve(scope, names[0])
    rest = "".join(f".{name}" for name in names[1:])
    if resolution.builtin:
        return (f"builtins.{names[0]}{rest}",)
    return tuple(f"{qualified}{rest}" for qualified in resolution.qualified)
