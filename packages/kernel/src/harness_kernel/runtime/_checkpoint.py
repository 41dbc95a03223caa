"""Runtime checkpoints: the versioned state a run stores at its safe boundaries (issue #23 §3).

A ``runtime.checkpoint`` event carries ``version`` and a JSON ``state``. Version 1 holds the
messages added to the session's context since the session's previous checkpoint (``base``
names that checkpoint's event id; ``None`` starts the context afresh, as the first
checkpoint and the first after a compaction do), the context's message count and revision,
and the run's accounting. Each checkpoint is therefore bounded by what changed, not by the
session's length, and the chain of a session's checkpoints rebuilds its context exactly.

Boundaries: ``turn`` (with the admission events), ``request`` (with ``model.request``: the
context is then exactly the request's messages) and ``response`` (with an assistant message
that asked for tools, so its calls survive a crash). Tool-call arguments are stored as their
compact JSON text, which keeps the state's depth fixed whatever the arguments hold.

Everything here is pure: :func:`decode_checkpoint`, :func:`rebuild_context` and
:func:`next_request` read events and return values, and raise typed errors for an unknown
version, invalid content or a broken chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

import msgspec

from harness_kernel._json import FrozenDict, JsonValue, decode_json, encode_json, freeze_json, thaw_json
from harness_kernel.events._model import Event, RuntimeCheckpointData
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    ModelRequest,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from harness_kernel.runtime._errors import AgentRuntimeError

__all__ = [
    "CHECKPOINT_VERSION",
    "MAX_CHECKPOINT_BYTES",
    "Boundary",
    "CheckpointError",
    "CheckpointVersionError",
    "RuntimeCheckpoint",
    "checkpoint_state",
    "decode_checkpoint",
    "next_request",
    "rebuild_context",
]

CHECKPOINT_VERSION: Final = 1
MAX_CHECKPOINT_BYTES: Final = 16 * 1_048_576
"""The compact JSON of one checkpoint's state, at most."""
MAX_CHECKPOINT_MESSAGES: Final = 20_000
"""Messages added by one checkpoint, at most (the JSON checks allow 100 000 values)."""

Boundary: TypeAlias = Literal["turn", "request", "response"]


class CheckpointError(AgentRuntimeError):
    """A runtime checkpoint is invalid, over its bounds, or does not continue its chain."""

    def __init__(self, message: str, code: str = "RUNTIME_CHECKPOINT_INVALID") -> None:
        super().__init__(code, message)


class CheckpointVersionError(CheckpointError):
    """A runtime checkpoint of a version this runtime does not know."""

    def __init__(self, version: int) -> None:
        super().__init__(
            f"runtime checkpoint version {version} is not supported (only {CHECKPOINT_VERSION})",
            "RUNTIME_CHECKPOINT_VERSION",
        )
        self.version = version


# ------------------------------------------------------------------ version 1 on the wire
class _Wire(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """Base of the version-1 records."""


class _Call(_Wire, frozen=True):
    id: str
    name: str
    arguments: str
    """The call's arguments as compact JSON text."""


class _Message(_Wire, frozen=True, tag_field="role"):
    """Base of the stored messages; the tag is ``role``."""


class _User(_Message, frozen=True, tag="user"):
    content: str


class _System(_Message, frozen=True, tag="system"):
    content: str


class _Assistant(_Message, frozen=True, tag="assistant"):
    content: str
    tool_calls: tuple[_Call, ...] = ()


class _Tool(_Message, frozen=True, tag="tool"):
    content: str
    name: str
    tool_call_id: str


class _Usage(_Wire, frozen=True):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class _StateV1(_Wire, frozen=True):
    base: str | None
    messages: tuple[_User | _System | _Assistant | _Tool, ...]
    message_count: int
    message_revision: int
    usage: _Usage
    model_requests: int
    tool_calls: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeCheckpoint:
    """One decoded ``runtime.checkpoint`` event."""

    event_id: str
    run_id: str
    session_id: str
    turn_id: str
    boundary: Boundary
    request_id: str | None
    """The request of a ``request`` or ``response`` checkpoint; ``None`` at a ``turn`` one."""
    base: str | None
    messages: tuple[ChatMessage, ...]
    """The messages this checkpoint adds to its base's context."""
    message_count: int
    message_revision: int
    usage: Usage
    model_requests: int
    tool_calls: int


# ------------------------------------------------------------------ encoding
def _wire_message(message: ChatMessage) -> dict[str, object]:
    if type(message) is UserMessage:
        return {"role": "user", "content": message.content}
    if type(message) is AssistantMessage:
        wire: dict[str, object] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            wire["toolCalls"] = [
                {"id": call.id, "name": call.name, "arguments": encode_json(call.arguments).decode()}
                for call in message.tool_calls
            ]
        return wire
    if type(message) is ToolMessage:
        return {
            "role": "tool",
            "content": message.content,
            "name": message.name,
            "toolCallId": message.tool_call_id,
        }
    assert type(message) is SystemMessage
    return {"role": "system", "content": message.content}


def checkpoint_state(
    *,
    base: str | None,
    added: Sequence[ChatMessage],
    message_count: int,
    message_revision: int,
    usage: Usage,
    model_requests: int,
    tool_calls: int,
) -> JsonValue:
    """The version-1 state of a checkpoint, as frozen JSON.

    Raises:
        CheckpointError: more than 20 000 added messages, or a state over 16 MiB.
    """
    if len(added) > MAX_CHECKPOINT_MESSAGES:
        raise CheckpointError(f"a checkpoint may add at most {MAX_CHECKPOINT_MESSAGES} messages")
    state: dict[str, object] = {
        "base": base,
        "messages": [_wire_message(message) for message in added],
        "messageCount": message_count,
        "messageRevision": message_revision,
        "usage": {
            "promptTokens": usage.prompt_tokens,
            "completionTokens": usage.completion_tokens,
            "totalTokens": usage.total_tokens,
        },
        "modelRequests": model_requests,
        "toolCalls": tool_calls,
    }
    if len(encode_json(state)) > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"a checkpoint state may hold at most {MAX_CHECKPOINT_BYTES} bytes")
    return freeze_json(state)


# ------------------------------------------------------------------ decoding
def _count(value: int, field: str) -> int:
    if not 0 <= value <= 2**53 - 1:
        raise CheckpointError(f"checkpoint {field} must be a safe int >= 0")
    return value


def _text(value: str, field: str, *, minimum: int = 0) -> str:
    if len(value) < minimum or any(0xD800 <= ord(char) <= 0xDFFF for char in value):
        raise CheckpointError(f"checkpoint {field} is not valid text")
    return value


def _message(wire: _User | _System | _Assistant | _Tool) -> ChatMessage:
    if isinstance(wire, _User):
        return UserMessage(content=_text(wire.content, "user content"))
    if isinstance(wire, _System):
        return SystemMessage(content=_text(wire.content, "system content"))
    if isinstance(wire, _Tool):
        return ToolMessage(
            content=_text(wire.content, "tool content"),
            name=_text(wire.name, "tool name", minimum=1),
            tool_call_id=_text(wire.tool_call_id, "tool call id", minimum=1),
        )
    calls: list[ToolCall] = []
    for call in wire.tool_calls:
        try:
            arguments = freeze_json(decode_json(call.arguments))
        except Exception as error:
            raise CheckpointError("checkpoint tool-call arguments are not JSON") from error
        calls.append(
            ToolCall(
                id=_text(call.id, "tool call id", minimum=1),
                name=_text(call.name, "tool name", minimum=1),
                arguments=arguments,
            )
        )
    return AssistantMessage(content=_text(wire.content, "assistant content"), tool_calls=tuple(calls) or None)


def decode_checkpoint(event: Event) -> RuntimeCheckpoint:
    """Decode a ``runtime.checkpoint`` event.

    Raises:
        CheckpointVersionError: a version other than 1.
        CheckpointError: not a checkpoint event, or its state is not a valid version-1 state.
    """
    data = event.data
    if event.type != "runtime.checkpoint" or type(data) is not RuntimeCheckpointData:
        raise CheckpointError("not a runtime.checkpoint event")
    assert isinstance(data, RuntimeCheckpointData)
    if data.version != CHECKPOINT_VERSION:
        raise CheckpointVersionError(data.version)
    raw = data.state
    if not isinstance(raw, FrozenDict):
        raise CheckpointError("checkpoint state must be a JSON object")
    try:
        state = msgspec.convert(thaw_json(raw), _StateV1)
    except msgspec.ValidationError as error:
        raise CheckpointError(f"checkpoint state is invalid: {error}") from error
    usage = state.usage
    counts = (
        _count(usage.prompt_tokens, "usage"),
        _count(usage.completion_tokens, "usage"),
        _count(usage.total_tokens, "usage"),
    )
    if counts[2] != counts[0] + counts[1]:
        raise CheckpointError("checkpoint usage total is not prompt + completion")
    messages = tuple(_message(message) for message in state.messages)
    count = _count(state.message_count, "messageCount")
    if state.base is None and count != len(messages):
        raise CheckpointError("a checkpoint without a base must hold its whole context")
    return RuntimeCheckpoint(
        event_id=event.event_id,
        run_id=data.run_id,
        session_id=data.session_id,
        turn_id=data.turn_id,
        boundary=data.boundary,
        request_id=data.request_id if isinstance(data.request_id, str) else None,
        base=state.base,
        messages=messages,
        message_count=count,
        message_revision=_count(state.message_revision, "messageRevision"),
        usage=Usage(prompt_tokens=counts[0], completion_tokens=counts[1], total_tokens=counts[2]),
        model_requests=_count(state.model_requests, "modelRequests"),
        tool_calls=_count(state.tool_calls, "toolCalls"),
    )


def rebuild_context(checkpoints: Sequence[RuntimeCheckpoint]) -> tuple[ChatMessage, ...]:
    """The context after the last of ``checkpoints`` (a session's checkpoints, in order).

    Raises:
        CheckpointError: none given, or a checkpoint does not continue the one before it
            (its base is not that checkpoint, or the message count disagrees).
    """
    if not checkpoints:
        raise CheckpointError("no checkpoint to rebuild from")
    start = max((i for i, cp in enumerate(checkpoints) if cp.base is None), default=None)
    if start is None:
        raise CheckpointError("no checkpoint starts the context")
    messages: list[ChatMessage] = []
    previous: RuntimeCheckpoint | None = None
    for checkpoint in checkpoints[start:]:
        if previous is not None and checkpoint.base != previous.event_id:
            raise CheckpointError(f"checkpoint {checkpoint.event_id} does not continue {previous.event_id}")
        messages.extend(checkpoint.messages)
        if len(messages) != checkpoint.message_count:
            raise CheckpointError(
                f"checkpoint {checkpoint.event_id} does not hold {checkpoint.message_count} messages"
            )
        previous = checkpoint
    return tuple(messages)


def next_request(
    checkpoints: Sequence[RuntimeCheckpoint],
    *,
    model: str,
    tools: tuple[ToolDefinition, ...] | None = None,
    system: str | None = None,
    max_tokens: int | None = None,
    max_model_tokens: int | None = None,
    provider_options: FrozenDict | None = None,
) -> ModelRequest:
    """The exact model request the run made (or was about to make) at the last ``request``
    checkpoint; the run's static inputs are given, the rest comes from the checkpoints.

    Raises:
        CheckpointError: the chain is broken, or the last checkpoint is not a ``request`` one.
    """
    messages = rebuild_context(checkpoints)
    last = checkpoints[-1]
    if last.boundary != "request":
        raise CheckpointError(f"the last checkpoint is a {last.boundary} checkpoint, not a request one")
    if max_model_tokens is not None:
        remaining = max_model_tokens - last.usage.total_tokens
        max_tokens = remaining if max_tokens is None else min(max_tokens, remaining)
    return ModelRequest(
        messages=messages,
        tools=tools,
        model=model,
        max_tokens=max_tokens,
        system=system,
        provider_options=provider_options,
        context_version=1,
        message_revision=last.message_revision,
    )
