"""Where the resolver's rules report, and the allow-list's verdict they share."""

from __future__ import annotations

import libcst as cst

from harness_import_boundary._allow import Verdict
from harness_import_boundary._collect import Collector
from harness_import_boundary._syntax import PendingFinding

__all__ = ["Reporter"]


class Reporter:
    """Adds findings to the collector's pending list, positioned at the record being resolved."""

    def __init__(self, collector: Collector) -> None:
        self.collector = collector
        self.pending = collector.pending
        self.forbidden = collector.forbidden
        self.allow = collector.allow
        self.module_paths = frozenset(collector.imports.module_paths)
        self.refused = collector.imports.refused_bindings
        """Qualified names whose import was reported: their uses get the deny rules only."""
        self.statement = 0
        """The top-level statement of the record being resolved (findings carry it)."""

    def report(self, node: cst.CSTNode, rule: str, module: str, form: str, message: str) -> None:
        """Add a finding at ``node``."""
        self.pending.append(PendingFinding(node, self.statement, rule, module, form, message))

    def verdict(self, target: str) -> Verdict:
        """The allow-list's verdict on ``target`` (asked for only with an allow-list)."""
        assert self.allow is not None, "verdicts are asked for only with an allow-list"
        return self.allow.classify(target, self.module_paths)

    def not_allowed(self, node: cst.CSTNode, target: str, form: str) -> None:
        """Report ``target`` as refused by the allow-list."""
        self.report(node, "IB001", target, form, f'"{target}" is not on the import allow-list')

    def dynamic_attribute(self, node: cst.CSTNode, message: str) -> None:
        """Report an attribute read by a name the checker cannot see."""
        self.report(node, "IB002", "", "dynamic-attribute", message)

    def builtin_open(self, node: cst.CSTNode) -> None:
        """Report ``open`` reached through builtins, unless the configuration allows it."""
        if self.forbidden.match("builtins.open") is not None:
            message = "builtin open is outside the Workspace boundary"
            self.report(node, "IB001", "builtins.open", "builtin-open", message)
