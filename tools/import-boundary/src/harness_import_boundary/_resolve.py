"""Resolution: turns the collected references and pathlib write accesses into findings."""

from __future__ import annotations

import libcst as cst

from harness_import_boundary._collect import Collector
from harness_import_boundary._syntax import (
    DUNDER_IMPORTS,
    NON_PATH_LITERALS,
    PATH_CLASSES,
    PATH_DERIVATIONS,
    UNKNOWN_RECEIVER_METHODS,
    PendingFinding,
    Reference,
    Scope,
    WriteAccess,
    call_argument,
    flatten_chain,
    is_dynamic_loader,
    resolve,
    static_string,
)

__all__ = ["Resolver"]


class Resolver:
    """Turns the collected references and write accesses into findings."""

    def __init__(self, collector: Collector) -> None:
        self.collector = collector
        self.forbidden = collector.forbidden

    def report(self, node: cst.CSTNode, rule: str, module: str, form: str, message: str) -> None:
        self.collector.pending.append(PendingFinding(node, rule, module, form, message))

    def run(self) -> None:
        for reference in self.collector.references:
            self._reference(reference)
        if self.forbidden.pathlib_write:
            self._compute_path_names()
            for access in self.collector.write_accesses:
                self._write_access(access)

    # -- names and attribute chains

    def _reference(self, reference: Reference) -> None:
        resolution = resolve(reference.scope, reference.names[0])
        bases = [f"builtins.{reference.names[0]}"] if resolution.builtin else list(resolution.qualified)
        for base in bases:
            if resolution.from_import and (self.forbidden.match(base) is not None or is_dynamic_loader(base)):
                continue  # reported once, at the import that obtained it
            self._chain(reference, base)

    def _chain(self, reference: Reference, base: str) -> None:
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
            if index and is_dynamic_loader(qualified):
                self.report(
                    node, "IB002", qualified, "dynamic-loader", f'"{qualified}" loads code dynamically'
                )
                return

    def _special(
        self, reference: Reference, qualified: str, node: cst.CSTNode, index: int, call: cst.Call | None
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
        if qualified in DUNDER_IMPORTS:
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
        argument = call_argument(call, 0, "name")
        name = None if argument is None else static_string(argument)
        if name is None:
            self.report(
                node, "IB002", "", "dynamic-import", "a module name computed at run time cannot be verified"
            )
            return
        if name.startswith("."):
            return  # relative: never counts
        if relative_level:
            level = call_argument(call, 4, "level")
            if isinstance(level, cst.Integer) and level.evaluated_value != 0:
                return
        self._static_module(node, name, form)

    def _static_module(self, node: cst.CSTNode, name: str, form: str) -> None:
        if self.forbidden.match(name) is not None:
            self.report(node, "IB001", name, form, f'host module "{name}" is outside the Workspace boundary')
        elif is_dynamic_loader(name):
            self.report(node, "IB002", name, "dynamic-loader", f'"{name}" loads code dynamically')

    def _builtins_lookup(self, scope: Scope, node: cst.CSTNode, call: cst.Call, *, is_getattr: bool) -> None:
        target = call_argument(call, 0, None)
        if target is None or not self._is_builtins_module(target, scope):
            return
        if not is_getattr:
            self.report(node, "IB002", "", "builtins-access", "vars(builtins) cannot be verified")
            return
        attribute = call_argument(call, 1, None)
        name = None if attribute is None else static_string(attribute)
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
            return expression.value in scope.path_names
        if isinstance(expression, cst.Call):
            function = expression.func
            if self._is_path_class(function, scope):
                return True
            if isinstance(function, cst.Attribute):
                method = function.attr.value
                if method in ("cwd", "home") and self._is_path_class(function.value, scope):
                    return True
                if method in PATH_DERIVATIONS:
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

    def _is_known_non_path(self, expression: cst.BaseExpression, scope: Scope) -> bool:
        if isinstance(expression, NON_PATH_LITERALS):
            return True
        if isinstance(expression, cst.Name):
            resolution = resolve(scope, expression.value)
            return resolution.from_import and not self._is_path_class(expression, scope)
        return False

    def _write_access(self, access: WriteAccess) -> None:
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
            and method in UNKNOWN_RECEIVER_METHODS
            and not self._is_known_non_path(receiver, scope)
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
