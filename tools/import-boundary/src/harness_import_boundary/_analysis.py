"""Per-file analysis: how could this module obtain host authority?

One pass over the libcst tree collects scopes, bindings and the references that can matter
(names, attribute chains, calls, subscripts, pathlib write accesses). Resolution happens
after the pass, flow-insensitively per scope, as the specification asks: a name bound
anywhere in a scope is that scope's name. Only the nodes that end up reported get a
position (see ``_positions``). No libcst metadata provider runs.

The function is pure and never raises for any input bytes: what cannot be parsed or
walked safely is an IB004 finding.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import sys
import threading
import tokenize
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import libcst as cst

from harness_import_boundary._model import Forbidden, RawFinding
from harness_import_boundary._positions import start_positions

__all__ = ["MAX_SOURCE_BYTES", "analyze_source"]

MAX_SOURCE_BYTES: Final = 4 * 1024 * 1024

# libcst's tree conversion and code generation are recursive. Long chains (the standard
# library's pydoc topics concatenate thousands of strings) exceed Python's default
# recursion limit, so parsing and walking run in a thread with a large stack and a raised
# limit; a RecursionError is still caught and reported.
_WALK_RECURSION_LIMIT: Final = 20_000
_GUARD_RECURSION_LIMIT: Final = 1_000  # CPython's default
_WALK_STACK_BYTES: Final = 512 * 1024 * 1024

_PATH_CLASSES: Final = frozenset({"pathlib.Path", "pathlib.PosixPath", "pathlib.WindowsPath"})
_PATH_DERIVATIONS: Final = frozenset(
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
_WRITE_METHODS: Final = frozenset(
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
_UNKNOWN_RECEIVER_METHODS: Final = frozenset(
    {"write_text", "write_bytes", "mkdir", "unlink", "touch", "rmdir", "symlink_to", "hardlink_to"}
)
_TYPE_CHECKING_NAMES: Final = frozenset({"typing.TYPE_CHECKING", "typing_extensions.TYPE_CHECKING"})
_DUNDER_IMPORTS: Final = frozenset({"builtins.__import__", "importlib.__import__"})
_LOADER_MODULES: Final = frozenset({"runpy", "importlib.machinery"})
_LOADER_PREFIXES: Final = ("runpy.", "importlib.machinery.")
_EXACT_LOADERS: Final = frozenset(
    {"importlib.util.spec_from_file_location", "importlib.util.module_from_spec"}
)
_NON_PATH_LITERALS: Final = (
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


def _is_dynamic_loader(name: str) -> bool:
    return name in _LOADER_MODULES or name.startswith(_LOADER_PREFIXES) or name in _EXACT_LOADERS


# ---------------------------------------------------------------------------- scopes


@dataclass(eq=False)
class _Scope:
    kind: Literal["module", "function", "class", "comprehension"]
    parent: _Scope | None
    imports: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    bindings: set[str] = field(default_factory=set[str])
    global_names: set[str] = field(default_factory=set[str])
    assignments: dict[str, list[cst.BaseExpression]] = field(
        default_factory=dict[str, list[cst.BaseExpression]]
    )
    path_annotated: set[str] = field(default_factory=set[str])
    path_names: set[str] = field(default_factory=set[str])


@dataclass(frozen=True)
class _Resolution:
    """What a name refers to: import targets, a builtin, or a local (unknown) value."""

    qualified: tuple[str, ...]
    builtin: bool
    from_import: bool


@dataclass(eq=False)
class _Reference:
    """A load of a name or of a pure attribute chain ``base.a.b``, with how it is used."""

    scope: _Scope
    names: list[str]
    nodes: list[cst.CSTNode]
    call: cst.Call | None = None
    subscript: cst.Subscript | None = None


@dataclass(eq=False)
class _WriteAccess:
    """``receiver.<method>`` where the method may write through pathlib."""

    scope: _Scope
    receiver: cst.BaseExpression
    method: str
    node: cst.CSTNode
    call: cst.Call | None


@dataclass(eq=False)
class _Pending:
    node: cst.CSTNode
    rule: str
    module: str
    form: str
    message: str


def _chain(expression: cst.BaseExpression) -> tuple[list[str], list[cst.CSTNode]] | None:
    """Flatten ``a.b.c`` into names and nodes (the base Name, then each attribute's Name)."""
    names: list[str] = []
    nodes: list[cst.CSTNode] = []
    current = expression
    while isinstance(current, cst.Attribute):
        names.append(current.attr.value)
        nodes.append(current.attr)
        current = current.value
    if not isinstance(current, cst.Name):
        return None
    names.append(current.value)
    nodes.append(current)
    names.reverse()
    nodes.reverse()
    return names, nodes


def _chain_parts(expression: cst.BaseExpression) -> Iterator[cst.CSTNode]:
    current = expression
    while isinstance(current, cst.Attribute):
        yield current
        yield current.attr
        current = current.value
    yield current


def _dotted_name(expression: cst.BaseExpression) -> str:
    if isinstance(expression, cst.Name):
        return expression.value
    if isinstance(expression, cst.Attribute):
        return f"{_dotted_name(expression.value)}.{expression.attr.value}"
    raise TypeError(f"not a dotted name: {type(expression).__name__}")


def _static_string(expression: cst.BaseExpression) -> str | None:
    """The value of a plain literal, an implicit concatenation of them, or a plain f-string."""
    if isinstance(expression, cst.SimpleString):
        value = expression.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(expression, cst.ConcatenatedString):
        left = _static_string(expression.left)
        right = _static_string(expression.right)
        return None if left is None or right is None else left + right
    if isinstance(expression, cst.FormattedString):
        parts: list[str] = []
        for part in expression.parts:
            if not isinstance(part, cst.FormattedStringText):
                return None
            parts.append(part.value.replace("{{", "{").replace("}}", "}"))
        return "".join(parts)
    return None


def _argument(call: cst.Call, position: int, keyword: str | None) -> cst.BaseExpression | None:
    """The argument passed at ``position`` or as ``keyword`` (``None`` when absent or unclear)."""
    index = 0
    for argument in call.args:
        if argument.star:
            return None  # *args / **kwargs: the position of what follows is unknown
        if argument.keyword is not None:
            if argument.keyword.value == keyword:
                return argument.value
            continue
        if index == position:
            return argument.value
        index += 1
    return None


# ---------------------------------------------------------------------------- the walk


class _Leave:
    """A stack marker: the walk has finished the children of ``node``."""

    __slots__ = ("node",)

    def __init__(self, node: cst.CSTNode) -> None:
        self.node = node


# Tokens and whitespace never hold a name; the walk does not descend into them.
_TRIVIA: Final = frozenset(
    cls
    for cls in vars(cst).values()
    if isinstance(cls, type)
    and issubclass(cls, cst.CSTNode)
    and (
        cls.__module__ in ("libcst._nodes.op", "libcst._nodes.whitespace")
        or cls.__name__.startswith(("Left", "Right"))
    )
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(kind: type) -> tuple[str, ...]:
    names = _CHILD_FIELDS.get(kind)
    if names is None:
        names = tuple(
            item.name
            for item in dataclasses.fields(kind)
            if not item.name.startswith(("whitespace", "lpar", "rpar", "leading_lines", "lines_after"))
            and item.name not in ("header", "footer", "trailing_whitespace", "semicolon", "comma", "newline")
        )
        _CHILD_FIELDS[kind] = names
    return names


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    children: list[cst.CSTNode] = []
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        if type(value) in (list, tuple):
            for item in value:
                if isinstance(item, cst.CSTNode) and type(item) not in _TRIVIA:
                    children.append(item)
        elif isinstance(value, cst.CSTNode) and type(value) not in _TRIVIA:
            children.append(value)
    return children


class _Collector:
    """Collects scopes, import findings and references; resolves nothing until the end."""

    def __init__(self, forbidden: Forbidden) -> None:
        self.forbidden = forbidden
        self.module_scope = _Scope("module", None)
        self.scope = self.module_scope
        self.imports_pathlib = False
        self.pending: list[_Pending] = []
        self.references: list[_Reference] = []
        self.write_accesses: list[_WriteAccess] = []
        self._handled: set[int] = set()
        self._scope_entries: dict[int, _Scope] = {}
        self._scope_stack: list[_Scope] = []
        self._call_of_func: dict[int, cst.Call] = {}
        self._type_checking_blocks: set[int] = set()
        self._type_checking_depth = 0
        self._handlers: dict[type, Callable[[Any], object] | None] = {}

    # -- the walk: pre-order, in source order, skipping tokens and whitespace

    def walk(self, module: cst.Module) -> None:
        """Visit every relevant node once; ``visit_<Type>`` returning False skips children."""
        stack: list[cst.CSTNode | _Leave] = [module]
        handlers = self._handlers
        while stack:
            item = stack.pop()
            if type(item) is _Leave:
                self._leave(item.node)
                continue
            node: cst.CSTNode = item  # pyright: ignore[reportAssignmentType] - narrowed by the type test
            kind = type(node)
            if kind not in handlers:
                handlers[kind] = getattr(self, f"visit_{kind.__name__}", None)
            handler = handlers[kind]
            if handler is not None and handler(node) is False:
                continue
            key = id(node)
            if key in self._scope_entries:
                self._scope_stack.append(self.scope)
                self.scope = self._scope_entries[key]
                stack.append(_Leave(node))
            if key in self._type_checking_blocks:
                self._type_checking_depth += 1
                stack.append(_Leave(node))
            children = _children(node)
            if children:
                stack.extend(reversed(children))

    def _leave(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self._type_checking_blocks and self._type_checking_depth:
            self._type_checking_blocks.discard(key)
            self._type_checking_depth -= 1
            return
        if key in self._scope_entries:
            self.scope = self._scope_stack.pop()

    # -- bindings

    def _bind(self, name: str, scope: _Scope | None = None) -> None:
        target = scope or self.scope
        if name in target.global_names:
            target = self.module_scope
        target.bindings.add(name)

    def _bind_import(self, name: str, qualified: str) -> None:
        target = self.module_scope if name in self.scope.global_names else self.scope
        target.imports.setdefault(name, []).append(qualified)

    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None = None) -> None:
        if isinstance(target, cst.Name):
            self._handled.add(id(target))
            self._bind(target.value)
            if value is not None:
                self.scope.assignments.setdefault(target.value, []).append(value)
        elif isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self._bind_target(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value)

    def _report(self, node: cst.CSTNode, rule: str, module: str, form: str, message: str) -> None:
        self.pending.append(_Pending(node, rule, module, form, message))

    def _import_form(self, form: str) -> str:
        return f"{form}:type-checking" if self._type_checking_depth else form

    def _report_import_target(self, node: cst.CSTNode, target: str, form: str) -> bool:
        """Report ``target`` if forbidden or a dynamic loader; return whether it was."""
        if self.forbidden.match(target) is not None:
            self._report(
                node,
                "IB001",
                target,
                self._import_form(form),
                f'host module "{target}" is outside the Workspace boundary',
            )
            return True
        if _is_dynamic_loader(target):
            self._report(
                node,
                "IB002",
                target,
                self._import_form("dynamic-loader"),
                f'"{target}" loads code dynamically and cannot be verified',
            )
            return True
        return False

    # -- imports

    def visit_Import(self, node: cst.Import) -> bool:
        return self._import(node.names)

    def visit_LazyImport(self, node: cst.LazyImport) -> bool:
        return self._import(node.names)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return self._import_from(node.relative, node.module, node.names)

    def visit_LazyImportFrom(self, node: cst.LazyImportFrom) -> bool:
        return self._import_from(node.relative, node.module, node.names)

    def _import(self, aliases: Sequence[cst.ImportAlias]) -> bool:
        for alias in aliases:
            target = _dotted_name(alias.name)
            if target == "pathlib" or target.startswith("pathlib."):
                self.imports_pathlib = True
            self._report_import_target(alias.name, target, "import")
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self._bind_import(alias.asname.name.value, target)
            else:
                head = target.split(".", 1)[0]
                self._bind_import(head, head)
        return False

    def _import_from(
        self,
        relative: Sequence[cst.Dot],
        module_node: cst.Attribute | cst.Name | None,
        names: Sequence[cst.ImportAlias] | cst.ImportStar,
    ) -> bool:
        if relative or module_node is None:
            # Relative imports never count; the names they bind are local values.
            if not isinstance(names, cst.ImportStar):
                for alias in names:
                    bound = alias.evaluated_alias or alias.evaluated_name
                    self._bind(bound.split(".", 1)[0])
            return False
        module = _dotted_name(module_node)
        if module == "pathlib" or module.startswith("pathlib."):
            self.imports_pathlib = True
        if isinstance(names, cst.ImportStar):
            self._report_import_target(module_node, module, "from-import")
            return False
        for alias in names:
            name = alias.evaluated_name
            target = f"{module}.{name}"
            self._report_import_target(alias.name, target, "from-import")
            self._bind_import(alias.evaluated_alias or name, target)
        return False

    # -- scopes

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._handled.add(id(node.name))
        self._bind(node.name.value)
        scope = _Scope("function", self.scope)
        self._bind_parameters(node.params, scope)
        self._scope_entries[id(node.body)] = scope

    def visit_Lambda(self, node: cst.Lambda) -> None:
        scope = _Scope("function", self.scope)
        self._bind_parameters(node.params, scope)
        self._scope_entries[id(node.body)] = scope

    def _bind_parameters(self, parameters: cst.Parameters, scope: _Scope) -> None:
        every: list[cst.Param] = [*parameters.posonly_params, *parameters.params, *parameters.kwonly_params]
        if isinstance(parameters.star_arg, cst.Param):
            every.append(parameters.star_arg)
        if parameters.star_kwarg is not None:
            every.append(parameters.star_kwarg)
        for parameter in every:
            self._handled.add(id(parameter.name))
            scope.bindings.add(parameter.name.value)
            if parameter.annotation is not None and self._annotates_path(parameter.annotation.annotation):
                scope.path_annotated.add(parameter.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._handled.add(id(node.name))
        self._bind(node.name.value)
        self._scope_entries[id(node.body)] = _Scope("class", self.scope)

    def _enter_comprehension(self, node: cst.CSTNode) -> None:
        self._scope_entries[id(node)] = _Scope("comprehension", self.scope)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._enter_comprehension(node)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._enter_comprehension(node)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._enter_comprehension(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._enter_comprehension(node)

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self._handled.add(id(item.name))
            self.scope.global_names.add(item.name.value)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            self._handled.add(id(item.name))
            self._bind(item.name.value)

    # -- binding statements

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind_target(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind_target(node.target, node.value)
        if isinstance(node.target, cst.Name) and self._annotates_path(node.annotation.annotation):
            self.scope.path_annotated.add(node.target.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind_target(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind_target(node.target, node.value)

    def visit_For(self, node: cst.For) -> None:
        self._bind_target(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind_target(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind_target(node.name)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._handled.add(id(node.keyword))

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self._bind_target(node.name)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self._bind_target(node.name)

    def visit_If(self, node: cst.If) -> None:
        if self._is_type_checking(node.test):
            self._type_checking_blocks.add(id(node.body))

    # -- references

    def visit_Call(self, node: cst.Call) -> None:
        self._call_of_func[id(node.func)] = node
        self._reference(node.func, call=node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._reference(node.value, subscript=node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in _WRITE_METHODS or node.attr.value == "open":
            self.write_accesses.append(
                _WriteAccess(
                    self.scope, node.value, node.attr.value, node.attr, self._call_of_func.get(id(node))
                )
            )
        self._handled.add(id(node.attr))
        if id(node) not in self._handled:
            self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self._handled:
            self._reference(node)

    def _reference(
        self,
        expression: cst.BaseExpression,
        *,
        call: cst.Call | None = None,
        subscript: cst.Subscript | None = None,
    ) -> None:
        chain = _chain(expression)
        if chain is None or id(expression) in self._handled:
            return
        self._handled.update(id(part) for part in _chain_parts(expression))
        names, nodes = chain
        self.references.append(_Reference(self.scope, names, nodes, call, subscript))

    # -- helpers that read the scopes built so far (imports precede their use)

    def _qualified_now(self, expression: cst.BaseExpression) -> tuple[str, ...]:
        chain = _chain(expression)
        if chain is None:
            return ()
        names, _ = chain
        resolution = resolve(self.scope, names[0])
        rest = "".join(f".{name}" for name in names[1:])
        if resolution.builtin:
            return (f"builtins.{names[0]}{rest}",)
        return tuple(f"{qualified}{rest}" for qualified in resolution.qualified)

    def _is_type_checking(self, test: cst.BaseExpression) -> bool:
        return any(name in _TYPE_CHECKING_NAMES for name in self._qualified_now(test))

    def _annotates_path(self, annotation: cst.BaseExpression) -> bool:
        if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
            return self._annotates_path(annotation.left) or self._annotates_path(annotation.right)
        if isinstance(annotation, cst.Subscript):
            wrapper = self._qualified_now(annotation.value)
            if any(name in ("typing.Optional", "typing.Union") for name in wrapper):
                return any(
                    isinstance(element.slice, cst.Index) and self._annotates_path(element.slice.value)
                    for element in annotation.slice
                )
            return False
        return any(name in _PATH_CLASSES for name in self._qualified_now(annotation))


def resolve(scope: _Scope, name: str) -> _Resolution:
    """Resolve ``name`` as seen from ``scope`` (class scopes are invisible to nested scopes)."""
    current: _Scope | None = scope
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
            return _Resolution(tuple(imported), builtin=False, from_import=True)
        if name in current.bindings:
            return _Resolution((), builtin=False, from_import=False)
        first = False
        current = current.parent
    return _Resolution((), builtin=True, from_import=False)


# ---------------------------------------------------------------------------- resolution


class _Resolver:
    """Turns the collected references and write accesses into findings."""

    def __init__(self, collector: _Collector) -> None:
        self.collector = collector
        self.forbidden = collector.forbidden

    def report(self, node: cst.CSTNode, rule: str, module: str, form: str, message: str) -> None:
        self.collector.pending.append(_Pending(node, rule, module, form, message))

    def run(self) -> None:
        for reference in self.collector.references:
            self._reference(reference)
        if self.forbidden.pathlib_write:
            self._compute_path_names()
            for access in self.collector.write_accesses:
                self._write_access(access)

    # -- names and attribute chains

    def _reference(self, reference: _Reference) -> None:
        resolution = resolve(reference.scope, reference.names[0])
        bases = [f"builtins.{reference.names[0]}"] if resolution.builtin else list(resolution.qualified)
        for base in bases:
            if resolution.from_import and (
                self.forbidden.match(base) is not None or _is_dynamic_loader(base)
            ):
                continue  # reported once, at the import that obtained it
            self._chain(reference, base)

    def _chain(self, reference: _Reference, base: str) -> None:
        names, nodes = reference.names, reference.nodes
        last = len(names) - 1
        qualified = base
        for index in range(len(names)):
            if index:
                qualified = f"{qualified}.{names[index]}"
            node = nodes[index]
            called = reference.call if index == last else None
            if self._special(reference, qualified, node, index, called):
                return
            if index and self.forbidden.match(qualified) is not None:
                self.report(
                    node,
                    "IB001",
                    qualified,
                    "attribute",
                    f'host API "{qualified}" is outside the Workspace boundary',
                )
                return
            if index and _is_dynamic_loader(qualified):
                self.report(
                    node, "IB002", qualified, "dynamic-loader", f'"{qualified}" loads code dynamically'
                )
                return

    def _special(
        self, reference: _Reference, qualified: str, node: cst.CSTNode, index: int, call: cst.Call | None
    ) -> bool:
        """Handle the names with their own rules; return whether the chain is settled."""
        if qualified == "builtins.open":
            if self.forbidden.match("builtins.open") is not None:
                self.report(
                    node,
                    "IB001",
                    "builtins.open",
                    "builtin-open",
                    "builtin open is outside the Workspace boundary",
                )
            return True
        if qualified in _DUNDER_IMPORTS:
            self._dynamic_import(node, call, "dunder-import", relative_level=True)
            return True
        if qualified == "importlib.import_module":
            self._dynamic_import(node, call, "import-module", relative_level=False)
            return True
        if qualified in ("builtins.exec", "builtins.eval"):
            if call is not None:
                form = qualified.rsplit(".", 1)[1]
                self.report(node, "IB002", "", form, f"{form}() runs code that cannot be verified")
            return True
        if qualified in ("builtins.__builtins__", "builtins.__dict__"):
            self.report(
                node, "IB002", "", "builtins-access", "access to the builtins namespace cannot be verified"
            )
            return True
        if qualified in ("builtins.getattr", "builtins.vars") and call is not None:
            self._builtins_lookup(reference.scope, node, call, is_getattr=qualified == "builtins.getattr")
            return True
        if qualified == "sys.modules":
            self._sys_modules(reference, node, index)
            return True
        return False

    def _dynamic_import(
        self, node: cst.CSTNode, call: cst.Call | None, form: str, *, relative_level: bool
    ) -> None:
        if call is None:
            self.report(
                node, "IB002", "", "dynamic-import", "a module loader used indirectly cannot be verified"
            )
            return
        argument = _argument(call, 0, "name")
        name = None if argument is None else _static_string(argument)
        if name is None:
            self.report(
                node, "IB002", "", "dynamic-import", "a module name computed at run time cannot be verified"
            )
            return
        if name.startswith("."):
            return  # relative: never counts
        if relative_level:
            level = _argument(call, 4, "level")
            if isinstance(level, cst.Integer) and level.evaluated_value != 0:
                return
        self._static_module(node, name, form)

    def _static_module(self, node: cst.CSTNode, name: str, form: str) -> None:
        if self.forbidden.match(name) is not None:
            self.report(node, "IB001", name, form, f'host module "{name}" is outside the Workspace boundary')
        elif _is_dynamic_loader(name):
            self.report(node, "IB002", name, "dynamic-loader", f'"{name}" loads code dynamically')

    def _builtins_lookup(self, scope: _Scope, node: cst.CSTNode, call: cst.Call, *, is_getattr: bool) -> None:
        target = _argument(call, 0, None)
        if target is None or not self._is_builtins_module(target, scope):
            return
        if not is_getattr:
            self.report(node, "IB002", "", "builtins-access", "vars(builtins) cannot be verified")
            return
        attribute = _argument(call, 1, None)
        name = None if attribute is None else _static_string(attribute)
        if name is None:
            self.report(
                node,
                "IB002",
                "",
                "builtins-access",
                "getattr on builtins with a computed name cannot be verified",
            )
        elif name == "open":
            if self.forbidden.match("builtins.open") is not None:
                self.report(
                    node,
                    "IB001",
                    "builtins.open",
                    "builtin-open",
                    "builtin open is outside the Workspace boundary",
                )
        elif name in ("__import__", "exec", "eval", "__dict__"):
            self.report(
                node, "IB002", "", "builtins-access", f"getattr(builtins, {name!r}) cannot be verified"
            )

    def _is_builtins_module(self, expression: cst.BaseExpression, scope: _Scope) -> bool:
        return "builtins" in self._qualified(expression, scope)

    def _sys_modules(self, reference: _Reference, node: cst.CSTNode, index: int) -> None:
        names = reference.names
        last = len(names) - 1
        key: cst.BaseExpression | None = None
        settled = False
        if index == last and reference.subscript is not None:
            elements = reference.subscript.slice
            if len(elements) == 1 and isinstance(elements[0].slice, cst.Index):
                key = elements[0].slice.value
            settled = True
        elif index + 1 == last and names[-1] == "get" and reference.call is not None:
            key = _argument(reference.call, 0, None)
            settled = True
        name = None if key is None else _static_string(key)
        if settled and name is not None:
            self._static_module(node, name, "sys-modules")
        else:
            self.report(node, "IB002", "", "dynamic-import", "use of sys.modules cannot be verified")

    # -- pathlib writes

    def _compute_path_names(self) -> None:
        scopes: dict[int, _Scope] = {}
        for access in self.collector.write_accesses:
            scopes[id(access.scope)] = access.scope
        for scope in scopes.values():
            scope.path_names = set(scope.path_annotated)
            changed = True
            while changed:
                changed = False
                for name, values in scope.assignments.items():
                    if name not in scope.path_names and any(self._is_path(value, scope) for value in values):
                        scope.path_names.add(name)
                        changed = True

    def _qualified(self, expression: cst.BaseExpression, scope: _Scope) -> tuple[str, ...]:
        chain = _chain(expression)
        if chain is None:
            return ()
        names, _ = chain
        resolution = resolve(scope, names[0])
        if not resolution.from_import:
            return ()
        rest = "".join(f".{name}" for name in names[1:])
        return tuple(f"{qualified}{rest}" for qualified in resolution.qualified)

    def _is_path_class(self, expression: cst.BaseExpression, scope: _Scope) -> bool:
        return any(name in _PATH_CLASSES for name in self._qualified(expression, scope))

    def _is_path(self, expression: cst.BaseExpression, scope: _Scope) -> bool:
        if isinstance(expression, cst.Name):
            return expression.value in scope.path_names
        if isinstance(expression, cst.Call):
            function = expression.func
            if self._is_path_class(function, scope):
                return True
            if isinstance(function, cst.Attribute):
                method = function.attr.value
                if method in ("cwd", "home") and self._is_path_class(function.value, scope):
                    return True
                if method in _PATH_DERIVATIONS:
                    return self._is_path(function.value, scope)
            return False
        if isinstance(expression, cst.BinaryOperation) and isinstance(expression.operator, cst.Divide):
            return self._is_path(expression.left, scope) or self._is_path(expression.right, scope)
        if isinstance(expression, cst.NamedExpr):
            return self._is_path(expression.value, scope)
        if isinstance(expression, cst.Attribute) and expression.attr.value == "parent":
            return self._is_path(expression.value, scope)
        if (
            isinstance(expression, cst.Subscript)
            and isinstance(expression.value, cst.Attribute)
            and expression.value.attr.value == "parents"
        ):
            return self._is_path(expression.value.value, scope)
        return False

    def _is_known_non_path(self, expression: cst.BaseExpression, scope: _Scope) -> bool:
        if isinstance(expression, _NON_PATH_LITERALS):
            return True
        if isinstance(expression, cst.Name):
            resolution = resolve(scope, expression.value)
            return resolution.from_import and not self._is_path_class(expression, scope)
        return False

    def _write_access(self, access: _WriteAccess) -> None:
        scope, receiver, method = access.scope, access.receiver, access.method
        on_class = self._is_path_class(receiver, scope)
        if on_class or self._is_path(receiver, scope):
            if method != "open":
                module = f"pathlib.Path.{method}"
                self.report(
                    access.node,
                    "IB001",
                    module,
                    "pathlib-write",
                    f"{module} writes outside the Workspace boundary",
                )
                return
            self._path_open(access, on_class)
            return
        if (
            self.collector.imports_pathlib
            and method in _UNKNOWN_RECEIVER_METHODS
            and not self._is_known_non_path(receiver, scope)
        ):
            self.report(
                access.node,
                "IB002",
                "",
                "pathlib-unknown-receiver",
                f".{method}() on a receiver of unknown type may write through pathlib",
            )

    def _path_open(self, access: _WriteAccess, on_class: bool) -> None:
        call = access.call
        if call is None:
            self.report(access.node, "IB002", "", "dynamic-open-mode", "Path.open referenced without a call")
            return
        mode = _argument(call, 1 if on_class else 0, "mode")
        if mode is None:
            return
        text = _static_string(mode)
        if text is None:
            self.report(access.node, "IB002", "", "dynamic-open-mode", "Path.open with a computed mode")
        elif any(flag in text for flag in "wax+"):
            self.report(
                access.node,
                "IB001",
                "pathlib.Path.open",
                "pathlib-write",
                f"Path.open in mode {text!r} writes",
            )


# ---------------------------------------------------------------------------- entry point


def _unparsable(message: str, line: int = 1, column: int = 1) -> list[RawFinding]:
    return [RawFinding("IB004", max(line, 1), max(column, 1), "", "unparsable-source", message)]


def _decode(source: bytes) -> str | list[RawFinding]:
    """Decode like the interpreter does (BOM, PEP 263 declaration, else UTF-8)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except (SyntaxError, LookupError) as error:
        return _unparsable(f"source cannot be decoded: {error}")
    try:
        return source.decode(encoding)
    except UnicodeDecodeError as error:
        line_start = source.rfind(b"\n", 0, error.start) + 1
        column = len(source[line_start : error.start].decode(encoding, "replace")) + 1
        line = source.count(b"\n", 0, error.start) + 1
        return _unparsable(f"source is not valid {encoding}: {error.reason}", line, column)


def _guard(source: bytes) -> list[RawFinding] | None:
    """Refuse input that could crash libcst's native parser; ``None`` when it is safe.

    The text is decoded first, so syntax-error columns count characters, not bytes.
    ``ast.parse`` runs at CPython's default recursion limit, whatever the caller set: input
    deeper than CPython accepts by default never reaches libcst, whose native parser can
    crash on it and slows down sharply on deep chains. Warnings are silenced (an invalid
    escape sequence is a DeprecationWarning, which ``-W error`` would turn into an error).
    """
    if len(source) > MAX_SOURCE_BYTES:
        return _unparsable("source file exceeds 4 MiB")
    text = _decode(source)
    if not isinstance(text, str):
        return text
    nul = text.find("\x00")
    if nul >= 0:
        line_start = text.rfind("\n", 0, nul) + 1
        return _unparsable("source contains a NUL byte", text.count("\n", 0, nul) + 1, nul - line_start + 1)
    caller_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_GUARD_RECURSION_LIMIT)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as error:
        return _unparsable(f"syntax error: {error.msg}", error.lineno or 1, error.offset or 1)
    except (RecursionError, MemoryError):
        return _unparsable("source is nested too deeply to parse safely")
    except ValueError as error:
        return _unparsable(f"source cannot be parsed: {error}")
    finally:
        sys.setrecursionlimit(caller_limit)
    return None


def _analyze(source: bytes, forbidden: Forbidden) -> list[RawFinding]:
    refused = _guard(source)
    if refused is not None:
        return refused
    caller_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(caller_limit, _WALK_RECURSION_LIMIT))
    try:
        return _parse_and_walk(source, forbidden)
    finally:
        sys.setrecursionlimit(caller_limit)


def _parse_and_walk(source: bytes, forbidden: Forbidden) -> list[RawFinding]:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        return _unparsable(f"syntax error: {error.message}", error.raw_line, error.raw_column + 1)
    except (UnicodeDecodeError, LookupError, SyntaxError, ValueError) as error:
        return _unparsable(f"source cannot be decoded: {error}")
    try:
        collector = _Collector(forbidden)
        collector.walk(module)
        _Resolver(collector).run()
        positions = start_positions(module, (pending.node for pending in collector.pending))
    except RecursionError:
        return _unparsable("source is nested too deeply to analyse")
    findings: list[RawFinding] = []
    for pending in collector.pending:
        line, column = positions.get(id(pending.node), (1, 1))
        findings.append(RawFinding(pending.rule, line, column, pending.module, pending.form, pending.message))
    return findings


def _run_with_deep_stack(function: Callable[[], list[RawFinding]]) -> list[RawFinding]:
    """Run ``function`` in a thread with a large C stack (the libcst walk is recursive)."""
    outcome: list[list[RawFinding]] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(function())
        except BaseException as error:  # re-raised in the calling thread
            failure.append(error)

    previous = threading.stack_size(_WALK_STACK_BYTES)
    try:
        worker = threading.Thread(target=target, name="harness-import-boundary-walk")
        worker.start()
    finally:
        threading.stack_size(previous)
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]


def analyze_source(source: bytes, forbidden: Forbidden) -> list[RawFinding]:
    """Analyse one file's bytes; return its raw findings (IB001, IB002, IB004), unsorted.

    Pure: no I/O. Never raises for any input bytes: unparsable input is an IB004 finding.
    """
    return _run_with_deep_stack(lambda: _analyze(source, forbidden))
