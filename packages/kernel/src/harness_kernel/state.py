"""Message state: the versioned, deep-frozen conversation a runtime builds model requests from (spec §3).

A :class:`VersionedMessageState` is a value: every operation validates its inputs and
returns a new state. Messages are accepted only as the exact classes of
:mod:`harness_kernel.models`, every field re-validated (msgspec does not validate in
``__init__``); tool-call arguments and tool input schemas become the kernel's frozen JSON.
"""

# No ``from __future__ import annotations``: msgspec reads these annotations at runtime.

from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from harness_kernel._errors import HarnessError
from harness_kernel._json import (
    MAX_SAFE_INTEGER,
    FrozenDict,
    JsonDataError,
    JsonValue,
    freeze_json,
    has_lone_surrogate,
    is_exact_array,
)
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)

__all__ = [
    "MESSAGE_STATE_VERSION",
    "InvalidMessageStateError",
    "ModelContext",
    "VersionedMessageState",
    "append_message",
    "build_model_context",
    "create_message_state",
]

MESSAGE_STATE_VERSION: Final = 1
"""The only message-state (and model-context) version."""


class InvalidMessageStateError(HarnessError):
    """A message state, message or tool definition is out of contract.

    Code ``RUNTIME_INVALID_MESSAGE_STATE``.
    """

    def __init__(self, message: str) -> None:
        super().__init__("RUNTIME_INVALID_MESSAGE_STATE", message)


class VersionedMessageState(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """An immutable conversation.

    Attributes:
        version: Always 1.
        revision: Counts every message ever appended (never less than ``len(messages)``).
        messages: The messages, deep-frozen.
    """

    version: Literal[1] = 1
    revision: int
    messages: tuple[ChatMessage, ...]


class ModelContext(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What a model request is built from: a detached, deep-frozen snapshot of a state.

    Attributes:
        version: Always 1 (the state version it was built from).
        message_revision: The state's revision.
        messages: The state's messages.
        tools: The advertised tool definitions, or ``None`` when there are none to pass.
    """

    version: Literal[1] = 1
    message_revision: int
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolDefinition, ...] | None


def create_message_state(prior: Sequence[ChatMessage] = ()) -> VersionedMessageState:
    """A new state holding validated, deep-frozen copies of ``prior``; revision = ``len(prior)``.

    Raises:
        InvalidMessageStateError: ``prior`` is not an exact ``list`` or ``tuple`` of valid
            messages.
    """
    if not is_exact_array(prior):
        raise InvalidMessageStateError(f"prior messages must be a list or tuple, not {type(prior).__name__}")
    messages = _freeze_messages(prior)
    return VersionedMessageState(version=1, revision=len(messages), messages=messages)


def append_message(state: VersionedMessageState, message: ChatMessage) -> VersionedMessageState:
    """A new state with ``message`` (validated, deep-frozen) appended and the revision + 1.

    Raises:
        InvalidMessageStateError: ``state`` or ``message`` is invalid, or the revision would
            pass 2**53-1.
    """
    checked = _check_state(state)
    if checked.revision >= MAX_SAFE_INTEGER:
        raise InvalidMessageStateError("message state revision would exceed 2**53-1")
    messages = (*checked.messages, _freeze_message(message, len(checked.messages)))
    return VersionedMessageState(version=1, revision=checked.revision + 1, messages=messages)


def build_model_context(state: VersionedMessageState, tools: Sequence[ToolDefinition] | None) -> ModelContext:
    """A detached, deep-frozen :class:`ModelContext` of ``state`` and ``tools``.

    Later changes to the caller's objects have no effect on it.

    Raises:
        InvalidMessageStateError: ``state`` is invalid, or ``tools`` is neither ``None`` nor an
            exact ``list``/``tuple`` of valid ``ToolDefinition`` values.
    """
    checked = _check_state(state)
    frozen_tools: tuple[ToolDefinition, ...] | None = None
    if tools is not None:
        if not is_exact_array(tools):
            raise InvalidMessageStateError(f"tools must be a list, tuple or None, not {type(tools).__name__}")
        frozen_tools = tuple(_freeze_tool(tool, index) for index, tool in enumerate(tools))
    return ModelContext(
        version=1, message_revision=checked.revision, messages=checked.messages, tools=frozen_tools
    )


# ------------------------------------------------------------------ validation
def _check_state(state: object) -> VersionedMessageState:
    """``state`` re-validated; the same object when it already is canonical."""
    if type(state) is not VersionedMessageState:
        raise InvalidMessageStateError(f"expected a VersionedMessageState, not {type(state).__name__}")
    version: object = state.version
    if type(version) is not int or version != MESSAGE_STATE_VERSION:
        raise InvalidMessageStateError(f"unsupported message state version {version!r}")
    messages: object = state.messages
    if not is_exact_array(messages):
        raise InvalidMessageStateError("message state messages must be a tuple")
    revision: object = state.revision
    if type(revision) is not int or not len(messages) <= revision <= MAX_SAFE_INTEGER:
        raise InvalidMessageStateError(
            f"message state revision must be an int from {len(messages)} (the message count) to 2**53-1"
        )
    frozen = _freeze_messages(messages)
    if type(messages) is tuple and all(a is b for a, b in zip(frozen, messages, strict=True)):
        return state
    return VersionedMessageState(version=1, revision=revision, messages=frozen)


def _freeze_messages(messages: Sequence[object]) -> tuple[ChatMessage, ...]:
    return tuple(_freeze_message(message, index) for index, message in enumerate(messages))


def _freeze_message(message: object, index: int) -> ChatMessage:
    """``message`` re-validated and deep-frozen; the same object when it already is."""
    where = f"messages[{index}]"
    kind = type(message)
    if kind is SystemMessage or kind is UserMessage:
        assert isinstance(message, SystemMessage | UserMessage)
        _check_text(message.content, f"{where}.content")
        return message
    if kind is ToolMessage:
        assert isinstance(message, ToolMessage)
        _check_text(message.content, f"{where}.content")
        _check_text(message.name, f"{where}.name")
        _check_text(message.tool_call_id, f"{where}.tool_call_id")
        return message
    if kind is AssistantMessage:
        assert isinstance(message, AssistantMessage)
        _check_text(message.content, f"{where}.content")
        calls: object = message.tool_calls
        if calls is None:
            return message
        if not is_exact_array(calls):
            raise InvalidMessageStateError(f"{where}.tool_calls must be a list, tuple or None")
        frozen = tuple(
            _freeze_call(call, f"{where}.tool_calls[{position}]") for position, call in enumerate(calls)
        )
        if type(calls) is tuple and all(a is b for a, b in zip(frozen, calls, strict=True)):
            return message
        return AssistantMessage(content=message.content, tool_calls=frozen)
    raise InvalidMessageStateError(f"{where}: unknown message class {kind.__name__}")


def _freeze_call(call: object, where: str) -> ToolCall:
    if type(call) is not ToolCall:
        raise InvalidMessageStateError(f"{where} must be a ToolCall, not {type(call).__name__}")
    assert isinstance(call, ToolCall)
    _check_text(call.id, f"{where}.id")
    _check_text(call.name, f"{where}.name")
    arguments = _freeze_json_field(call.arguments, f"{where}.arguments")
    if arguments is call.arguments:
        return call
    return ToolCall(id=call.id, name=call.name, arguments=arguments)


def _freeze_tool(tool: object, index: int) -> ToolDefinition:
    where = f"tools[{index}]"
    if type(tool) is not ToolDefinition:
        raise InvalidMessageStateError(f"{where} must be a ToolDefinition, not {type(tool).__name__}")
    assert isinstance(tool, ToolDefinition)
    _check_text(tool.name, f"{where}.name")
    _check_text(tool.description, f"{where}.description")
    schema = _freeze_json_field(tool.input_schema, f"{where}.input_schema")
    if type(schema) is not FrozenDict:
        raise InvalidMessageStateError(f"{where}.input_schema must be a JSON object")
    if schema is tool.input_schema:
        return tool
    return ToolDefinition(name=tool.name, description=tool.description, input_schema=schema)


def _freeze_json_field(value: object, where: str) -> JsonValue:
    """Frozen JSON within the default limits (depth ≤ 64, ≤ 100 000 values, no cycles)."""
    try:
        return freeze_json(value)
    except JsonDataError as error:
        raise InvalidMessageStateError(f"{where} is not valid JSON data: {error}") from None


def _check_text(value: object, where: str) -> None:
    if type(value) is not str:
        raise InvalidMessageStateError(f"{where} must be a str, not {type(value).__name__}")
    assert isinstance(value, str)
    if has_lone_surrogate(value):
        raise InvalidMessageStateError(f"{where} holds a lone surrogate")
