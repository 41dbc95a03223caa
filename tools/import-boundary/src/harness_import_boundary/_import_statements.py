"""Import statements: what they bind and load, and the findings the walk reports at them.

A forbidden import or a dynamic loader is reported where it stands; every other import waits
as an :class:`ImportCheck` for the allow-list's verdict, which the resolver gives once the
whole module is known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from harness_import_boundary._model import FilePolicy
from harness_import_boundary._syntax import (
    INTROSPECTION_ATTRIBUTES,
    PendingFinding,
    Scope,
    bind_name,
    dotted_name,
    identifier,
    introspection_message,
    is_dynamic_loader,
)

__all__ = ["ImportCheck", "ImportSite", "ImportStatements"]


@dataclass(eq=False)
class ImportCheck:
    """An import the allow-list decides once the walk is over.

    ``kind`` is ``module`` for the target of ``import a.b``, ``name`` for ``from a import b``
    and ``star`` for ``from a import *``; ``bound`` is the qualified name the statement binds.
    """

    node: cst.CSTNode
    statement: int
    target: str
    form: str
    kind: Literal["module", "name", "star"]
    bound: str | None
    renamed: bool = False
    """The statement binds the module under a name of its own choosing (``import a as b``)."""


@dataclass(frozen=True, slots=True)
class ImportSite:
    """Where an import statement stands: its scope, its top-level statement, and whether it is
    inside an ``if TYPE_CHECKING:`` block (its findings then say so in their form)."""

    scope: Scope
    module_scope: Scope
    statement: int
    type_checking: bool

    def form(self, form: str) -> str:
        """The finding form of an import here."""
        return f"{form}:type-checking" if self.type_checking else form


class ImportStatements:
    """Binds what import statements bind and records what they load, for the resolver."""

    def __init__(self, policy: FilePolicy, pending: list[PendingFinding]) -> None:
        self.forbidden = policy.forbidden
        self.allow = policy.allow
        self.package = policy.package
        self.pending = pending
        self.imports_pathlib = False
        self.import_checks: list[ImportCheck] = []
        self.module_paths: set[str] = set()
        """Dotted names the file's import statements load as modules."""
        self.module_targets: set[str] = set()
        """Qualified names bound by ``import`` statements: modules for certain."""
        self.refused_bindings: set[str] = set()
        """Qualified names whose import was reported: their uses are not reported again."""

    def import_modules(self, aliases: Sequence[cst.ImportAlias], site: ImportSite) -> None:
        """``import a.b`` and ``import a.b as c``."""
        for alias in aliases:
            target = dotted_name(alias.name)
            if target == "pathlib" or target.startswith("pathlib."):
                self.imports_pathlib = True
            self._add_module_path(target)
            renamed = alias.asname is not None and isinstance(alias.asname.name, cst.Name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                name, bound = alias.asname.name.value, target
            else:
                name = bound = target.split(".", 1)[0]
            self._check(alias.name, target, "import", "module", bound, site=site, renamed=renamed)
            self.module_targets.add(bound)
            self._bind(site, name, bound)

    def import_from(self, node: cst.ImportFrom | cst.LazyImportFrom, site: ImportSite) -> None:
        """``from a import b``, relative or not, and ``from a import *``."""
        relative, module_node, names = node.relative, node.module, node.names
        written = None if module_node is None else dotted_name(module_node)
        if relative:
            module = None if self.allow is None else _absolute_module(self.package, len(relative), written)
            if module is None:
                self._unresolved_relative(node, site)
                return
        else:
            assert written is not None, "an absolute from-import names its module"
            module = written
        report_node: cst.CSTNode = module_node if module_node is not None else relative[-1]
        if module == "pathlib" or module.startswith("pathlib."):
            self.imports_pathlib = True
        self._add_module_path(module)
        if isinstance(names, cst.ImportStar):
            self._check(report_node, module, "from-import", "star", None, site=site)
            return
        for alias in names:
            name = identifier(alias.evaluated_name)
            target = f"{module}.{name}"
            self.module_paths.add(target)  # perhaps a submodule: loaded by the statement if so
            local = alias.evaluated_alias
            renamed = local is not None and identifier(local) != name
            self._check(alias.name, target, "from-import", "name", target, site=site, renamed=renamed)
            if name in INTROSPECTION_ATTRIBUTES:
                message = introspection_message(name)
                self._report(alias.name, "IB002", "", "introspection", message, site=site)
            self._bind(site, alias.evaluated_alias or name, target)

    def _unresolved_relative(self, node: cst.ImportFrom | cst.LazyImportFrom, site: ImportSite) -> None:
        """A relative import without a known package: never counted without an allow-list."""
        relative, module_node, names = node.relative, node.module, node.names
        if self.allow is not None:
            self._report(
                module_node if module_node is not None else relative[-1],
                "IB002",
                "",
                site.form("relative-import"),
                "a relative import that leaves the scanned root cannot be resolved",
                site=site,
            )
        if not isinstance(names, cst.ImportStar):
            for alias in names:
                bound = alias.evaluated_alias or alias.evaluated_name
                bind_name(site.scope, site.module_scope, bound.split(".", 1)[0])

    def _check(
        self,
        node: cst.CSTNode,
        target: str,
        form: str,
        kind: Literal["module", "name", "star"],
        bound: str | None,
        *,
        site: ImportSite,
        renamed: bool = False,
    ) -> None:
        """Report a forbidden import now; leave the allow-list's verdict to the resolver."""
        if self._report_target(site, node, target, form):
            if bound is not None:
                self.refused_bindings.add(bound)
        elif self.allow is not None:
            check = ImportCheck(node, site.statement, target, site.form(form), kind, bound, renamed)
            self.import_checks.append(check)

    def _report_target(self, site: ImportSite, node: cst.CSTNode, target: str, form: str) -> bool:
        """Report ``target`` if forbidden or a dynamic loader; return whether it was."""
        if self.forbidden.match(target) is not None:
            self._report(
                node,
                "IB001",
                target,
                site.form(form),
                f'host module "{target}" is outside the Workspace boundary',
                site=site,
            )
            return True
        if is_dynamic_loader(target):
            self._report(
                node,
                "IB002",
                target,
                site.form("dynamic-loader"),
                f'"{target}" loads code dynamically and cannot be verified',
                site=site,
            )
            return True
        return False

    def _report(
        self, node: cst.CSTNode, rule: str, module: str, form: str, message: str, *, site: ImportSite
    ) -> None:
        self.pending.append(PendingFinding(node, site.statement, rule, module, form, message))

    def _bind(self, site: ImportSite, name: str, qualified: str) -> None:
        name = identifier(name)
        target = site.module_scope if name in site.scope.global_names else site.scope
        target.imports.setdefault(name, []).append(qualified)

    def _add_module_path(self, module: str) -> None:
        parts = module.split(".")
        self.module_paths.update(".".join(parts[:index]) for index in range(1, len(parts) + 1))


def _absolute_module(package: str | None, level: int, module: str | None) -> str | None:
    """The module a relative import names, or ``None`` when it climbs out of the root."""
    if not package:
        return None
    parts = package.split(".")
    if level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return base if module is None else f"{base}.{module}"
