"""Pathlib writes: ``Path(...).write_text()`` and ``Path.open`` in a writing mode.

A receiver is a path when it is built from a pathlib class, derived from a path, or a name
assigned or annotated so in its scope; a write method on a receiver of unknown type is
reported when the module imports pathlib at all.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from harness_import_boundary._receivers import imported_names
from harness_import_boundary._reporting import Reporter
from harness_import_boundary._syntax import (
    NON_PATH_LITERALS,
    PATH_CLASSES,
    PATH_DERIVATIONS,
    UNKNOWN_RECEIVER_METHODS,
    Scope,
    WriteAccess,
    call_argument,
    has_star_arguments,
    identifier,
    resolve,
    static_string,
)

__all__ = ["PathWrites"]


class PathWrites:
    """Reports the write accesses whose receiver is, or may be, a pathlib path."""

    def __init__(self, reporter: Reporter, *, imports_pathlib: bool) -> None:
        self.reporter = reporter
        self.imports_pathlib = imports_pathlib

    def check(self, accesses: Sequence[WriteAccess]) -> None:
        """Learn each scope's path names, then judge every access."""
        _compute_path_names(accesses)
        for access in accesses:
            self.reporter.statement = access.statement
            self._write_access(access)

    def _write_access(self, access: WriteAccess) -> None:
        scope, receiver, method = access.scope, access.receiver, access.method
        on_class = receiver is not None and _is_path_class(receiver, scope)
        if on_class or (receiver is not None and _is_path(receiver, scope)):
            if method != "open":
                module = f"pathlib.Path.{method}"
                self.reporter.report(
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
            self.imports_pathlib
            and method in UNKNOWN_RECEIVER_METHODS
            and (receiver is None or not _is_known_non_path(receiver, scope))
        ):
            self.reporter.report(
                access.node,
                "IB002",
                "",
                "pathlib-unknown-receiver",
                f".{method}() on a receiver of unknown type may write through pathlib",
            )

    def _path_open(self, access: WriteAccess, on_class: bool) -> None:
        report = self.reporter.report
        call = access.call
        if call is None:
            report(access.node, "IB002", "", "dynamic-open-mode", "Path.open referenced without a call")
            return
        mode = call_argument(call, 1 if on_class else 0, "mode")
        if mode is None and has_star_arguments(call):
            report(
                access.node, "IB002", "", "dynamic-open-mode", "Path.open with star arguments hides its mode"
            )
            return
        if mode is None:
            return
        text = static_string(mode)
        if text is None:
            report(access.node, "IB002", "", "dynamic-open-mode", "Path.open with a computed mode")
        elif any(flag in text for flag in "wax+"):
            report(
                access.node,
                "IB001",
                "pathlib.Path.open",
                "pathlib-write",
                f"Path.open in mode {text!r} writes",
            )


def _compute_path_names(accesses: Sequence[WriteAccess]) -> None:
    """Each scope's path names: annotated as paths, or assigned a path (to a fixed point)."""
    scopes: dict[int, Scope] = {}
    for access in accesses:
        scopes[id(access.scope)] = access.scope
    for scope in scopes.values():
        scope.path_names = set(scope.path_annotated)
        changed = True
        while changed:
            changed = False
            for name, values in scope.assignments.items():
                if name not in scope.path_names and any(_is_path(value, scope) for value in values):
                    scope.path_names.add(name)
                    changed = True


def _is_path_class(expression: cst.BaseExpression, scope: Scope) -> bool:
    return any(name in PATH_CLASSES for name in imported_names(expression, scope))


def _is_path(expression: cst.BaseExpression, scope: Scope) -> bool:
    if isinstance(expression, cst.Name):
        return identifier(expression.value) in scope.path_names
    if isinstance(expression, cst.Call):
        function = expression.func
        if _is_path_class(function, scope):
            return True
        if isinstance(function, cst.Attribute):
            method = identifier(function.attr.value)
            if method in ("cwd", "home") and _is_path_class(function.value, scope):
                return True
            if method in PATH_DERIVATIONS:
                return _is_path(function.value, scope)
        return False
    if isinstance(expression, cst.BinaryOperation) and isinstance(expression.operator, cst.Divide):
        return _is_path(expression.left, scope) or _is_path(expression.right, scope)
    if isinstance(expression, cst.NamedExpr):
        return _is_path(expression.value, scope)
    if isinstance(expression, cst.Attribute) and identifier(expression.attr.value) == "parent":
        return _is_path(expression.value, scope)
    if (
        isinstance(expression, cst.Subscript)
        and isinstance(expression.value, cst.Attribute)
        and identifier(expression.value.attr.value) == "parents"
    ):
        return _is_path(expression.value.value, scope)
    return False


def _is_known_non_path(expression: cst.BaseExpression, scope: Scope) -> bool:
    if isinstance(expression, NON_PATH_LITERALS):
        return True
    if isinstance(expression, cst.Name):
        resolution = resolve(scope, identifier(expression.value))
        return resolution.from_import and not _is_path_class(expression, scope)
    return False
