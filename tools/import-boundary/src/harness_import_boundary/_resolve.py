"""Resolution: turns the collected imports, references and attribute accesses into findings.

The allow-list decides here, once the whole module is known: every import, every attribute
chain on an imported name, and every module used as a value.
"""

from __future__ import annotations

import libcst as cst

from harness_import_boundary._allow import Verdict
from harness_import_boundary._collect import Collector, ImportCheck
from harness_import_boundary._syntax import (
    ATTRIBUTE_BY_NAME,
    BUILTIN_NAMES,
    DANGEROUS_BUILTINS,
    DUNDER_IMPORTS,
    DYNAMIC_ATTRIBUTE_METHODS,
    INTROSPECTION_ATTRIBUTES,
    NAME_GETTERS,
    NON_PATH_LITERALS,
    PATH_CLASSES,
    PATH_DERIVATIONS,
    UNKNOWN_RECEIVER_METHODS,
    WRITE_METHODS,
    PendingFinding,
    Reference,
    Scope,
    WriteAccess,
    binding_scope,
    call_argument,
    flatten_chain,
    has_star_arguments,
    identifier,
    introspection_message,
    is_dynamic_loader,
    is_private_name,
    positional_arguments,
    resolve,
    static_string,
)

__all__ = ["Resolver"]


class Resolver:
    """Turns the collected references and write accesses into findings."""

    def __init__(self, collector: Collector) -> None:
        self.collector = collector
        self.forbidden = collector.forbidden
        self.allow = collector.allow
        self.module_paths = frozenset(collector.module_paths)
        self.refused = collector.refused_bindings
        self.statement = 0
        """The top-level statement of the record being resolved (findings carry it)."""

    def report(self, node: cst.CSTNode, rule: str, module: str, form: str, message: str) -> None:
        self.collector.pending.append(PendingFinding(node, self.statement, rule, module, form, message))

    def run(self) -> None:
        for check in self.collector.import_checks:
            self.statement = check.statement
            self._import_check(check)
        for reference in self.collector.references:
            self.statement = reference.statement
            self._reference(reference)
        for access in self.collector.named_accesses:
            self.statement = access.statement
            self._named_access(access.scope, access.receiver, access.name, access.node)
        for access in self.collector.private_accesses:
            self.statement = access.statement
            self._private_access(access.scope, access.receiver, access.name, access.node)
        if self.allow is not None:
            for scope, statement, target in self.collector.mutations:
                self.statement = statement
                self._mutation(scope, target)
        if self.forbidden.pathlib_write:
            self._compute_path_names()
            for write in self.collector.write_accesses:
                self.statement = write.statement
                self._write_access(write)

    # -- the allow-list

    def _verdict(self, target: str) -> Verdict:
        assert self.allow is not None, "verdicts are asked for only with an allow-list"
        return self.allow.classify(target, self.module_paths)

    def _not_allowed(self, node: cst.CSTNode, target: str, form: str) -> None:
        self.report(node, "IB001", target, form, f'"{target}" is not on the import allow-list')

    def _import_check(self, check: ImportCheck) -> None:
        verdict = self._verdict(check.target)
        if verdict is Verdict.REFUSED or (check.kind == "star" and verdict is not Verdict.ALLOWED):
            self._not_allowed(check.node, check.target, check.form)
            if check.bound is not None:
                self.refused.add(check.bound)
        elif check.kind == "star":
            self.report(
                check.node,
                "IB002",
                check.target,
                "star-import",
                "a star import binds names that cannot be verified",
            )
        elif check.renamed and verdict is Verdict.NAMESPACE:
            # Under its own name the module is known wherever it is re-exported (x.trio.…);
            # under another, its refused names would pass as the attributes of a project module.
            self.report(
                check.node,
                "IB002",
                check.target,
                "module-value",
                f'the partly allowed module "{check.target}" bound under another name escapes the allow-list',
            )

    def _is_module_value(self, qualified: str) -> bool:
        return qualified in self.collector.module_targets or self._verdict(qualified) is Verdict.NAMESPACE

    def _module_value(self, node: cst.CSTNode, qualified: str) -> None:
        self.report(
            node,
            "IB002",
            qualified,
            "module-value",
            f'the module "{qualified}" used as a value escapes the allow-list',
        )

    def _mutation(self, scope: Scope, target: cst.Attribute) -> None:
        chain = flatten_chain(target)
        if chain is None:
            return
        names, nodes = chain
        resolution = resolve(scope, names[0])
        if not resolution.from_import or any(base in self.refused for base in resolution.qualified):
            return
        qualified = ".".join([resolution.qualified[0], *names[1:]])
        self.report(
            nodes[-1],
            "IB002",
            qualified,
            "module-mutation",
            f'assigning "{qualified}" changes an imported module and cannot be verified',
        )

    # -- names and attribute chains

    def _reference(self, reference: Reference) -> None:
        resolution = resolve(reference.scope, reference.names[0])
        bases = [f"builtins.{reference.names[0]}"] if resolution.builtin else list(resolution.qualified)
        for base in bases:
            if resolution.from_import and (self.forbidden.match(base) is not None or is_dynamic_loader(base)):
                continue  # reported once, at the import that obtained it
            # An import the allow-list refused is reported at the import; its uses still get
            # the deny rules (``builtins.open`` after ``import builtins``), not the allow-list.
            checked = resolution.from_import and base not in self.refused
            known = resolution.from_import or reference.names[0] in BUILTIN_NAMES
            self._chain(reference, base, allow_checked=checked, known_base=known)

    def _chain(self, reference: Reference, base: str, *, allow_checked: bool, known_base: bool) -> None:
        """Walk ``base.a.b…``: special names, the allow-list, ``__dict__`` and the deny rules.

        ``known_base`` says the base is an import or a real builtin (a module, class or
        function whose ``__dict__`` is a namespace), not an unbound name.
        """
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
            if self.allow is not None and allow_checked and self._allow_chain(qualified, node, index == last):
                return
            if (
                index
                and names[index] == "__dict__"
                and known_base
                and id(node) not in self.collector.dict_values
            ):
                self._namespace_dict(node, qualified)
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
            if index and is_dynamic_loader(qualified):
                self.report(
                    node, "IB002", qualified, "dynamic-loader", f'"{qualified}" loads code dynamically'
                )
                return

    def _allow_chain(self, qualified: str, node: cst.CSTNode, last: bool) -> bool:
        """Apply the allow-list to one step of a chain on an import; return whether it is settled."""
        if self.forbidden.match(qualified) is not None or is_dynamic_loader(qualified):
            return False  # the deny rules report it
        verdict = self._verdict(qualified)
        if verdict is Verdict.REFUSED:
            self._not_allowed(node, qualified, "attribute")
            return True
        if last and self._is_module_value(qualified):
            self._module_value(node, qualified)
            return True
        return False

    def _namespace_dict(self, node: cst.CSTNode, qualified: str) -> None:
        self.report(
            node,
            "IB002",
            "",
            "dynamic-attribute",
            f'"{qualified}" exposes a module or builtin namespace and cannot be verified',
        )

    def _builtin_open(self, node: cst.CSTNode) -> None:
        """Report ``open`` reached through builtins, unless the configuration allows it."""
        if self.forbidden.match("builtins.open") is not None:
            message = "builtin open is outside the Workspace boundary"
            self.report(node, "IB001", "builtins.open", "builtin-open", message)

    def _special(
        self, reference: Reference, qualified: str, node: cst.CSTNode, index: int, call: cst.Call | None
    ) -> bool:
        """Handle the names with their own rules; return whether the chain is settled."""
        if qualified == "builtins.open":
            self._builtin_open(node)
            return True
        if qualified in DUNDER_IMPORTS:
            self._dynamic_import(node, call, "dunder-import", relative_level=True)
            return True
        if qualified == "importlib.import_module":
            self._dynamic_import(node, call, "import-module", relative_level=False)
            return True
        if qualified in ("builtins.exec", "builtins.eval"):
            form = qualified.rsplit(".", 1)[1]
            if call is not None:
                self.report(node, "IB002", "", form, f"{form}() runs code that cannot be verified")
            else:
                self.report(
                    node, "IB002", "", form, f"{form} used as a value runs code that cannot be verified"
                )
            return True
        if qualified in ("builtins.__builtins__", "builtins.__dict__"):
            # The builtins namespace has its own form; the walk's "used as a value" gives way.
            self.collector.pending[:] = [item for item in self.collector.pending if item.node is not node]
            self.report(
                node, "IB002", "", "builtins-access", "access to the builtins namespace cannot be verified"
            )
            return True
        if qualified in ATTRIBUTE_BY_NAME:
            self._attribute_by_name(reference.scope, node, call, qualified)
            return True
        if (
            qualified == "builtins.vars"
            and call is not None
            and self._builtins_argument(call, reference.scope)
        ):
            self.report(node, "IB002", "", "builtins-access", "vars(builtins) cannot be verified")
            return True
        if qualified.startswith("builtins.") and qualified[len("builtins.") :] in DANGEROUS_BUILTINS:
            name = qualified[len("builtins.") :]
            self.report(
                node,
                "IB002",
                "",
                "dangerous-builtin",
                f"builtin {name} compiles or runs code, reaches a namespace or does console I/O",
            )
            return True
        if qualified in NAME_GETTERS:
            self._name_getter(reference.scope, node, call, qualified)
            return True
        if qualified == "msgspec.convert":
            self._convert(node, call)
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
        argument = call_argument(call, 0, "name")
        name = None if argument is None else static_string(argument)
        if name is None:
            self.report(
                node, "IB002", "", "dynamic-import", "a module name computed at run time cannot be verified"
            )
            return
        relative = name.startswith(".")
        if relative_level:
            level = call_argument(call, 4, "level")
            relative = relative or (isinstance(level, cst.Integer) and level.evaluated_value != 0)
        if relative:
            if self.allow is not None:  # with an allow-list, nothing is left uncounted
                self.report(
                    node,
                    "IB002",
                    "",
                    "dynamic-import",
                    "a relative module loaded at run time cannot be verified",
                )
            return
        self._static_module(node, name, form)

    def _static_module(self, node: cst.CSTNode, name: str, form: str) -> None:
        if self.forbidden.match(name) is not None:
            self.report(node, "IB001", name, form, f'host module "{name}" is outside the Workspace boundary')
        elif is_dynamic_loader(name):
            self.report(node, "IB002", name, "dynamic-loader", f'"{name}" loads code dynamically')
        elif self.allow is None:
            return
        elif self._verdict(name) is Verdict.REFUSED:
            self._not_allowed(node, name, form)
        else:
            self._module_value(node, name)

    def _attribute_by_name(
        self, scope: Scope, node: cst.CSTNode, call: cst.Call | None, qualified: str
    ) -> None:
        """``getattr``, ``setattr`` and ``delattr``: a constant name is an attribute access."""
        function = qualified.rsplit(".", 1)[1]
        arguments = None if call is None else positional_arguments(call)
        if arguments is None or len(arguments) < 2:
            self._dynamic_attribute(node, f"{function} used without a constant name cannot be verified")
            return
        receiver, attribute = arguments[0], static_string(arguments[1])
        if self._is_builtins_module(receiver, scope):
            self._builtins_lookup(node, function, attribute)
        elif attribute is None:
            self._dynamic_attribute(node, f"{function} with a computed name cannot be verified")
        elif not self._allow_named_chain(scope, receiver, attribute, node):
            self._named_access(scope, receiver, attribute, node)

    def _allow_named_chain(
        self, scope: Scope, receiver: cst.BaseExpression, name: str, node: cst.CSTNode
    ) -> bool:
        """``getattr(module.x, "y")`` names ``module.x.y``: the allow-list decides it as it
        decides the attribute; return whether it refused it."""
        if self.allow is None:
            return False
        for qualified in self._qualified(receiver, scope):
            if any(base in self.refused for base in qualified.split(".")[:1]):
                continue
            target = f"{qualified}.{name}"
            if self.forbidden.match(target) is None and self._verdict(target) is Verdict.REFUSED:
                self._not_allowed(node, target, "attribute")
                return True
        return False

    def _builtins_lookup(self, node: cst.CSTNode, function: str, name: str | None) -> None:
        if function != "getattr" or name is None:
            self.report(
                node,
                "IB002",
                "",
                "builtins-access",
                f"{function} on builtins with a computed name cannot be verified"
                if name is None
                else f"{function}(builtins, {name!r}) changes the builtins namespace",
            )
        elif name == "open":
            self._builtin_open(node)
        elif name in ("__import__", "exec", "eval", "__dict__") or name in DANGEROUS_BUILTINS:
            self.report(
                node, "IB002", "", "builtins-access", f"getattr(builtins, {name!r}) cannot be verified"
            )

    def _builtins_argument(self, call: cst.Call, scope: Scope) -> bool:
        argument = call_argument(call, 0, None)
        return argument is not None and self._is_builtins_module(argument, scope)

    def _name_getter(self, scope: Scope, node: cst.CSTNode, call: cst.Call | None, qualified: str) -> None:
        """``operator.attrgetter("a.b")`` and ``operator.methodcaller("m")`` read constant names."""
        function = qualified.rsplit(".", 1)[1]
        arguments = None if call is None else positional_arguments(call)
        if function == "methodcaller" and arguments:
            arguments = arguments[:1]
        names = [static_string(argument) for argument in arguments or ()]
        if not names or any(name is None for name in names):
            self._dynamic_attribute(node, f"{function} without constant names cannot be verified")
            return
        for dotted in names:
            for name in (dotted or "").split("."):
                self._named_access(scope, None, name, node)

    def _convert(self, node: cst.CSTNode, call: cst.Call | None) -> None:
        """``msgspec.convert(obj, T, from_attributes=True)`` reads the attributes T's fields name."""
        if call is None:
            self._dynamic_attribute(
                node, "msgspec.convert used as a value may read attributes by field names"
            )
            return
        for argument in call.args:
            if argument.star == "**" or (
                argument.keyword is not None
                and identifier(argument.keyword.value) == "from_attributes"
                and not (isinstance(argument.value, cst.Name) and argument.value.value == "False")
            ):
                self._dynamic_attribute(
                    node, "msgspec.convert from attributes reads the names a type declares"
                )
                return

    def _named_access(
        self, scope: Scope, receiver: cst.BaseExpression | None, name: str, node: cst.CSTNode
    ) -> None:
        """Rules for ``receiver.<name>`` where the name comes from a constant string."""
        if self.allow is not None and is_private_name(name) and name not in INTROSPECTION_ATTRIBUTES:
            self._private_access(scope, receiver, name, node)
        if name in INTROSPECTION_ATTRIBUTES:
            self.report(node, "IB002", "", "introspection", introspection_message(name))
        elif name in DYNAMIC_ATTRIBUTE_METHODS:
            self._dynamic_attribute(node, f"{name} reads attributes by names that cannot be verified")
        elif name == "__dict__":
            self._dynamic_attribute(
                node, "a __dict__ read by name can be read by keys that cannot be verified"
            )
        elif name in WRITE_METHODS or name == "open":
            self.collector.write_accesses.append(
                WriteAccess(scope, self.statement, receiver, name, node, None)
            )

    def _dynamic_attribute(self, node: cst.CSTNode, message: str) -> None:
        self.report(node, "IB002", "", "dynamic-attribute", message)

    # -- private and dunder attributes

    def _private_access(
        self, scope: Scope, receiver: cst.BaseExpression | None, name: str, node: cst.CSTNode
    ) -> None:
        """``receiver._name``: allowed only on what the checker knows is this module's own."""
        if name in DYNAMIC_ATTRIBUTE_METHODS or name == "__dict__" or self._is_own(scope, receiver, name):
            return
        self.report(
            node,
            "IB002",
            "",
            "private-attribute",
            f'"{name}" read on a value the checker cannot tell is this module\'s own cannot be verified',
        )

    def _is_own(self, scope: Scope, receiver: cst.BaseExpression | None, name: str) -> bool:
        """Whether ``receiver`` is known: an import (the allow-list decides its attributes), a
        builtin, ``super()``, a class or function of this module, a method's own receiver, or
        a name annotated with or tested against a class of this module that declares ``name``."""
        if receiver is None:
            return False
        if isinstance(receiver, cst.Call):
            return "builtins.super" in self._qualified(receiver.func, scope) or self._builtin(
                receiver.func, scope, "super"
            )
        chain = flatten_chain(receiver)
        if chain is None:
            return False
        names, _ = chain
        base = names[0]
        resolution = resolve(scope, base)
        if resolution.from_import:
            return True
        if resolution.builtin:
            return base in BUILTIN_NAMES
        if len(names) > 1:
            return False
        home = binding_scope(scope, base)
        if home is None:
            return False
        if base in home.receivers or (base in home.definitions and base not in home.assignments):
            return True
        return (
            not name.startswith("__")
            and name in self.collector.declared_attributes
            and self._narrowed_to_own(scope, home, base)
        )

    def _builtin(self, expression: cst.BaseExpression, scope: Scope, name: str) -> bool:
        return (
            isinstance(expression, cst.Name)
            and identifier(expression.value) == name
            and resolve(scope, name).builtin
        )

    def _narrowed_to_own(self, scope: Scope, home: Scope, name: str) -> bool:
        """Whether an annotation of ``name`` or a test on it names classes of this module only."""
        current: Scope | None = scope
        types: list[cst.BaseExpression] = []
        while current is not None:
            types.extend(current.narrowed.get(name, ()))
            if current is home:
                break
            current = current.parent
        return bool(types) and any(self._names_own_classes(expression, scope) for expression in types)

    def _names_own_classes(self, expression: cst.BaseExpression, scope: Scope) -> bool:
        """``C``, ``C | D``, ``(C, D)`` or ``C | None`` where every class is of this module."""
        if isinstance(expression, cst.BinaryOperation) and isinstance(expression.operator, cst.BitOr):
            return self._names_own_classes(expression.left, scope) and self._names_own_classes(
                expression.right, scope
            )
        if isinstance(expression, cst.Tuple):
            return all(self._names_own_classes(element.value, scope) for element in expression.elements)
        if isinstance(expression, cst.Name):
            name = identifier(expression.value)
            if name == "None":
                return True
            home = binding_scope(scope, name)
            return home is not None and name in home.classes and name not in home.assignments
        if isinstance(expression, cst.SimpleString | cst.ConcatenatedString):
            text = static_string(expression)
            return text is not None and text.isidentifier() and self._names_own_classes(cst.Name(text), scope)
        return False

    def _is_builtins_module(self, expression: cst.BaseExpression, scope: Scope) -> bool:
        return "builtins" in self._qualified(expression, scope)

    def _sys_modules(self, reference: Reference, node: cst.CSTNode, index: int) -> None:
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
            key = call_argument(reference.call, 0, None)
            settled = True
        name = None if key is None else static_string(key)
        if settled and name is not None:
            self._static_module(node, name, "sys-modules")
        else:
            self.report(node, "IB002", "", "dynamic-import", "use of sys.modules cannot be verified")

    # -- pathlib writes

    def _compute_path_names(self) -> None:
        scopes: dict[int, Scope] = {}
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

    def _qualified(self, expression: cst.BaseExpression, scope: Scope) -> tuple[str, ...]:
        chain = flatten_chain(expression)
        if chain is None:
            return ()
        names, _ = chain
        resolution = resolve(scope, names[0])
        if not resolution.from_import:
            return ()
        rest = "".join(f".{name}" for name in names[1:])
        return tuple(f"{qualified}{rest}" for qualified in resolution.qualified)

    def _is_path_class(self, expression: cst.BaseExpression, scope: Scope) -> bool:
        return any(name in PATH_CLASSES for name in self._qualified(expression, scope))

    def _is_path(self, expression: cst.BaseExpression, scope: Scope) -> bool:
        if isinstance(expression, cst.Name):
            return identifier(expression.value) in scope.path_names
        if isinstance(expression, cst.Call):
            function = expression.func
            if self._is_path_class(function, scope):
                return True
            if isinstance(function, cst.Attribute):
                method = identifier(function.attr.value)
                if method in ("cwd", "home") and self._is_path_class(function.value, scope):
                    return True
                if method in PATH_DERIVATIONS:
                    return self._is_path(function.value, scope)
            return False
        if isinstance(expression, cst.BinaryOperation) and isinstance(expression.operator, cst.Divide):
            return self._is_path(expression.left, scope) or self._is_path(expression.right, scope)
        if isinstance(expression, cst.NamedExpr):
            return self._is_path(expression.value, scope)
        if isinstance(expression, cst.Attribute) and identifier(expression.attr.value) == "parent":
            return self._is_path(expression.value, scope)
        if (
            isinstance(expression, cst.Subscript)
            and isinstance(expression.value, cst.Attribute)
            and identifier(expression.value.attr.value) == "parents"
        ):
            return self._is_path(expression.value.value, scope)
        return False

    def _is_known_non_path(self, expression: cst.BaseExpression, scope: Scope) -> bool:
        if isinstance(expression, NON_PATH_LITERALS):
            return True
        if isinstance(expression, cst.Name):
            resolution = resolve(scope, identifier(expression.value))
            return resolution.from_import and not self._is_path_class(expression, scope)
        return False

    def _write_access(self, access: WriteAccess) -> None:
        scope, receiver, method = access.scope, access.receiver, access.method
        on_class = receiver is not None and self._is_path_class(receiver, scope)
        if on_class or (receiver is not None and self._is_path(receiver, scope)):
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
            and method in UNKNOWN_RECEIVER_METHODS
            and (receiver is None or not self._is_known_non_path(receiver, scope))
        ):
            self.report(
                access.node,
                "IB002",
                "",
                "pathlib-unknown-receiver",
                f".{method}() on a receiver of unknown type may write through pathlib",
            )

    def _path_open(self, access: WriteAccess, on_class: bool) -> None:
        call = access.call
        if call is None:
            self.report(access.node, "IB002", "", "dynamic-open-mode", "Path.open referenced without a call")
            return
        mode = call_argument(call, 1 if on_class else 0, "mode")
        if mode is None and has_star_arguments(call):
            self.report(
                access.node, "IB002", "", "dynamic-open-mode", "Path.open with star arguments hides its mode"
            )
            return
        if mode is None:
            return
        text = static_string(mode)
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
