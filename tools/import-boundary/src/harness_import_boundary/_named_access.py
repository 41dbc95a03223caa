"""Attributes read by a constant name: ``getattr(x, "n")``, ``operator.attrgetter("n")``,
``msgspec.convert(..., from_attributes=True)``, and the private attributes of a receiver."""

from __future__ import annotations

import libcst as cst

from harness_import_boundary._allow import Verdict
from harness_import_boundary._receivers import imported_names, is_builtins_module, is_own
from harness_import_boundary._reporting import Reporter
from harness_import_boundary._syntax import (
    DANGEROUS_BUILTINS,
    DYNAMIC_ATTRIBUTE_METHODS,
    INTROSPECTION_ATTRIBUTES,
    WRITE_METHODS,
    Scope,
    WriteAccess,
    identifier,
    introspection_message,
    is_private_name,
    positional_arguments,
    static_string,
)

__all__ = ["NamedAccessRules"]


class NamedAccessRules:
    """The attribute rules for names that arrive as constant strings rather than as syntax."""

    def __init__(
        self, reporter: Reporter, *, declared_attributes: set[str], write_accesses: list[WriteAccess]
    ) -> None:
        self.reporter = reporter
        self.declared_attributes = declared_attributes
        """Names the module's classes declare (see ``Collector.declared_attributes``)."""
        self.write_accesses = write_accesses
        """Where a write method read by name joins the pathlib rules."""

    def named_access(
        self, scope: Scope, receiver: cst.BaseExpression | None, name: str, node: cst.CSTNode
    ) -> None:
        """Rules for ``receiver.<name>`` where the name comes from a constant string."""
        reporter = self.reporter
        if reporter.allow is not None and is_private_name(name) and name not in INTROSPECTION_ATTRIBUTES:
            self.private_access(scope, receiver, name, node)
        if name in INTROSPECTION_ATTRIBUTES:
            reporter.report(node, "IB002", "", "introspection", introspection_message(name))
        elif name in DYNAMIC_ATTRIBUTE_METHODS:
            reporter.dynamic_attribute(node, f"{name} reads attributes by names that cannot be verified")
        elif name == "__dict__":
            reporter.dynamic_attribute(
                node, "a __dict__ read by name can be read by keys that cannot be verified"
            )
        elif name in WRITE_METHODS or name == "open":
            self.write_accesses.append(WriteAccess(scope, reporter.statement, receiver, name, node, None))

    def private_access(
        self, scope: Scope, receiver: cst.BaseExpression | None, name: str, node: cst.CSTNode
    ) -> None:
        """``receiver._name``: allowed only on what the checker knows is this module's own."""
        if (
            name in DYNAMIC_ATTRIBUTE_METHODS
            or name == "__dict__"
            or is_own(scope, receiver, name, self.declared_attributes)
        ):
            return
        self.reporter.report(
            node,
            "IB002",
            "",
            "private-attribute",
            f'"{name}" read on a value the checker cannot tell is this module\'s own cannot be verified',
        )

    def attribute_by_name(
        self, scope: Scope, node: cst.CSTNode, call: cst.Call | None, qualified: str
    ) -> None:
        """``getattr``, ``setattr`` and ``delattr``: a constant name is an attribute access."""
        function = qualified.rsplit(".", 1)[1]
        arguments = None if call is None else positional_arguments(call)
        if arguments is None or len(arguments) < 2:
            self.reporter.dynamic_attribute(
                node, f"{function} used without a constant name cannot be verified"
            )
            return
        receiver, attribute = arguments[0], static_string(arguments[1])
        if is_builtins_module(receiver, scope):
            self._builtins_lookup(node, function, attribute)
        elif attribute is None:
            self.reporter.dynamic_attribute(node, f"{function} with a computed name cannot be verified")
        elif not self._allow_named_chain(scope, receiver, attribute, node):
            self.named_access(scope, receiver, attribute, node)

    def name_getter(self, scope: Scope, node: cst.CSTNode, call: cst.Call | None, qualified: str) -> None:
        """``operator.attrgetter("a.b")`` and ``operator.methodcaller("m")`` read constant names."""
        function = qualified.rsplit(".", 1)[1]
        arguments = None if call is None else positional_arguments(call)
        if function == "methodcaller" and arguments:
            arguments = arguments[:1]
        names = [static_string(argument) for argument in arguments or ()]
        if not names or any(name is None for name in names):
            self.reporter.dynamic_attribute(node, f"{function} without constant names cannot be verified")
            return
        for dotted in names:
            for name in (dotted or "").split("."):
                self.named_access(scope, None, name, node)

    def convert(self, node: cst.CSTNode, call: cst.Call | None) -> None:
        """``msgspec.convert(obj, T, from_attributes=True)`` reads the attributes T's fields name."""
        if call is None:
            self.reporter.dynamic_attribute(
                node, "msgspec.convert used as a value may read attributes by field names"
            )
            return
        for argument in call.args:
            if argument.star == "**" or (
                argument.keyword is not None
                and identifier(argument.keyword.value) == "from_attributes"
                and not (isinstance(argument.value, cst.Name) and argument.value.value == "False")
            ):
                self.reporter.dynamic_attribute(
                    node, "msgspec.convert from attributes reads the names a type declares"
                )
                return

    def _allow_named_chain(
        self, scope: Scope, receiver: cst.BaseExpression, name: str, node: cst.CSTNode
    ) -> bool:
        """``getattr(module.x, "y")`` names ``module.x.y``: the allow-list decides it as it
        decides the attribute; return whether it refused it."""
        reporter = self.reporter
        if reporter.allow is None:
            return False
        for qualified in imported_names(receiver, scope):
            if any(base in reporter.refused for base in qualified.split(".")[:1]):
                continue
            target = f"{qualified}.{name}"
            if reporter.forbidden.match(target) is None and reporter.verdict(target) is Verdict.REFUSED:
                reporter.not_allowed(node, target, "attribute")
                return True
        return False

    def _builtins_lookup(self, node: cst.CSTNode, function: str, name: str | None) -> None:
        reporter = self.reporter
        if function != "getattr" or name is None:
            reporter.report(
                node,
                "IB002",
                "",
                "builtins-access",
                f"{function} on builtins with a computed name cannot be verified"
                if name is None
                else f"{function}(builtins, {name!r}) changes the builtins namespace",
            )
        elif name == "open":
            reporter.builtin_open(node)
        elif name in ("__import__", "exec", "eval", "__dict__") or name in DANGEROUS_BUILTINS:
            reporter.report(
                node, "IB002", "", "builtins-access", f"getattr(builtins, {name!r}) cannot be verified"
            )
