"""Policy: the pure rule engine, anchored globs, path scope and the permission port.

``decide(permissions, action, subject)`` turns a permission map (a task manifest's
``permissions``, for example) into a :class:`Decision`; :func:`compile_rules` does the same
work once for many decisions. The permission port (:class:`PermissionController`) is what a
runtime consults per tool call; :class:`RulePermissionController` adapts a permission map
to it. Nothing here touches the host.
"""

from harness_kernel.policy._errors import (
    InvalidPermissionRulesError,
    InvalidPolicyInputError,
)
from harness_kernel.policy._glob import (
    CompiledGlob,
    GlobSyntax,
    compile_glob,
    path_allowed,
    translate,
)
from harness_kernel.policy._permission import (
    PermissionController,
    PermissionDecision,
    PermissionRequest,
    PermissionResolution,
    PermissionResolve,
    RulePermissionController,
)
from harness_kernel.policy._rules import (
    EFFECTS,
    CompiledRules,
    Decision,
    Effect,
    PermissionMap,
    Rule,
    compile_rules,
    decide,
)
from harness_tools import ToolPermissionIntent

__all__ = [
    "EFFECTS",
    "CompiledGlob",
    "CompiledRules",
    "Decision",
    "Effect",
    "GlobSyntax",
    "InvalidPermissionRulesError",
    "InvalidPolicyInputError",
    "PermissionController",
    "PermissionDecision",
    "PermissionMap",
    "PermissionRequest",
    "PermissionResolution",
    "PermissionResolve",
    "Rule",
    "RulePermissionController",
    "ToolPermissionIntent",
    "compile_glob",
    "compile_rules",
    "decide",
    "path_allowed",
    "translate",
]
