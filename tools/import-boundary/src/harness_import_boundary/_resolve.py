"""Resolution: turns the collected imports, references and attribute accesses into findings.

The allow-list decides here, once the whole module is known: every import, every attribute
chain on an imported name, and every module used as a value. The rules live by job: this
module walks the chains and the names with rules of their own; ``_named_access`` judges
attributes read by constant names and private attributes (``_receivers`` says what a
receiver is known to be); ``_path_writes`` judges pathlib writes; ``_reporting`` holds the
findings and the allow-list's verdict they share.
"""

from __future__ import annotations

import libcst as cst

from harness_import_boundary._allow import Verdict
from harness_import_boundary._collect import Collector
from harness_import_boundary._import_statements import ImportCheck
from harness_import_boundary._named_access import NamedAccessRules
from harness_import_boundary._path_writes import PathWrites
from harness_import_boundary._receivers import is_builtins_module
from harness_import_boundary._reporting import Reporter
from harness_import_boundary._syntax import (
    ATTRIBUTE_BY_NAME,
    BUILTIN_NAMES,
    DANGEROUS_BUILTINS,
    DUNDER_IMPORTS,
    NAME_GETTERS,
    Reference,
    Scope,
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
        self.reporter = Reporter(collector)
        self.forbidden = collector.forbidden
        self.allow = collector.allow
        self.refused = self.reporter.refused
        self.named = NamedAccessRules(
            self.reporter,
            declared_attributes=collector.declared_attributes,
            write_accesses=collector.write_accesses,
        )

    def run(self) -> None:
        """Resolve every record the walk collected, in the order the rules depend on."""
        reporter, named = self.reporter, self.named
        for check in self.collector.imports.import_checks:
            reporter.statement = check.statement
            self._import_check(check)
        for reference in self.collector.references:
            reporter.statement = reference.statement
            self._reference(reference)
        for access in self.collector.named_accesses:
            reporter.statement = access.statement
            named.named_access(access.scope, access.receiver, access.name, access.node)
        for access in self.collector.private_accesses:
            reporter.statement = access.statement
            named.private_access(access.scope, access.receiver, access.name, access.node)
        if self.allow is not None:
            for scope, statement, target in self.collector.mutations:
                reporter.statement = statement
                self._mutation(scope, target)
        if self.forbidden.pathlib_write:
            writes = PathWrites(reporter, imports_pathlib=self.collector.imports.imports_pathlib)
            writes.check(self.collector.write_accesses)

    # -- the allow-list

    def _import_check(self, check: ImportCheck) -> None:
        verdict = self.reporter.verdict(check.target)
        if verdict is Verdict.REFUSED or (check.kind == "star" and verdict is not Verdict.ALLOWED):
            self.reporter.not_allowed(check.node, check.target, check.form)
            if check.bound is not None:
                self.refused.add(check.bound)
        elif check.kind == "star":
            self.reporter.report(
                check.node,
                "IB002",
                check.target,
                "star-import",
                "a star import binds names that cannot be verified",
            )
        elif check.renamed and verdict is Verdict.NAMESPACE:
            # Under its own name the module is known wherever it is re-exported (x.trio.…);
            # under another, its refused names would pass as the attributes of a project module.
            self.reporter.report(
                check.node,
                "IB002",
                check.target,
                "module-value",
                f'the partly allowed module "{check.target}" bound under another name escapes the allow-list',
            )

    def _is_module_value(self, qualified: str) -> bool:
        return (
            qualified in self.collector.imports.module_targets
            or self.reporter.verdict(qualified) is Verdict.NAMESPACE
        )

    def _module_value(self, node: cst.CSTNode, qualified: str) -> None:
        self.reporter.report(
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
        self.reporter.report(
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
                self.reporter.report(
                    node,
                    "IB001",
                    qualified,
                    "attribute",
                    f'host API "{qualified}" is outside the Workspace boundary',
                )
                return
            if index and is_dynamic_loader(qualified):
                self.reporter.report(
                    node, "IB002", qualified, "dynamic-loader", f'"{qualified}" loads code dynamically'
                )
                return

    def _allow_chain(self, qualified: str, node: cst.CSTNode, last: bool) -> bool:
        """Apply the allow-list to one step of a chain on an import; return whether it is settled."""
        if self.forbidden.match(qualified) is not None or is_dynamic_loader(qualified):
            return False  # the deny rules report it
        verdict = self.reporter.verdict(qualified)
        if verdict is Verdict.REFUSED:
            self.reporter.not_allowed(node, qualified, "attribute")
            return True
        if last and self._is_module_value(qualified):
            self._module_value(node, qualified)
            return True
        return False

    def _namespace_dict(self, node: cst.CSTNode, qualified: str) -> None:
        self.reporter.report(
            node,
            "IB002",
            "",
            "dynamic-attribute",
            f'"{qualified}" exposes a module or builtin namespace and cannot be verified',
        )

    def _special(
        self, reference: Reference, qualified: str, node: cst.CSTNode, index: int, call: cst.Call | None
    ) -> bool:
        """Handle the names with their own rules; return whether the chain is settled."""
        if qualified == "builtins.open":
            self.reporter.builtin_open(node)
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
                self.reporter.report(node, "IB002", "", form, f"{form}() runs code that cannot be verified")
            else:
                self.reporter.report(
                    node, "IB002", "", form, f"{form} used as a value runs code that cannot be verified"
                )
            return True
        if qualified in ("builtins.__builtins__", "builtins.__dict__"):
            # The builtins namespace has its own form; the walk's "used as a value" gives way.
            self.collector.pending[:] = [item for item in self.collector.pending if item.node is not node]
            self.reporter.report(
                node, "IB002", "", "builtins-access", "access to the builtins namespace cannot be verified"
            )
            return True
        if qualified in ATTRIBUTE_BY_NAME:
            self.named.attribute_by_name(reference.scope, node, call, qualified)
            return True
        if (
            qualified == "builtins.vars"
            and call is not None
            and self._builtins_argument(call, reference.scope)
        ):
            self.reporter.report(node, "IB002", "", "builtins-access", "vars(builtins) cannot be verified")
            return True
        if qualified.startswith("builtins.") and qualified[len("builtins.") :] in DANGEROUS_BUILTINS:
            name = qualified[len("builtins.") :]
            self.reporter.report(
                node,
                "IB002",
                "",
                "dangerous-builtin",
                f"builtin {name} compiles or runs code, reaches a namespace or does console I/O",
            )
            return True
        if qualified in NAME_GETTERS:
            self.named.name_getter(reference.scope, node, call, qualified)
            return True
        if qualified == "msgspec.convert":
            self.named.convert(node, call)
            return True
        if qualified == "sys.modules":
            self._sys_modules(reference, node, index)
            return True
        return False

    def _dynamic_import(
        self, node: cst.CSTNode, call: cst.Call | None, form: str, *, relative_level: bool
    ) -> None:
        if call is None:
            self.reporter.report(
                node, "IB002", "", "dynamic-import", "a module loader used indirectly cannot be verified"
            )
            return
        argument = call_argument(call, 0, "name")
        name = None if argument is None else static_string(argument)
        if name is None:
            self.reporter.report(
                node, "IB002", "", "dynamic-import", "a module name computed at run time cannot be verified"
            )
            return
        relative = name.startswith(".")
        if relative_level:
            level = call_argument(call, 4, "level")
            relative = relative or (isinstance(level, cst.Integer) and level.evaluated_value != 0)
        if relative:
            if self.allow is not None:  # with an allow-list, nothing is left uncounted
                self.reporter.report(
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
            self.reporter.report(
                node, "IB001", name, form, f'host module "{name}" is outside the Workspace boundary'
            )
        elif is_dynamic_loader(name):
            self.reporter.report(node, "IB002", name, "dynamic-loader", f'"{name}" loads code dynamically')
        elif self.allow is None:
            return
        elif self.reporter.verdict(name) is Verdict.REFUSED:
            self.reporter.not_allowed(node, name, form)
        else:
            self._module_value(node, name)

    def _builtins_argument(self, call: cst.Call, scope: Scope) -> bool:
        argument = call_argument(call, 0, None)
        return argument is not None and is_builtins_module(argument, scope)

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
            self.reporter.report(node, "IB002", "", "dynamic-import", "use of sys.modules cannot be verified")
