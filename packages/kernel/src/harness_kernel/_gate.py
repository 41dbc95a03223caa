"""The one tool gate: convert → intent → policy → permission → restricted capability.

The one agent loop (``MinimalAgentRuntime``, kernel.md §8.6 to §8.7) asks this module every
question about a tool call and only publishes the answers as its events: how the arguments
convert, what the call intends, what the admission table (``harness_tools`` ``call_rule``) and
the permission controller decide, whether an operator's answer is valid, and which workspace
view the tool receives. ``run_agent`` (§9) runs on that loop; the few texts its specification
fixes differently are its facade's translation, not a setting of this gate.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

import msgspec

from harness_kernel._bounded import BoundedJsonError, bounded_json
from harness_kernel._ids import is_id
from harness_kernel._json import FrozenDict, JsonValue, has_lone_surrogate, thaw_json
from harness_kernel.models._types import ToolDefinition
from harness_kernel.policy._permission import MAX_REASON_CHARS, PermissionDecision, PermissionResolution
from harness_tools import (
    CallRule,
    Tool,
    ToolError,
    ToolPermissionIntent,
    WorkspaceBoundary,
    call_rule,
)
from harness_tools import get_tool_execution_boundary as boundary_of
from harness_workspace import Workspace, WorkspaceOperationError, isolation_of, restrict_workspace

__all__ = [
    "DecideCallable",
    "Effect",
    "ToolDefinitionError",
    "ToolGate",
    "ToolInputError",
    "Verdict",
    "close_coroutine",
    "convert_arguments",
    "default_intent",
    "error_code",
    "permission_intent",
    "resolution_of",
    "tool_definitions",
    "typed_error_code",
]

Effect = Literal["allow", "ask", "deny"]
DecideCallable = Any
"""A permission controller's ``decide``: any callable; its answer is validated here."""

_MAX_ACTION_CHARS: Final = 256
RULE_PREFIX: Final = "runtime."
"""The prefix of every rule id the gate itself decides with (the table's rows, a failed closed
call, an unpoliced pure call); a controller's own rule ids pass unchanged."""


def close_coroutine(value: object) -> None:
    """Close ``value`` if it is a coroutine nobody will await (so it never warns unawaited)."""
    if inspect.iscoroutine(value):
        value.close()


_ERROR_CODE: Final = re.compile(r"[A-Z0-9_]{2,80}")


def static_attribute(error: BaseException, name: str) -> object:
    """Read ``name`` as plain data from the instance or class dictionaries, or ``None``.

    No property, descriptor or ``__getattr__`` runs: a provider's exception cannot run
    code, or hand back computed values, while the loop reports it.
    """
    class_value: object = None
    for klass in type(error).__mro__:
        if name in klass.__dict__:
            class_value = klass.__dict__[name]  # harness-import-boundary: allow IB002 -- constant names only
            if hasattr(type(class_value), "__get__"):
                return None
            break
    try:
        instance = object.__getattribute__(  # harness-import-boundary: allow IB002 -- plain data, no getters
            error, "__dict__"
        )
    except AttributeError:
        instance = None
    if type(instance) is dict and name in instance:
        return cast("dict[str, object]", instance)[name]
    return class_value


def error_code(error: BaseException) -> str | None:
    """``error``'s well-formed ``code`` (``[A-Z0-9_]{2,80}``), read without running a property."""
    code = static_attribute(error, "code")
    return code if type(code) is str and _ERROR_CODE.fullmatch(code) is not None else None


def typed_error_code(error: BaseException) -> str | None:
    """The code a failed tool call reports for ``error``: a workspace's or a tool's own typed
    error keeps its well-formed ``code``; else ``None``."""
    if not isinstance(error, (WorkspaceOperationError, ToolError)):
        return None
    return error_code(error)


def cut_reason(text: str) -> str:
    """``text`` cut to :data:`MAX_REASON_CHARS`, the longest reason or note an event may carry."""
    return text[:MAX_REASON_CHARS]


def budget_percent(used: int, limit: int) -> int:
    """``used`` as a rounded percentage of ``limit`` (half up; 100 for a zero limit)."""
    return 100 if limit == 0 else (used * 200 + limit) // (2 * limit)


class ToolDefinitionError(ValueError):
    """A tool's definition cannot be advertised: its input schema is not a bounded JSON object."""


def tool_definitions(tools: Iterable[Tool[Any]]) -> tuple[ToolDefinition, ...] | None:
    """The definitions a model is shown of ``tools``, in order (``None`` when there are none).

    The caller chooses which tools are shown (the runtime: the admission table's
    ``is_advertised``); each schema is bounded JSON, deep-frozen (kernel.md §8.3).

    Raises:
        ToolDefinitionError: a schema is not a bounded JSON object, or a description is not a str.
    """
    definitions: list[ToolDefinition] = []
    for tool in tools:
        schema: object = tool.input_schema if tool.input_schema is not None else {"type": "object"}
        try:
            frozen, _ = bounded_json(schema)
        except BoundedJsonError as error:
            raise ToolDefinitionError(
                f"tool {tool.name} input schema is not bounded JSON: {error}"
            ) from error
        if type(frozen) is not FrozenDict or type(tool.description) is not str:
            raise ToolDefinitionError(f"tool {tool.name} definition is invalid")
        definitions.append(ToolDefinition(name=tool.name, description=tool.description, input_schema=frozen))
    return tuple(definitions) or None


class ToolInputError(Exception):
    """The arguments do not convert to the tool's parameters; the message is the observation's."""


def convert_arguments(tool: Tool[Any], arguments: object) -> object:
    """The tool's parameters from a plain copy of ``arguments``, converted strictly.

    Authorization and execution each take their own conversion (kernel.md §8.6 step 4), so
    neither can alter what the other sees.

    Raises:
        ToolInputError: ``invalid input for NAME: <first problem>`` (at most 4,096 characters),
            when conversion fails or the converted value is not bounded JSON.
    """
    try:
        params = msgspec.convert(thaw_json(cast(JsonValue, arguments)), tool.parameters, strict=True)
    except Exception as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ToolInputError(cut_reason(f"invalid input for {tool.name}: {first}")) from error
    try:
        bounded_json(msgspec.to_builtins(params))
    except Exception as error:
        message = f"invalid input for {tool.name}: converted input is not bounded JSON"
        raise ToolInputError(message) from error
    return params


def default_intent(tool: Tool[Any]) -> ToolPermissionIntent:
    """The intent of a tool without an authorization: ``tool.call`` on its name, once."""
    return ToolPermissionIntent(action="tool.call", subject=tool.name, scope="once")


def valid_text(value: object, low: int, high: int) -> bool:
    """``value`` is a ``str`` of ``low``..``high`` characters without a lone surrogate."""
    return type(value) is str and low <= len(value) <= high and not has_lone_surrogate(value)


def permission_intent(tool: Tool[Any], params: object) -> ToolPermissionIntent | None:
    """What the call would do: ``tool.authorization(params)``, checked; ``None`` when it failed closed.

    It must return, synchronously, an exact ``ToolPermissionIntent`` whose action is 1..256
    characters, whose subject is ``None`` or at most 4,096, and whose scope is ``None``,
    ``once`` or ``run``; raising, returning an awaitable or anything else fails closed.
    """
    if tool.authorization is None:
        return default_intent(tool)
    try:
        intent: object = tool.authorization(params)
    except Exception:
        return None
    close_coroutine(intent)
    if type(intent) is not ToolPermissionIntent:
        return None
    assert isinstance(intent, ToolPermissionIntent)
    subject: object = intent.subject
    scope: object = intent.scope
    if not valid_text(intent.action, 1, _MAX_ACTION_CHARS):
        return None
    if subject is not None and not valid_text(subject, 0, MAX_REASON_CHARS):
        return None
    if scope is not None and scope not in ("once", "run"):
        return None
    return intent


def resolution_of(answer: object) -> PermissionResolution | None:
    """An operator's valid answer as a resolution, or ``None`` (the request then fails closed).

    Valid: ``"allow"``, ``"deny"``, or an exact ``PermissionResolution`` whose decision is one
    of them and whose note is ``None`` or a str of at most 4,096 characters.
    """
    if type(answer) is str and answer in ("allow", "deny"):
        return PermissionResolution("allow" if answer == "allow" else "deny")
    if type(answer) is not PermissionResolution:
        return None
    assert isinstance(answer, PermissionResolution)
    note: object = answer.note
    if answer.decision not in ("allow", "deny") or (
        note is not None and not valid_text(note, 0, MAX_REASON_CHARS)
    ):
        return None
    return PermissionResolution(answer.decision, answer.note)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The gate's decision on one call, before any operator is asked.

    Attributes:
        intent: The intent judged (the default one when the tool's authorization failed).
        effect: ``allow``, ``ask`` or ``deny``.
        rule_id: The rule that decided, or ``None``.
        reason: Why, for people (at most 4,096 characters).
        denial: The observation's error code when ``effect`` is ``deny``.
        policed: Whether a rule judged the call at all; ``False`` for an unpoliced pure call
            (no controller).
        failed_closed: The tool's authorization or the controller's decision failed.
    """

    intent: ToolPermissionIntent
    effect: Effect
    rule_id: str | None
    reason: str
    denial: str = ""
    policed: bool = True
    failed_closed: bool = False


class ToolGate:
    """The gate of one run: its workspace, its permission controller and its run-scoped grants.

    Args:
        workspace: The bound workspace of the run, or ``None``. Tools with ``write`` or
            ``execute`` access run only when trusted outer code declared it isolated
            (``harness_workspace.isolation_of``); the declaration is read here, once.
        decide: The controller's ``decide``, or ``None`` without a controller.
    """

    def __init__(self, *, workspace: Workspace | None, decide: DecideCallable | None) -> None:
        self._workspace = workspace
        self._effects_admitted = workspace is not None and isolation_of(workspace) is not None
        self._decide = decide
        self._grants: set[tuple[str, str | None]] = set()

    def _rule(self, name: str) -> str:
        return f"{RULE_PREFIX}{name}"

    def _call_rule(self, tool: Tool[Any]) -> CallRule:
        return call_rule(
            tool,
            workspace_injected=self._workspace is not None,
            controller=self._decide is not None,
            effects_admitted=self._effects_admitted,
        )

    def judge(self, tool: Tool[Any], intent: ToolPermissionIntent | None) -> Verdict:
        """The decision table (kernel.md §8.7): the first matching row decides."""
        if intent is None:
            reason = "tool authorization failed closed"
            return Verdict(
                default_intent(tool),
                "deny",
                self._rule("authorization.invalid"),
                reason,
                "TOOL_AUTHORIZATION_FAILED",
                failed_closed=True,
            )
        rule = self._call_rule(tool)
        if rule.refusal is not None:
            name, reason, code = rule.refusal
            return Verdict(intent, "deny", self._rule(name), reason, code)
        if not rule.policed:
            return Verdict(intent, "allow", self._rule("m7.pure"), "reviewed pure tool", policed=False)
        return self._decided(intent)

    def _decided(self, intent: ToolPermissionIntent) -> Verdict:
        invalid = Verdict(
            intent,
            "deny",
            self._rule("policy.invalid"),
            "policy decision failed closed",
            "TOOL_AUTHORIZATION_FAILED",
            failed_closed=True,
        )
        try:
            decision: object = self._decide(intent)  # pyright: ignore[reportOptionalCall]
        except Exception:
            return invalid
        close_coroutine(decision)
        if type(decision) is not PermissionDecision:
            return invalid
        assert isinstance(decision, PermissionDecision)
        effect: object = decision.effect
        reason: object = decision.reason
        rule_id: object = decision.rule_id
        if effect not in ("allow", "ask", "deny") or not valid_text(reason, 0, MAX_REASON_CHARS):
            return invalid
        if rule_id is not None and not is_id(rule_id):
            return invalid
        return Verdict(intent, decision.effect, decision.rule_id, decision.reason, "TOOL_POLICY_DENIED")

    def granted(self, intent: ToolPermissionIntent) -> bool:
        """Whether an earlier ``run``-scoped allow covers this intent (no operator is asked)."""
        return (intent.action, intent.subject) in self._grants

    def grant(self, intent: ToolPermissionIntent) -> None:
        """Remember an operator's allow for the rest of the run, when its scope is ``run``."""
        if intent.scope == "run":
            self._grants.add((intent.action, intent.subject))

    def capability(self, tool: Tool[Any]) -> Workspace | None:
        """The view a tool executes with: one operation for a workspace tool, else nothing."""
        boundary = boundary_of(tool)
        if type(boundary) is WorkspaceBoundary and self._workspace is not None:
            return restrict_workspace(self._workspace, boundary.capability)
        return None
