"""The walk: one pass over the libcst tree collecting scopes, bindings and references.

Nothing is resolved here (forbidden imports and the purely syntactic rules excepted, which
are reported where they stand); the resolver runs once the whole module is known, so
resolution, and the allow-list verdicts, are flow-insensitive per scope. Every identifier
is NFKC-normalised as the interpreter normalises it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import libcst as cst

from harness_import_boundary._annotations import (
    TYPE_ALIAS_NAMES,
    TYPE_BUILDERS,
    field_type_arguments,
    forward_references,
    is_type_display,
    strings_as_code,
)
from harness_import_boundary._import_statements import ImportSite, ImportStatements
from harness_import_boundary._model import FilePolicy
from harness_import_boundary._syntax import (
    DICT_LOOKUPS,
    DYNAMIC_ATTRIBUTE_METHODS,
    INTROSPECTION_ATTRIBUTES,
    PATH_CLASSES,
    TYPE_CHECKING_NAMES,
    WRITE_METHODS,
    PendingFinding,
    Reference,
    Scope,
    WriteAccess,
    bind_name,
    chain_parts,
    flatten_chain,
    identifier,
    introspection_message,
    is_private_name,
    positional_arguments,
    qualified_names,
    static_string,
)
from harness_import_boundary._tree import walked_children

__all__ = ["Collector", "NamedAccess"]


@dataclass(eq=False)
class NamedAccess:
    """An attribute read by a constant name: ``receiver.<name>`` in another spelling.

    ``getattr(x, "n")``, ``x.__dict__["n"]``, ``x.__getattribute__("n")`` and
    ``operator.attrgetter("n")`` (no receiver) all land here and get the attribute rules.
    """

    scope: Scope
    statement: int
    receiver: cst.BaseExpression | None
    name: str
    node: cst.CSTNode


class _Leave:
    """A stack marker: the walk has finished the children of ``node``."""

    __slots__ = ("node",)

    def __init__(self, node: cst.CSTNode) -> None:
        self.node = node


class Collector:
    """Collects scopes, import findings and references; resolves nothing until the end."""

    def __init__(self, policy: FilePolicy) -> None:
        self.forbidden = policy.forbidden
        self.allow = policy.allow
        self.module_scope = Scope("module", None)
        self.scope = self.module_scope
        self.pending: list[PendingFinding] = []
        self.imports = ImportStatements(policy, self.pending)
        """What the import statements bind and load."""
        self.references: list[Reference] = []
        self.write_accesses: list[WriteAccess] = []
        self.named_accesses: list[NamedAccess] = []
        self.private_accesses: list[NamedAccess] = []
        """Private and dunder attributes read on a receiver the resolver must place."""
        self.declared_attributes: set[str] = set()
        """Names the module's classes declare: in a class body, ``__slots__`` or ``self.x = …``."""
        self.mutations: list[tuple[Scope, int, cst.Attribute]] = []
        self.statement = 0
        """The index of the top-level statement being walked (findings are positioned by it)."""
        self.position_alias: dict[int, cst.CSTNode] = {}
        """Nodes parsed from strings (not in the module): where their findings are placed."""
        self._analysed_strings: set[int] = set()
        self._dict_lookups: set[int] = set()
        """``x.__dict__`` nodes used only for a key lookup or a membership test."""
        self.dict_values: set[int] = set()
        """``__dict__`` attribute names reported here as values (the resolver does not repeat them)."""
        self._handled: set[int] = set()
        self._scope_entries: dict[int, Scope] = {}
        self._scope_stack: list[Scope] = []
        self._call_of_func: dict[int, cst.Call] = {}
        self._type_checking_blocks: set[int] = set()
        self._type_checking_depth = 0
        self._annotation_blocks: set[int] = set()
        self._annotation_depth = 0
        """Above zero while the walk is inside an annotation or a field type (checked as code)."""
        self._handlers: dict[type, Callable[[Any], object] | None] = {}

    # -- the walk: pre-order, in source order, skipping tokens and whitespace

    def walk(self, module: cst.Module) -> None:
        """Visit every relevant node once, statement by statement, in source order."""
        # The module's only walked children are its statements (header and footer are trivia).
        for index, statement in enumerate(module.body):
            self.statement = index
            self._walk_from(statement)

    def _walk_from(self, top: cst.CSTNode) -> None:
        """Pre-order walk below ``top``; ``visit_<Type>`` returning False skips children."""
        stack: list[cst.CSTNode | _Leave] = [top]
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
            key = id(node)
            # A type expression registered before it is reached is inside its own block; an
            # Annotation registers itself when visited, and only its children are inside.
            typed = key in self._annotation_blocks
            self._annotation_depth += typed
            if handler is not None and handler(node) is False:
                if typed:
                    self._annotation_blocks.discard(key)
                    self._annotation_depth -= 1
                continue
            if key in self._scope_entries:
                self._scope_stack.append(self.scope)
                self.scope = self._scope_entries[key]
                stack.append(_Leave(node))
            if key in self._type_checking_blocks:
                self._type_checking_depth += 1
                stack.append(_Leave(node))
            if key in self._annotation_blocks:
                self._annotation_depth += not typed
                stack.append(_Leave(node))
            children = walked_children(node)
            if children:
                stack.extend(reversed(children))

    def _leave(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self._annotation_blocks and self._annotation_depth:
            self._annotation_blocks.discard(key)
            self._annotation_depth -= 1
            return
        if key in self._type_checking_blocks and self._type_checking_depth:
            self._type_checking_blocks.discard(key)
            self._type_checking_depth -= 1
            return
        if key in self._scope_entries:
            self.scope = self._scope_stack.pop()

    # -- bindings

    def _bind(self, name: str) -> None:
        bind_name(self.scope, self.module_scope, name)

    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None = None) -> None:
        if isinstance(target, cst.Name):
            self._handled.add(id(target))
            self._bind(target.value)
            if self.scope.kind == "class" and identifier(target.value) in INTROSPECTION_ATTRIBUTES:
                # A field named so makes msgspec read that attribute (convert, from_attributes).
                self._introspection(target, identifier(target.value))
            if value is not None:
                self.scope.assignments.setdefault(identifier(target.value), []).append(value)
        elif isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self._bind_target(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value)
        elif isinstance(target, cst.Attribute):
            self.mutations.append((self.scope, self.statement, target))
            if isinstance(target.value, cst.Name) and identifier(target.value.value) in self.scope.receivers:
                self.declared_attributes.add(identifier(target.attr.value))

    def _mutated(self, target: cst.BaseExpression) -> None:
        """Record attribute targets of statements that store or delete without binding a name."""
        if isinstance(target, cst.Attribute):
            self.mutations.append((self.scope, self.statement, target))
        elif isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self._mutated(element.value)
        elif isinstance(target, cst.StarredElement):
            self._mutated(target.value)

    def _report(self, node: cst.CSTNode, rule: str, module: str, form: str, message: str) -> None:
        self.pending.append(PendingFinding(node, self.statement, rule, module, form, message))

    # -- imports (see _import_statements)

    def _site(self) -> ImportSite:
        return ImportSite(self.scope, self.module_scope, self.statement, self._type_checking_depth > 0)

    def visit_Import(self, node: cst.Import) -> bool:
        self.imports.import_modules(node.names, self._site())
        return False

    def visit_LazyImport(self, node: cst.LazyImport) -> bool:
        self.imports.import_modules(node.names, self._site())
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self.imports.import_from(node, self._site())
        return False

    def visit_LazyImportFrom(self, node: cst.LazyImportFrom) -> bool:
        self.imports.import_from(node, self._site())
        return False

    def _introspection(self, node: cst.CSTNode, name: str) -> None:
        self._report(node, "IB002", "", "introspection", introspection_message(name))

    # -- scopes

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._handled.add(id(node.name))
        self._bind(node.name.value)
        self.scope.definitions.add(identifier(node.name.value))
        scope = Scope("function", self.scope)
        self._bind_parameters(node.params, scope)
        self._scope_entries[id(node.body)] = scope
        if self.scope.kind == "class" and not _is_static(node, self.scope):
            first = [*node.params.posonly_params, *node.params.params][:1]
            scope.receivers.update(identifier(parameter.name.value) for parameter in first)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        scope = Scope("function", self.scope)
        self._bind_parameters(node.params, scope)
        self._scope_entries[id(node.body)] = scope

    def _bind_parameters(self, parameters: cst.Parameters, scope: Scope) -> None:
        every: list[cst.Param] = [*parameters.posonly_params, *parameters.params, *parameters.kwonly_params]
        if isinstance(parameters.star_arg, cst.Param):
            every.append(parameters.star_arg)
        if parameters.star_kwarg is not None:
            every.append(parameters.star_kwarg)
        for parameter in every:
            self._handled.add(id(parameter.name))
            name = identifier(parameter.name.value)
            scope.bindings.add(name)
            if parameter.annotation is not None:
                scope.narrowed.setdefault(name, []).append(parameter.annotation.annotation)
                if _annotates_path(parameter.annotation.annotation, self.scope):
                    scope.path_annotated.add(name)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._handled.add(id(node.name))
        self._bind(node.name.value)
        self.scope.definitions.add(identifier(node.name.value))
        self.scope.classes.add(identifier(node.name.value))
        self._scope_entries[id(node.body)] = Scope("class", self.scope)
        for base in node.bases:
            if base.keyword is None and not base.star:
                # Generic bases (Mapping[str, "JsonValue"]) are type expressions: checked as code.
                self._type_expression(base.value)

    def _type_expression(self, expression: cst.BaseExpression) -> None:
        """A type written outside an annotation: its strings are walked as code, like an annotation's."""
        self._annotation_blocks.add(id(expression))
        self._annotation_code(expression, 0, None)

    def _enter_comprehension(self, node: cst.CSTNode) -> None:
        self._scope_entries[id(node)] = Scope("comprehension", self.scope)

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
            self.scope.global_names.add(identifier(item.name.value))

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            self._handled.add(id(item.name))
            self._bind(item.name.value)

    # -- binding statements

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind_target(target.target, node.value)
            if self.scope.kind == "class" and isinstance(target.target, cst.Name):
                self._declare(identifier(target.target.value), node.value)

    def _declare(self, name: str, value: cst.BaseExpression | None) -> None:
        """A class body binds ``name``; its ``__slots__`` declare the strings they hold."""
        self.declared_attributes.add(name)
        if name != "__slots__" or value is None:
            return
        elements = (
            [item.value for item in value.elements] if isinstance(value, cst.Tuple | cst.List) else [value]
        )
        for element in elements:
            text = static_string(element)
            if text is not None:
                self.declared_attributes.add(text)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind_target(node.target, node.value)
        if isinstance(node.target, cst.Name):
            name = identifier(node.target.value)
            self.scope.narrowed.setdefault(name, []).append(node.annotation.annotation)
            if self.scope.kind == "class":
                self._declare(name, node.value)
            if node.value is not None and any(
                alias in TYPE_ALIAS_NAMES for alias in qualified_names(self.scope, node.annotation.annotation)
            ):
                self._type_expression(node.value)
            if _annotates_path(node.annotation.annotation, self.scope):
                self.scope.path_annotated.add(name)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind_target(node.target)

    def visit_Del(self, node: cst.Del) -> None:
        self._mutated(node.target)

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

    def visit_MatchKeywordElement(self, node: cst.MatchKeywordElement) -> None:
        """``case C(name=…)`` reads the attribute ``name`` of the subject."""
        self._handled.add(id(node.key))
        access = NamedAccess(self.scope, self.statement, None, identifier(node.key.value), node.key)
        self.named_accesses.append(access)

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self._bind_target(node.name)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self._bind_target(node.name)

    def visit_If(self, node: cst.If) -> None:
        if _is_type_checking(node.test, self.scope):
            self._type_checking_blocks.add(id(node.body))

    # -- references

    # -- strings that become code (see _annotations)

    def visit_Annotation(self, node: cst.Annotation) -> None:
        self._annotation_blocks.add(id(node))
        self._annotation_code(node.annotation, 0, None)

    def _annotation_code(self, expression: cst.BaseExpression, depth: int, place: cst.CSTNode | None) -> None:
        """Walk the strings of a type expression as the code they become when evaluated."""
        for string, code in strings_as_code(expression, depth, self.scope, self._analysed_strings):
            at = place if place is not None else string
            if isinstance(code, str):
                self._report(at, "IB002", "", "string-annotation", code)
                continue
            self._annotation_depth += 1
            try:
                self._walk_from(code)
            finally:
                self._annotation_depth -= 1
            _place_at(code, at, self.position_alias)
            self._annotation_code(code, depth + 1, at)

    def _type_builder(self, call: cst.Call) -> None:
        """Field types given to a type built at run time are evaluated like annotations."""
        for argument in field_type_arguments(call):
            if argument.star or not is_type_display(argument.value, self.scope):
                self._report(
                    call.func,
                    "IB002",
                    "",
                    "dynamic-type",
                    "a type built from computed fields may carry string types that are evaluated later",
                )
                return
            self._type_expression(argument.value)

    def visit_Call(self, node: cst.Call) -> None:
        self._call_of_func[id(node.func)] = node
        qualified = qualified_names(self.scope, node.func)
        if any(name in TYPE_BUILDERS for name in qualified) and (
            "builtins.type" not in qualified
            or len(node.args) > 1
            or any(argument.star for argument in node.args)
        ):
            self._type_builder(node)
        function = node.func
        if self.allow is not None:
            self._narrowing_call(node, qualified)
        if isinstance(function, cst.Attribute) and identifier(function.attr.value) in DICT_LOOKUPS:
            arguments = positional_arguments(node)
            if _is_dict_attribute(function.value):
                self._dict_key(function.value, arguments[0] if arguments else None)
            elif arguments:
                self._namespace_key(arguments[0])
        self._reference(node.func, call=node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        key: cst.BaseExpression | None = None
        if len(node.slice) == 1:
            index = node.slice[0].slice
            key = index.value if isinstance(index, cst.Index) else None
        if _is_dict_attribute(node.value):
            self._dict_key(node.value, key)
        elif key is not None:
            self._namespace_key(key)
        if self.allow is not None and not self._annotation_depth:
            self._forward_references(node.value, [element.slice for element in node.slice])
        self._reference(node.value, subscript=node)

    def _forward_references(self, base: cst.BaseExpression, arguments: Sequence[cst.CSTNode]) -> None:
        """Outside an annotation a string in a typing subscript is a forward reference: a value
        that carries code to whatever evaluates it later, where this checker cannot follow."""
        for string in forward_references(base, arguments, self.scope):
            self._report(
                string,
                "IB002",
                "",
                "forward-reference",
                "a string in a typing subscript outside an annotation is a forward reference "
                "evaluated as code later; it cannot be verified",
            )

    # -- what a value is known to be

    def _narrowing_call(self, node: cst.Call, qualified: tuple[str, ...]) -> None:
        """``isinstance(x, C)`` narrows ``x``; ``C.__getitem__("…")`` is ``C["…"]``."""
        if "builtins.isinstance" in qualified:
            arguments = positional_arguments(node) or []
            if len(arguments) == 2 and isinstance(arguments[0], cst.Name):
                self.scope.narrowed.setdefault(identifier(arguments[0].value), []).append(arguments[1])
        function = node.func
        if (
            not self._annotation_depth
            and isinstance(function, cst.Attribute)
            and identifier(function.attr.value) in ("__getitem__", "__class_getitem__")
        ):
            self._forward_references(function.value, [argument.value for argument in node.args])

    def _namespace_key(self, key: cst.BaseExpression) -> None:
        """A lookup by a name like ``"__builtins__"`` only ever reads a namespace."""
        name = static_string(key)
        if name is not None and name in INTROSPECTION_ATTRIBUTES:
            self._introspection(key, name)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for target in node.comparisons:
            if isinstance(target.operator, cst.In | cst.NotIn) and _is_dict_attribute(target.comparator):
                self._dict_lookups.add(id(target.comparator))
        subject = _type_of_name(node.left, self.scope) if self.allow is not None else None
        if subject is not None:
            # type(x) is C, type(x) is not C, type(x) == C: x is tested against C
            for target in node.comparisons:
                if isinstance(target.operator, cst.Is | cst.IsNot | cst.Equal | cst.NotEqual):
                    self.scope.narrowed.setdefault(subject, []).append(target.comparator)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        name = identifier(node.attr.value)
        if name in WRITE_METHODS or name == "open":
            self.write_accesses.append(
                WriteAccess(
                    self.scope, self.statement, node.value, name, node.attr, self._call_of_func.get(id(node))
                )
            )
        if name in INTROSPECTION_ATTRIBUTES:
            self._introspection(node.attr, name)
        elif name in DYNAMIC_ATTRIBUTE_METHODS:
            self._attribute_method(node, name)
        elif name == "__dict__":
            if id(node) not in self._dict_lookups:
                # A namespace held as a value can be read later by any key (d["__subclasses__"]).
                self.dict_values.add(id(node.attr))
                self._dynamic_attribute(
                    node.attr, "a __dict__ used as a value can be read by names that cannot be verified"
                )
        elif self.allow is not None and is_private_name(name):
            self.private_accesses.append(NamedAccess(self.scope, self.statement, node.value, name, node.attr))
        self._handled.add(id(node.attr))
        if id(node) not in self._handled:
            self._reference(node)

    def _attribute_method(self, node: cst.Attribute, name: str) -> None:
        """``x.__getattribute__("n")`` reads ``n``; any other use of the method is dynamic."""
        call = self._call_of_func.get(id(node))
        arguments = None if call is None else positional_arguments(call)
        attribute = static_string(arguments[-1]) if arguments else None
        if attribute is None:
            self._dynamic_attribute(node.attr, f"{name} with a computed name cannot be verified")
            return
        receiver = arguments[0] if arguments and len(arguments) > 1 else node.value
        self.named_accesses.append(NamedAccess(self.scope, self.statement, receiver, attribute, node.attr))

    def _dict_key(self, dictionary: cst.Attribute, key: cst.BaseExpression | None) -> None:
        """``x.__dict__[key]``: a constant key is the attribute ``x.<key>``; any other is dynamic."""
        self._dict_lookups.add(id(dictionary))
        name = None if key is None else static_string(key)
        if name is None:
            self._dynamic_attribute(
                dictionary.attr, "a __dict__ lookup with a computed key cannot be verified"
            )
        else:
            access = NamedAccess(self.scope, self.statement, dictionary.value, name, dictionary.attr)
            self.named_accesses.append(access)

    def _dynamic_attribute(self, node: cst.CSTNode, message: str) -> None:
        self._report(node, "IB002", "", "dynamic-attribute", message)

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
        chain = flatten_chain(expression)
        if chain is None or id(expression) in self._handled:
            return
        self._handled.update(id(part) for part in chain_parts(expression))
        names, nodes = chain
        self.references.append(Reference(self.scope, self.statement, names, nodes, call, subscript))


def _is_dict_attribute(expression: cst.BaseExpression) -> TypeGuard[cst.Attribute]:
    return isinstance(expression, cst.Attribute) and identifier(expression.attr.value) == "__dict__"


# -- questions about the scopes built so far (imports precede their use)


def _is_static(node: cst.FunctionDef, scope: Scope) -> bool:
    """A ``staticmethod``'s first parameter is an argument like any other, not the instance."""
    decorators = (qualified_names(scope, decorator.decorator) for decorator in node.decorators)
    return any("builtins.staticmethod" in qualified for qualified in decorators)


def _type_of_name(expression: cst.BaseExpression, scope: Scope) -> str | None:
    """``x`` for a call of the builtin ``type(x)``."""
    if (
        isinstance(expression, cst.Call)
        and len(expression.args) == 1
        and isinstance(expression.args[0].value, cst.Name)
        and "builtins.type" in qualified_names(scope, expression.func)
    ):
        return identifier(expression.args[0].value.value)
    return None


def _is_type_checking(test: cst.BaseExpression, scope: Scope) -> bool:
    return any(name in TYPE_CHECKING_NAMES for name in qualified_names(scope, test))


def _annotates_path(annotation: cst.BaseExpression, scope: Scope) -> bool:
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return _annotates_path(annotation.left, scope) or _annotates_path(annotation.right, scope)
    if isinstance(annotation, cst.Subscript):
        wrapper = qualified_names(scope, annotation.value)
        if any(name in ("typing.Optional", "typing.Union") for name in wrapper):
            return any(
                isinstance(element.slice, cst.Index) and _annotates_path(element.slice.value, scope)
                for element in annotation.slice
            )
        return False
    return any(name in PATH_CLASSES for name in qualified_names(scope, annotation))


def _place_at(parsed: cst.CSTNode, at: cst.CSTNode, alias: dict[int, cst.CSTNode]) -> None:
    """Findings in a node parsed from a string are placed at the string (``alias`` records it)."""
    stack: list[cst.CSTNode] = [parsed]
    while stack:
        node = stack.pop()
        alias[id(node)] = at
        stack.extend(node.children)
