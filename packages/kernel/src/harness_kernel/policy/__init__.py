"""Policy: the pure rule engine, anchored globs, path scope and the permission port.

``decide(permissions, action, subject)`` turns a permission map (a task manifest's
``permissions``, for example) into a :class:`Decision`; :func:`compile_rules` does the same
work once for many decisions. The permission port (:class:`PermissionController`) is what a
runtime consults per tool call; :class:`RulePermissionController` adapts a permission map
to it. Nothing here touches the host.
"""

from harness_kernel.policy._errors import (
    POLICY_INVALID_INPUT,
    POLICY_INVALID_RULES,
    InvalidPermissionRulesError,
    InvalidPolicyInputError,
)
from harness_kernel.policy._glob import (
    GLOB_SYNTAXES,
    CompiledGlob,
    GlobSyntax,
    check_changed_paths,
    compile_glob,
    match_glob,
    path_allowed,
    translate,
)
from harness_kernel.policy._permission import (
    MAX_ID_CHARS,
    MAX_REASON_CHARS,
    PermissionController,
    PermissionDecision,
    PermissionRequest,
    PermissionResolution,
    PermissionResolve,
    RulePermissionController,
)
from harness_kernel.policy._rules import (
    COMMAND_ACTIONS,
    EFFECTS,
    RANK,
    CompiledRules,
    Decision,
    Effect,
    PermissionMap,
    Rule,
    compile_rules,
    decide,
    glob_syntax_for,
)
from harness_tools import ToolPermissionIntent

__all__ = [
    "COMMAND_ACTIONS",
    "EFFECTS",
    "GLOB_SYNTAXES",
    "MAX_ID_CHARS",
    "MAX_REASON_CHARS",
    "POLICY_INVALID_INPUT",
    "POLICY_INVALID_RULES",
    "RANK",
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
    "check_changed_paths",
    "compile_glob",
    "compile_rules",
    "decide",
    "glob_syntax_for",
    "match_glob",
    "path_allowed",
    "translate",
]
