"""The Anthropic Messages wire: the request body from a ``ModelRequest``, and the stream's
server-sent events back into the kernel's frames.

Written from the public Messages API reference (``POST /v1/messages``, ``anthropic-version:
2023-06-01``) and its streaming guide. The response records ignore unknown fields and unknown
event, block and delta types, because the API's versioning policy says new ones may appear;
what the adapter relies on is checked strictly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Final, Literal, TypeAlias, cast

import msgspec

from harness_kernel.models import (
    AssistantMessage,
    ChatMessage,
    CompletionResponse,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    SystemMessage,
    TextDeltaFrame,
    ToolCall,
    ToolCallFrame,
    ToolMessage,
    ToolNameAliases,
    Usage,
    UserMessage,
)
from harness_models._answer import Answer
from harness_models._errors import (
    MODEL_OVERLOADED,
    MODEL_PROVIDER_ERROR,
    MODEL_RATE_LIMITED,
    MODEL_SERVER_ERROR,
    MODEL_STREAM_INVALID,
    MODEL_TOOL_ARGUMENTS_INVALID,
    ModelError,
)
from harness_models._wire import SseEvent, StreamLimits, plain_json
from harness_workspace import JsonValue

__all__ = ["RESERVED_BODY_KEYS", "StreamDecoder", "aliases_for", "request_body"]

RESERVED_BODY_KEYS: Final = frozenset({"model", "messages", "tools", "stream", "system"})
"""Body keys ``provider_options`` never override: the adapter owns them."""

_MAX_ERROR_TEXT: Final = 500

# ------------------------------------------------------------------ request records
Json: TypeAlias = JsonValue


class _TextBlock(msgspec.Struct, frozen=True, tag_field="type", tag="text"):
    text: str


class _ToolUseBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_use"):
    id: str
    name: str
    input: Json


class _ToolResultBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_result"):
    tool_use_id: str
    content: str


_Block: TypeAlias = _TextBlock | _ToolUseBlock | _ToolResultBlock


class _Message(msgspec.Struct, frozen=True):
    role: Literal["user", "assistant"]
    content: list[_Block]


class _Tool(msgspec.Struct, frozen=True):
    name: str
    description: str
    input_schema: Mapping[str, Json]


class _Body(msgspec.Struct, frozen=True, omit_defaults=True):
    model: str
    max_tokens: int
    messages: list[_Message]
    stream: bool
    system: str | None = None
    tools: list[_Tool] | None = None


def aliases_for(request: ModelRequest) -> ToolNameAliases:
    """The alias table of one request: the advertised tools' names, then every tool name of
    the history (assistant calls, tool results), each once (decision 040)."""
    names: dict[str, None] = {}
    for tool in request.tools or ():
        names[tool.name] = None
    for message in request.messages:
        if type(message) is AssistantMessage:
            for call in message.tool_calls or ():
                names[call.name] = None
        elif type(message) is ToolMessage:
            names[message.name] = None
    return ToolNameAliases(names)


def request_body(
    request: ModelRequest, *, model: str, default_max_tokens: int, aliases: ToolNameAliases
) -> bytes:
    """The JSON body of ``POST /v1/messages`` for ``request``.

    ``system`` joins ``request.system`` and every ``SystemMessage`` (the API takes system
    text only at the top level); tool results become ``tool_result`` blocks of a ``user``
    message; consecutive messages of one role merge into one; empty text is left out (the
    API refuses empty text blocks). ``provider_options`` add keys the body does not set;
    they never replace :data:`RESERVED_BODY_KEYS`, nor a ``max_tokens`` the request sets.
    """
    system_parts = [request.system] if request.system else []
    system_parts.extend(m.content for m in request.messages if type(m) is SystemMessage and m.content)
    tools = [
        _Tool(name=aliases.alias(tool.name), description=tool.description, input_schema=tool.input_schema)
        for tool in request.tools or ()
    ]
    options = dict(request.provider_options or {})
    max_tokens = request.max_tokens
    if max_tokens is None:
        from_options = options.get("max_tokens")
        max_tokens = from_options if type(from_options) is int else default_max_tokens
    options.pop("max_tokens", None)
    body = _Body(
        model=model,
        max_tokens=max_tokens,
        messages=_messages(request.messages, aliases),
        stream=True,
        system="\n\n".join(system_parts) or None,
        tools=tools or None,
    )
    encoded = msgspec.to_builtins(body, enc_hook=plain_json)
    for key, value in options.items():
        if key not in RESERVED_BODY_KEYS:
            encoded[key] = value
    return msgspec.json.encode(encoded, enc_hook=plain_json)


def _messages(history: Sequence[ChatMessage], aliases: ToolNameAliases) -> list[_Message]:
    merged: list[_Message] = []
    for message in history:
        role: Literal["user", "assistant"]
        blocks: list[_Block] = []
        if type(message) is UserMessage:
            role = "user"
            if message.content:
                blocks.append(_TextBlock(message.content))
        elif type(message) is AssistantMessage:
            role = "assistant"
            if message.content:
                blocks.append(_TextBlock(message.content))
            for call in message.tool_calls or ():
                blocks.append(_ToolUseBlock(id=call.id, name=aliases.alias(call.name), input=call.arguments))
        elif type(message) is ToolMessage:
            # The API takes tool results only as blocks of a user message.
            role = "user"
            blocks.append(_ToolResultBlock(tool_use_id=message.tool_call_id, content=message.content))
        else:  # SystemMessage: gathered into the top-level ``system``
            continue
        if not blocks:
            continue
        if merged and merged[-1].role == role:
            merged[-1].content.extend(blocks)
        else:
            merged.append(_Message(role=role, content=blocks))
    return merged


# ------------------------------------------------------------------ stream records
Count: TypeAlias = Annotated[int, msgspec.Meta(ge=0, le=2**53 - 1)]


class _Usage(msgspec.Struct, frozen=True):
    input_tokens: Count | None = None
    output_tokens: Count | None = None
    cache_creation_input_tokens: Count | None = None
    cache_read_input_tokens: Count | None = None


class _StartedMessage(msgspec.Struct, frozen=True):
    id: str
    usage: _Usage = _Usage()


class _MessageStart(msgspec.Struct, frozen=True, tag_field="type", tag="message_start"):
    message: _StartedMessage


class _StartedBlock(msgspec.Struct, frozen=True):
    type: str
    id: str | None = None
    name: str | None = None
    text: str | None = None


class _BlockStart(msgspec.Struct, frozen=True, tag_field="type", tag="content_block_start"):
    index: Count
    content_block: _StartedBlock


class _Delta(msgspec.Struct, frozen=True):
    type: str
    text: str | None = None
    partial_json: str | None = None


class _BlockDelta(msgspec.Struct, frozen=True, tag_field="type", tag="content_block_delta"):
    index: Count
    delta: _Delta


class _BlockStop(msgspec.Struct, frozen=True, tag_field="type", tag="content_block_stop"):
    index: Count


class _MessageChange(msgspec.Struct, frozen=True):
    stop_reason: str | None = None


class _MessageDelta(msgspec.Struct, frozen=True, tag_field="type", tag="message_delta"):
    delta: _MessageChange
    usage: _Usage = _Usage()


class _MessageStop(msgspec.Struct, frozen=True, tag_field="type", tag="message_stop"):
    pass


class _Ping(msgspec.Struct, frozen=True, tag_field="type", tag="ping"):
    pass


class _ErrorDetail(msgspec.Struct, frozen=True):
    type: str
    message: str = ""


class _Error(msgspec.Struct, frozen=True, tag_field="type", tag="error"):
    error: _ErrorDetail


class _Head(msgspec.Struct, frozen=True):
    type: str


_Event: TypeAlias = (
    _MessageStart | _BlockStart | _BlockDelta | _BlockStop | _MessageDelta | _MessageStop | _Ping | _Error
)
_KNOWN_TYPES: Final = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    }
)
_EVENT_DECODER: Final = msgspec.json.Decoder(_Event)
_HEAD_DECODER: Final = msgspec.json.Decoder(_Head)

_FINISH: Final[Mapping[str, FinishReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}
"""Stop reasons the kernel has a word for; every other one (``refusal``, ``pause_turn``, a
new one) finishes as ``error``: the text is kept, the run does not pass as completed."""

_ERROR_CODES: Final[Mapping[str, tuple[str, bool]]] = {
    "overloaded_error": (MODEL_OVERLOADED, True),
    "api_error": (MODEL_SERVER_ERROR, True),
    "rate_limit_error": (MODEL_RATE_LIMITED, True),
}


def _invalid(message: str) -> ModelError:
    return ModelError(MODEL_STREAM_INVALID, f"anthropic stream: {message}")


@dataclass(slots=True)
class _ToolUse:
    id: str
    name: str
    fragments: list[str] = field(default_factory=list[str])


@dataclass(slots=True)
class StreamDecoder:
    """The state of one response stream: feed it each event, then ask for the last frames.

    Text deltas come out of :meth:`feed` as they arrive; tool calls and the completion come
    out of :meth:`finish` once ``message_stop`` was seen. The text and the tool inputs are
    counted against ``limits`` as they arrive.

    Args:
        aliases: The request's alias table; calls are named with its ``call_name``.
        secret: The API key, blanked out of the answer's text.
        limits: The most text and tool-input bytes the response may carry.
    """

    aliases: ToolNameAliases
    secret: str | None = None
    limits: StreamLimits = field(default_factory=StreamLimits)
    answer: Answer = field(init=False)
    message_id: str | None = None
    stopped: bool = False
    stop_reason: str | None = None
    usage: _Usage = field(default_factory=_Usage)
    output_tokens: int | None = None
    blocks: dict[int, _ToolUse | str] = field(default_factory=dict[int, "_ToolUse | str"])
    open_blocks: set[int] = field(default_factory=set[int])

    def __post_init__(self) -> None:
        self.answer = Answer(self.limits, secret=self.secret)

    def feed(self, sse: SseEvent) -> Iterator[TextDeltaFrame]:
        """Take one server-sent event; yield the text deltas it carries.

        Raises:
            ModelError: ``MODEL_STREAM_INVALID`` for JSON that is not a documented event or
                an event out of order; ``MODEL_STREAM_TOO_LARGE`` past a limit; the mapped
                code of an ``error`` event.
        """
        if self.stopped:
            raise _invalid("an event followed message_stop")
        event = _decode(sse.data)
        if event is None or type(event) is _Ping:
            return
        if type(event) is _Error:
            raise _error_event(event.error)
        if type(event) is _MessageStart:
            if self.message_id is not None:
                raise _invalid("message_start came twice")
            self.message_id = event.message.id
            self.usage = event.message.usage
            return
        if self.message_id is None:
            raise _invalid(f"{type(event).__struct_config__.tag} came before message_start")
        if type(event) is _BlockStart:
            self._start_block(event)
            if event.content_block.type == "text" and event.content_block.text:
                yield from self._text(event.content_block.text)
        elif type(event) is _BlockDelta:
            yield from self._delta(event)
        elif type(event) is _BlockStop:
            if event.index not in self.open_blocks:
                raise _invalid(f"content_block_stop for block {event.index}, which is not open")
            self.open_blocks.discard(event.index)
        elif type(event) is _MessageDelta:
            if event.delta.stop_reason is not None:
                self.stop_reason = event.delta.stop_reason
            self._count(event.usage)
        elif type(event) is _MessageStop:
            self.stopped = True

    def _start_block(self, event: _BlockStart) -> None:
        index, block = event.index, event.content_block
        if index in self.blocks or index in self.open_blocks:
            raise _invalid(f"content block {index} started twice")
        self.open_blocks.add(index)
        if block.type == "text":
            self.blocks[index] = "text"
        elif block.type == "tool_use":
            if not block.id or not block.name:
                raise _invalid(f"tool_use block {index} has no id or name")
            self.blocks[index] = _ToolUse(block.id, block.name)
        else:  # thinking, server tools, new kinds: not ours to show
            self.blocks[index] = "other"

    def _delta(self, event: _BlockDelta) -> Iterator[TextDeltaFrame]:
        index, delta = event.index, event.delta
        if index not in self.open_blocks:
            raise _invalid(f"content_block_delta for block {index}, which is not open")
        block = self.blocks[index]
        if delta.type == "text_delta":
            if block != "text" or delta.text is None:
                raise _invalid(f"text_delta for block {index}, which is not a text block")
            yield from self._text(delta.text)
        elif delta.type == "input_json_delta":
            if type(block) is not _ToolUse or delta.partial_json is None:
                raise _invalid(f"input_json_delta for block {index}, which is not a tool_use block")
            self.answer.count_arguments(delta.partial_json)
            block.fragments.append(delta.partial_json)
        # Other deltas (thinking, signatures, citations, new kinds) carry nothing we show.

    def _text(self, text: str) -> Iterator[TextDeltaFrame]:
        yield from self.answer.add(text)

    def _count(self, usage: _Usage) -> None:
        # message_delta counts are cumulative: the last one wins, field by field.
        self.usage = _Usage(
            input_tokens=_last(self.usage.input_tokens, usage.input_tokens),
            output_tokens=_last(self.usage.output_tokens, usage.output_tokens),
            cache_creation_input_tokens=_last(
                self.usage.cache_creation_input_tokens, usage.cache_creation_input_tokens
            ),
            cache_read_input_tokens=_last(self.usage.cache_read_input_tokens, usage.cache_read_input_tokens),
        )

    def finish(self) -> Iterator[ModelEvent]:
        """The text held back, the tool calls in block order, then the completion (after
        ``message_stop``).

        Raises:
            ModelError: ``MODEL_STREAM_INVALID`` when the stream ended early, without a stop
                reason, or with blocks left open or a stop reason its blocks contradict;
                ``MODEL_TOOL_ARGUMENTS_INVALID`` when a call's input is not a JSON object.
        """
        if not self.stopped:
            raise _invalid("the stream ended before message_stop")
        if self.open_blocks:
            raise _invalid(f"content block {min(self.open_blocks)} was never stopped")
        if self.stop_reason is None:
            raise _invalid("the message ended without a stop_reason")
        assert self.message_id is not None
        finish: FinishReason = _FINISH.get(self.stop_reason, "error")
        uses = [self.blocks[index] for index in sorted(self.blocks)]
        calls: tuple[ToolCall, ...] = ()
        if finish == "tool_calls":
            calls = tuple(self._call(use) for use in uses if type(use) is _ToolUse)
            if not calls:
                raise _invalid("stop_reason tool_use without a tool_use block")
        elif finish == "stop" and any(type(use) is _ToolUse for use in uses):
            raise _invalid(f"stop_reason {self.stop_reason} with a tool_use block")
        # length / error: a call the provider cut short is never run; the finish fails the run.
        yield from self.answer.end()
        for call in calls:
            yield ToolCallFrame(call)
        yield ResponseCompletedFrame(
            CompletionResponse(
                id=self.message_id,
                content=self.answer.content,
                tool_calls=calls,
                usage=self._usage(),
                finish_reason=finish,
            )
        )

    def _call(self, use: _ToolUse) -> ToolCall:
        text = "".join(use.fragments)
        try:
            arguments: object = msgspec.json.decode(text) if text.strip() else {}
        except msgspec.DecodeError:
            raise ModelError(
                MODEL_TOOL_ARGUMENTS_INVALID, f"tool_use {use.id}: the input is not valid JSON"
            ) from None
        if type(arguments) is not dict:
            raise ModelError(
                MODEL_TOOL_ARGUMENTS_INVALID,
                f"tool_use {use.id}: the input is a JSON {type(arguments).__name__}, not an object",
            )
        name = self.aliases.call_name(use.name)
        return ToolCall(id=use.id, name=name, arguments=cast(JsonValue, arguments))

    def _usage(self) -> Usage:
        usage = self.usage
        # Cached prompt tokens are prompt tokens too: the API counts them apart from input_tokens.
        prompt = (
            (usage.input_tokens or 0)
            + (usage.cache_creation_input_tokens or 0)
            + (usage.cache_read_input_tokens or 0)
        )
        completion = usage.output_tokens or 0
        return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def _last(before: int | None, now: int | None) -> int | None:
    return before if now is None else now


def _decode(data: str) -> _Event | None:
    """One event's JSON, or ``None`` for a well-formed event of a type this adapter does not know."""
    try:
        return _EVENT_DECODER.decode(data)
    except msgspec.ValidationError:
        try:
            head = _HEAD_DECODER.decode(data).type
        except msgspec.DecodeError:
            raise _invalid("an event is not a JSON object with a type") from None
        if head in _KNOWN_TYPES:
            raise _invalid(f"a {head[:100]} event does not have the documented shape") from None
        return None
    except msgspec.DecodeError:
        raise _invalid("an event's data is not JSON") from None


def _error_event(error: _ErrorDetail) -> ModelError:
    code, retryable = _ERROR_CODES.get(error.type, (MODEL_PROVIDER_ERROR, False))
    text = error.message[:_MAX_ERROR_TEXT]
    return ModelError(code, f"anthropic error event {error.type[:100]}: {text}", retryable=retryable)
