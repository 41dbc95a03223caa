"""The model vocabulary: messages, requests, responses, stream frames and the model ports (spec §4.1).

Every record is a frozen msgspec Struct, camelCase when encoded. msgspec does not validate
in ``__init__``, and these records deliberately do not either: a test may script a
malformed frame on purpose, and the runtime and the message state re-validate every record
they accept (exact class, every field).
"""

# No ``from __future__ import annotations``: msgspec reads these annotations at runtime.

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Final, Literal, Protocol, TypeAlias

import msgspec

from harness_kernel.events._model import FinishReason
from harness_workspace import AbortSignal, JsonValue

__all__ = [
    "MAX_MODEL_TEXT_DELTA_CHARS",
    "AssistantMessage",
    "ChatMessage",
    "CompletionRequest",
    "CompletionResponse",
    "FinishReason",
    "Model",
    "ModelAdapter",
    "ModelEvent",
    "ModelRequest",
    "ResponseCompletedFrame",
    "SystemMessage",
    "TextDeltaFrame",
    "ToolCall",
    "ToolCallFrame",
    "ToolDefinition",
    "ToolMessage",
    "Usage",
    "UserMessage",
    "abort_reason_error",
    "add_usage",
    "empty_usage",
    "estimate_tokens",
    "normalize_model_text_deltas",
    "raise_if_aborted",
]

MAX_MODEL_TEXT_DELTA_CHARS: Final = 1_048_576
"""The longest text delta (in code points) a model stream may carry in one frame."""


class _Record(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True, omit_defaults=True):
    """Base of the model records: frozen, camelCase on the wire, optional fields omitted."""


# ------------------------------------------------------------------ tools and usage
class ToolCall(_Record, frozen=True):
    """One tool call a model asked for.

    Attributes:
        id: The model's id for the call, unique within its response.
        name: The tool's name.
        arguments: The call's arguments, arbitrary JSON data.
    """

    id: str
    name: str
    arguments: JsonValue


class ToolDefinition(_Record, frozen=True):
    """A tool as advertised to a model.

    Attributes:
        name: The tool's name.
        description: What the tool does, for the model.
        input_schema: The JSON Schema of the tool's arguments (a JSON object).
    """

    name: str
    description: str
    input_schema: Mapping[str, JsonValue]


class Usage(_Record, frozen=True, omit_defaults=False):
    """Token usage of one model response (or a sum of them)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


# ------------------------------------------------------------------ messages (tag ``role``)
class _Message(_Record, frozen=True, tag_field="role"):
    """Base of the chat messages; the wire tag is ``role``."""


class SystemMessage(_Message, frozen=True, tag="system"):
    """Instructions from the system."""

    content: str


class UserMessage(_Message, frozen=True, tag="user"):
    """A message from the user (the run's input or steering)."""

    content: str


class AssistantMessage(_Message, frozen=True, tag="assistant"):
    """A model's answer, with the tool calls it asked for (``None`` for none)."""

    content: str
    tool_calls: tuple[ToolCall, ...] | None = None


class ToolMessage(_Message, frozen=True, tag="tool"):
    """The observation of one tool call, fed back to the model."""

    content: str
    name: str
    tool_call_id: str


ChatMessage: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""Any chat message; encoded with its ``role`` tag."""


# ------------------------------------------------------------------ requests and responses
class CompletionRequest(_Record, frozen=True):
    """What a model is asked to complete.

    Attributes:
        messages: The conversation so far.
        tools: The tools the model may call, or ``None`` when none is advertised.
        model: A model name for the provider, if any.
        max_tokens: The most completion tokens wanted, if limited.
        system: System instructions, if any.
        provider_options: Provider-specific options (a JSON object), if any.
        signal: Aborted when the caller no longer wants the answer.
    """

    messages: Sequence[ChatMessage]
    tools: Sequence[ToolDefinition] | None = None
    model: str | None = None
    max_tokens: int | None = None
    system: str | None = None
    provider_options: Mapping[str, JsonValue] | None = None
    signal: AbortSignal | None = None


class ModelRequest(CompletionRequest, frozen=True):
    """A :class:`CompletionRequest` built from a versioned message state.

    Attributes:
        context_version: The message-state version (1) the context was built from.
        message_revision: The state's revision the messages were taken at.
    """

    context_version: Literal[1] | None = None
    message_revision: int | None = None


class CompletionResponse(_Record, frozen=True, omit_defaults=False):
    """A model's complete answer to one request."""

    id: str
    content: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: FinishReason


# ------------------------------------------------------------------ stream frames (tag ``type``)
class _Frame(_Record, frozen=True, tag_field="type"):
    """Base of the stream frames; the wire tag is ``type``."""


class TextDeltaFrame(_Frame, frozen=True, tag="text.delta"):
    """A piece of the answer's text, streamed before any tool call."""

    delta: str


class ToolCallFrame(_Frame, frozen=True, tag="tool.call"):
    """One tool call of the answer, streamed before the completion."""

    call: ToolCall


class ResponseCompletedFrame(_Frame, frozen=True, tag="response.completed"):
    """The complete answer; always the last frame of a stream."""

    response: CompletionResponse


ModelEvent: TypeAlias = TextDeltaFrame | ToolCallFrame | ResponseCompletedFrame
"""Any frame of a model stream; encoded with its ``type`` tag."""


# ------------------------------------------------------------------ ports
class ModelAdapter(Protocol):
    """The streaming model port the runtime drives.

    ``stream`` must return an async iterator synchronously (an async generator method
    qualifies); the runtime pulls frames one at a time and closes the iterator at the end.
    """

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Answer ``request`` as a stream of frames ending with a ``ResponseCompletedFrame``."""
        ...


class Model(Protocol):
    """The legacy one-shot model port; :func:`adapt_model` turns it into a :class:`ModelAdapter`."""

    name: str

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Answer ``request`` in one piece."""
        ...


# ------------------------------------------------------------------ helpers
def normalize_model_text_deltas(chunks: Iterable[str]) -> tuple[str, ...]:
    """Drop empty chunks and split those longer than :data:`MAX_MODEL_TEXT_DELTA_CHARS`.

    The concatenation of the result equals the concatenation of ``chunks``.

    Raises:
        TypeError: a chunk is not an exact ``str``.
    """
    deltas: list[str] = []
    for chunk in chunks:
        if type(chunk) is not str:
            raise TypeError(f"text delta chunks must be str, not {type(chunk).__name__}")
        for start in range(0, len(chunk), MAX_MODEL_TEXT_DELTA_CHARS):
            deltas.append(chunk[start : start + MAX_MODEL_TEXT_DELTA_CHARS])
    return tuple(deltas)


def estimate_tokens(text: str) -> int:
    """A rough token count: 0 for empty text, else one token per 4 code points (at least 1)."""
    return (len(text) + 3) // 4


def empty_usage() -> Usage:
    """Usage with every count at zero."""
    return Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)


def add_usage(a: Usage, b: Usage) -> Usage:
    """The field-by-field sum of two usages."""
    return Usage(
        prompt_tokens=a.prompt_tokens + b.prompt_tokens,
        completion_tokens=a.completion_tokens + b.completion_tokens,
        total_tokens=a.total_tokens + b.total_tokens,
    )


def abort_reason_error(reason: object) -> BaseException:
    """What "raise the signal's reason" raises: the reason itself if it is an exception
    instance, else a ``RuntimeError`` carrying it."""
    if isinstance(reason, BaseException):
        return reason
    return RuntimeError(reason)


def raise_if_aborted(signal: AbortSignal | None) -> None:
    """Raise the signal's reason (see :func:`abort_reason_error`) if ``signal`` is aborted."""
    if signal is not None and signal.aborted:
        raise abort_reason_error(signal.reason)
