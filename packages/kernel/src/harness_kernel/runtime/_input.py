"""``RunInput``, ``RuntimeBudget`` and synchronous admission (spec §8.1 to §8.3, §8.12)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from harness_kernel._bounded import BoundedJsonError, bounded_json
from harness_kernel._gate import ToolDefinitionError, tool_definitions
from harness_kernel._ids import MAX_ID_CHARS, is_id
from harness_kernel._ids import now_timestamp as default_now
from harness_kernel._ids import random_id as default_new_id
from harness_kernel._json import MAX_SAFE_INTEGER, FrozenDict, has_lone_surrogate
from harness_kernel._messages import InvalidMessageError, freeze_messages
from harness_kernel.models._types import ChatMessage, ModelAdapter, ToolDefinition, Usage
from harness_kernel.policy._permission import PermissionController
from harness_kernel.runtime._context import ContextPolicy, check_context_policy
from harness_kernel.runtime._errors import InvalidRunInputError
from harness_kernel.runtime._shared import RunIds
from harness_kernel.store._ports import EventStore
from harness_tools import Tool, ToolRegistry, is_advertised
from harness_workspace import AbortSignal, Workspace, bind_workspace, isolation_of

__all__ = [
    "MAX_CONTEXT_MESSAGES",
    "MAX_ID_CHARS",
    "MAX_INPUT_CHARS",
    "MAX_TEXT_CHARS",
    "Admitted",
    "RunInput",
    "RuntimeBudget",
    "admit",
    "check_id",
    "default_new_id",
    "default_now",
]

MAX_INPUT_CHARS: Final = 16 * 1_048_576
MAX_TEXT_CHARS: Final = 16 * 1_048_576
MAX_CONTEXT_MESSAGES: Final = 10_000
MAX_TIMEOUT_MS: Final = 2**31 - 1


def check_id(value: object, field: str) -> str:
    """``value`` if it is an id, else ``InvalidRunInputError``."""
    if not is_id(value):
        raise InvalidRunInputError(
            f"{field} must be a str of 1..{MAX_ID_CHARS} characters, not only whitespace"
        )
    assert isinstance(value, str)
    return value


def _is_safe_int(value: object, minimum: int) -> bool:
    return type(value) is int and minimum <= value <= MAX_SAFE_INTEGER


def _check_text(value: object, field: str, *, minimum: int, maximum: int) -> str:
    if type(value) is not str or not minimum <= len(value) <= maximum or has_lone_surrogate(value):
        raise InvalidRunInputError(f"{field} must be a str of {minimum}..{maximum} characters")
    return value


@dataclass(frozen=True, kw_only=True)
class RuntimeBudget:
    """Limits of one run; ``None`` means unlimited. Every limit is a safe int ≥ 0."""

    max_steps: int = 8
    max_model_tokens: int | None = None
    max_tool_calls: int | None = None


@dataclass(frozen=True, kw_only=True)
class RunInput:
    """Everything one run needs; validated and snapshotted by ``MinimalAgentRuntime.run``.

    See spec §8.1 for each field's admission rule.
    """

    run_id: str
    session_id: str
    turn_id: str
    input: str
    model: str
    model_adapter: ModelAdapter
    event_store: EventStore
    tools: ToolRegistry | None = None
    permission: PermissionController | None = None
    budget: RuntimeBudget | None = None
    model_timeout_ms: int | None = 60_000
    task_id: str | None = None
    workspace: object | None = None
    context: Sequence[ChatMessage] | None = None
    system: str | None = None
    max_tokens: int | None = None
    provider_options: dict[str, Any] | None = None
    signal: AbortSignal | None = None
    now: Callable[[], str] | None = None
    new_id: Callable[[str], str] | None = None
    context_policy: ContextPolicy | None = None
    """Context accounting and compaction (issue #23 §2); ``None`` measures nothing."""
    checkpoints: bool = False
    """Store a ``runtime.checkpoint`` at each safe boundary, so the turn can be continued
    after a restart (issue #23 §3)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Admitted:
    """The validated snapshot a run works from; the caller's objects are never read again."""

    run_id: str
    session_id: str
    turn_id: str
    input: str
    model: str
    stream: Callable[..., object]
    append: Callable[..., object]
    append_many: Callable[..., object] | None
    tools: dict[str, Tool[Any]]
    decide: Callable[..., object] | None
    resolve: Callable[..., object] | None
    max_steps: int
    max_model_tokens: int | None
    max_tool_calls: int | None
    model_timeout_ms: int | None
    task_id: str | None
    workspace: Workspace | None
    context: tuple[ChatMessage, ...]
    system: str | None
    max_tokens: int | None
    provider_options: FrozenDict | None
    signal: AbortSignal | None
    now: Callable[[], str]
    new_id: Callable[[str], str]
    advertised: tuple[ToolDefinition, ...] | None
    policy: ContextPolicy | None = None
    counter: Callable[..., object] | None = None
    """The model adapter's ``count_tokens``, when it has one (a provider's tokenizer)."""
    checkpoints: bool = False
    last_checkpoint: str | None = None
    """The event id of the session's last ``runtime.checkpoint`` (a follow-up's base)."""
    checkpointed: int = 0
    """How many of ``context``'s messages that checkpoint already covers."""
    compactions: int = 0
    """The session's compaction revision so far."""
    resend_uncertain: bool = False
    """A continued turn may send its uncertain model request again (``ContinueInput``)."""
    pending: tuple[tuple[str, str], ...] = ()
    """Steering inherited from the session's previous turn: (message id, text), oldest first."""
    usage: Usage | None = None
    """The session's usage before this turn (a follow-up inherits it); ``None`` for none."""
    revision: int | None = None
    """The message revision this turn starts from; ``None`` means ``len(context)``."""

    def ids(self) -> RunIds:
        """The run, session and turn ids every event of the run carries."""
        return RunIds(run_id=self.run_id, session_id=self.session_id, turn_id=self.turn_id)


def _captured(
    owner: object, name: str, field: str, *, optional: bool = False
) -> Callable[..., object] | None:
    try:
        method: object = getattr(owner, name, None)  # harness-import-boundary: allow IB002 -- constant names
    except Exception as error:
        raise InvalidRunInputError(f"{field} could not be read") from error
    if method is None and optional:
        return None
    if not callable(method):
        raise InvalidRunInputError(f"{field} must be callable")
    return method


def _budget(value: object) -> tuple[int, int | None, int | None]:
    if value is None:
        return 8, None, None
    if type(value) is not RuntimeBudget:
        raise InvalidRunInputError("budget must be a RuntimeBudget or None")
    assert isinstance(value, RuntimeBudget)
    if not _is_safe_int(value.max_steps, 0):
        raise InvalidRunInputError("budget.max_steps must be a safe int >= 0")
    for field, limit in (
        ("max_model_tokens", value.max_model_tokens),
        ("max_tool_calls", value.max_tool_calls),
    ):
        if limit is not None and not _is_safe_int(limit, 0):
            raise InvalidRunInputError(f"budget.{field} must be a safe int >= 0 or None")
    return value.max_steps, value.max_model_tokens, value.max_tool_calls


def _tools(value: object) -> dict[str, Tool[Any]]:
    if value is None:
        return {}
    if type(value) is not ToolRegistry:
        raise InvalidRunInputError("tools must be a ToolRegistry or None")
    assert isinstance(value, ToolRegistry)
    return {tool.name: tool for tool in ToolRegistry(value.list()).list()}


def _context(value: object) -> tuple[ChatMessage, ...]:
    if value is None:
        return ()
    if type(value) is not list and type(value) is not tuple:
        raise InvalidRunInputError("context must be a list, tuple or None")
    assert isinstance(value, list | tuple)
    if len(value) > MAX_CONTEXT_MESSAGES:  # pyright: ignore[reportUnknownArgumentType]
        raise InvalidRunInputError(f"context must hold at most {MAX_CONTEXT_MESSAGES} messages")
    try:
        return freeze_messages(value)  # pyright: ignore[reportUnknownArgumentType]
    except InvalidMessageError as error:
        raise InvalidRunInputError(f"invalid context: {error}") from error


def _advertised(
    tools: dict[str, Tool[Any]], workspace: Workspace | None
) -> tuple[ToolDefinition, ...] | None:
    injected = workspace is not None
    effects_admitted = workspace is not None and isolation_of(workspace) is not None
    shown = (
        tool
        for tool in tools.values()
        if is_advertised(tool, workspace_injected=injected, effects_admitted=effects_admitted)
    )
    try:
        return tool_definitions(shown)
    except ToolDefinitionError as error:
        raise InvalidRunInputError(str(error)) from error


def _model_timeout(value: int | None) -> int | None:
    if value is not None and not (type(value) is int and 1 <= value <= MAX_TIMEOUT_MS):
        raise InvalidRunInputError(f"model_timeout_ms must be an int of 1..{MAX_TIMEOUT_MS} or None")
    return value


def _provider_options(value: dict[str, Any] | None) -> FrozenDict | None:
    if value is None:
        return None
    if type(value) is not dict:
        raise InvalidRunInputError("provider_options must be a dict or None")
    try:
        frozen, _ = bounded_json(value)
    except BoundedJsonError as error:
        raise InvalidRunInputError(f"provider_options is not bounded JSON: {error}") from error
    assert type(frozen) is FrozenDict
    return frozen


def admit(value: object, *, check_run_id: Callable[[str], None]) -> Admitted:
    """Validate and snapshot a ``RunInput`` (steps 1 to 3 of §8.2, in that order).

    Args:
        value: The candidate ``RunInput``.
        check_run_id: Step 2, called with the validated run id after every field is
            validated and before the tool definitions are computed; it raises when the id
            is taken.

    Raises:
        InvalidRunInputError: a field breaks its admission rule.
        WorkspaceOperationError: ``bind_workspace`` refused the workspace (unchanged).
    """
    if type(value) is not RunInput:
        raise InvalidRunInputError("run input must be a RunInput")
    assert isinstance(value, RunInput)
    run_id = check_id(value.run_id, "run_id")
    session_id = check_id(value.session_id, "session_id")
    turn_id = check_id(value.turn_id, "turn_id")
    text = _check_text(value.input, "input", minimum=1, maximum=MAX_INPUT_CHARS)
    model = check_id(value.model, "model")
    stream = _captured(value.model_adapter, "stream", "model_adapter.stream")
    append = _captured(value.event_store, "append", "event_store.append")
    append_many = _captured(value.event_store, "append_many", "event_store.append_many", optional=True)
    assert stream is not None
    assert append is not None
    tools = _tools(value.tools)
    decide = resolve = None
    if value.permission is not None:
        decide = _captured(value.permission, "decide", "permission.decide")
        resolve = _captured(value.permission, "resolve", "permission.resolve", optional=True)
    max_steps, max_model_tokens, max_tool_calls = _budget(value.budget)
    timeout = _model_timeout(value.model_timeout_ms)
    task_id = None if value.task_id is None else check_id(value.task_id, "task_id")
    workspace = None if value.workspace is None else bind_workspace(value.workspace)
    context = _context(value.context)
    system = (
        None
        if value.system is None
        else _check_text(value.system, "system", minimum=0, maximum=MAX_TEXT_CHARS)
    )
    if value.max_tokens is not None and not _is_safe_int(value.max_tokens, 1):
        raise InvalidRunInputError("max_tokens must be a safe int >= 1 or None")
    options = _provider_options(value.provider_options)
    if value.signal is not None and type(value.signal) is not AbortSignal:
        raise InvalidRunInputError("signal must be a harness_workspace.AbortSignal or None")
    now = cast("Callable[[], str] | None", _captured(value, "now", "now", optional=True)) or default_now
    new_id = (
        cast("Callable[[str], str] | None", _captured(value, "new_id", "new_id", optional=True))
        or default_new_id
    )
    policy = check_context_policy(value.context_policy)
    counter = _captured(value.model_adapter, "count_tokens", "model_adapter.count_tokens", optional=True)
    if type(value.checkpoints) is not bool:
        raise InvalidRunInputError("checkpoints must be a bool")
    check_run_id(run_id)
    advertised = _advertised(tools, workspace)
    return Admitted(
        run_id=run_id,
        session_id=session_id,
        turn_id=turn_id,
        input=text,
        model=model,
        stream=stream,
        append=append,
        append_many=append_many,
        tools=tools,
        decide=decide,
        resolve=resolve,
        max_steps=max_steps,
        max_model_tokens=max_model_tokens,
        max_tool_calls=max_tool_calls,
        model_timeout_ms=timeout,
        task_id=task_id,
        workspace=workspace,
        context=context,
        system=system,
        max_tokens=value.max_tokens,
        provider_options=options,
        signal=value.signal,
        now=now,
        new_id=new_id,
        advertised=advertised,
        policy=policy,
        counter=counter if policy is not None else None,
        checkpoints=value.checkpoints,
    )
