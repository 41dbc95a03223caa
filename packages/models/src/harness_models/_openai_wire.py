"""The Chat Completions wire: the request body, the streamed chunks, and their assembly into frames.

Private to :mod:`harness_models._openai`. The request side turns a kernel ``ModelRequest``
into the documented JSON body, tool names aliased (decision 040). The response side decodes
each ``data:`` chunk with msgspec Structs that accept unknown fields (providers add them)
and assembles text deltas, tool-call fragments, the finish reason and the usage into the
kernel's frames.
"""

# No ``from __future__ import annotations``: msgspec reads these annotations at runtime.

from collections.abc import Mapping
from typing import Annotated, Final, Literal, TypeAlias

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
    MODEL_CONFIG_INVALID,
    MODEL_PROVIDER_ERROR,
    MODEL_STREAM_INVALID,
    ModelError,
)
from harness_models._errors import MODEL_TOOL_ARGUMENTS_INVALID as ARGUMENTS_INVALID
from harness_models._wire import StreamLimits, plain_json
from harness_workspace import JsonValue

__all__ = [
    "DONE",
    "RESERVED_BODY_KEYS",
    "ChunkAssembler",
    "MaxTokensField",
    "aliases_for",
    "encode_body",
]

DONE: Final = "[DONE]"
"""The ``data:`` payload that ends a Chat Completions stream."""

MaxTokensField: TypeAlias = Literal["max_tokens", "max_completion_tokens"]
"""Which body field carries ``request.max_tokens``."""

RESERVED_BODY_KEYS: Final = frozenset({"model", "messages", "tools", "stream", "stream_options", "n"})
"""Body keys the adapter owns; ``provider_options`` may not set them (nor the max-tokens field)."""

# How much of a provider's error text an exception message carries.
MAX_ERROR_EXCERPT: Final = 300
_MAX_COUNT: Final = 2**53 - 1


# ------------------------------------------------------------------ request records
class _Function(msgspec.Struct, frozen=True):
    name: str
    arguments: str


class _ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    type: str = "function"
    function: _Function


class _WireMessage(msgspec.Struct, frozen=True, tag_field="role", omit_defaults=True):
    """Base of the request messages; the tag ``role`` comes first on the wire."""


class _SystemMessage(_WireMessage, frozen=True, tag="system"):
    content: str


class _UserMessage(_WireMessage, frozen=True, tag="user"):
    content: str


class _AssistantMessage(_WireMessage, frozen=True, tag="assistant"):
    content: str
    tool_calls: tuple[_ToolCall, ...] | None = None


class _ToolMessage(_WireMessage, frozen=True, tag="tool"):
    tool_call_id: str
    content: str


class _FunctionDefinition(msgspec.Struct, frozen=True):
    name: str
    description: str
    parameters: Mapping[str, JsonValue]


class _ToolDefinition(msgspec.Struct, frozen=True, kw_only=True):
    type: str = "function"
    function: _FunctionDefinition


def aliases_for(request: ModelRequest) -> ToolNameAliases:
    """The alias table of ``request``: its tools' names, then the other tool names of its history.

    Raises:
        ToolNameAliasError: a name is invalid, or a tool is listed twice.
    """
    names = [tool.name for tool in request.tools or ()]
    seen = set(names)
    for message in request.messages:
        history: list[str] = []
        if type(message) is AssistantMessage:
            history = [call.name for call in message.tool_calls or ()]
        elif type(message) is ToolMessage:
            history = [message.name]
        for name in history:
            if name not in seen:
                seen.add(name)
                names.append(name)
    return ToolNameAliases(names)


def _wire_message(message: ChatMessage, aliases: ToolNameAliases) -> _WireMessage:
    if type(message) is AssistantMessage:
        calls = tuple(
            _ToolCall(id=call.id, function=_Function(aliases.alias(call.name), _json_text(call.arguments)))
            for call in message.tool_calls or ()
        )
        return _AssistantMessage(message.content, calls or None)
    if type(message) is ToolMessage:
        return _ToolMessage(message.tool_call_id, message.content)
    if type(message) is UserMessage:
        return _UserMessage(message.content)
    if type(message) is SystemMessage:
        return _SystemMessage(message.content)
    raise ModelError(
        MODEL_CONFIG_INVALID, f"a request message must be a ChatMessage, not {type(message).__name__}"
    )


def encode_body(
    model: str, request: ModelRequest, aliases: ToolNameAliases, max_tokens_field: MaxTokensField
) -> bytes:
    """The JSON body of ``POST /chat/completions`` for ``request``.

    Raises:
        ModelError: ``MODEL_CONFIG_INVALID`` when ``provider_options`` sets a key the adapter
            owns (:data:`RESERVED_BODY_KEYS`, or the max-tokens field when ``max_tokens`` is set).
    """
    messages: list[_WireMessage] = []
    if request.system is not None:
        messages.append(_SystemMessage(request.system))
    messages.extend(_wire_message(message, aliases) for message in request.messages)
    body: dict[str, object] = {"model": model, "messages": messages}
    if request.tools:
        body["tools"] = [
            _ToolDefinition(
                function=_FunctionDefinition(aliases.alias(t.name), t.description, t.input_schema)
            )
            for t in request.tools
        ]
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if request.max_tokens is not None:
        body[max_tokens_field] = request.max_tokens
    for key, value in (request.provider_options or {}).items():
        if key in RESERVED_BODY_KEYS or key in body:
            raise ModelError(MODEL_CONFIG_INVALID, f"provider option {key!r} is set by the adapter")
        body[key] = value
    return msgspec.json.encode(body, enc_hook=plain_json)


def _json_text(arguments: JsonValue) -> str:
    return msgspec.json.encode(arguments, enc_hook=plain_json).decode()


# ------------------------------------------------------------------ response chunks
Count = Annotated[int, msgspec.Meta(ge=0, le=_MAX_COUNT)]


class _FunctionDelta(msgspec.Struct, frozen=True):
    name: str | None = None
    arguments: str | None = None


class _ToolCallDelta(msgspec.Struct, frozen=True):
    index: Annotated[int, msgspec.Meta(ge=0, le=_MAX_COUNT)]
    id: str | None = None
    function: _FunctionDelta | None = None


class _Delta(msgspec.Struct, frozen=True):
    content: str | None = None
    refusal: str | None = None
    tool_calls: tuple[_ToolCallDelta, ...] | None = None


class _Choice(msgspec.Struct, frozen=True):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Usage(msgspec.Struct, frozen=True):
    prompt_tokens: Count = 0
    completion_tokens: Count = 0


class _ErrorBody(msgspec.Struct, frozen=True):
    message: str | None = None
    type: str | None = None


class _Chunk(msgspec.Struct, frozen=True):
    id: str | None = None
    choices: tuple[_Choice, ...] | None = None
    usage: _Usage | None = None
    error: _ErrorBody | None = None


_CHUNK_DECODER: Final = msgspec.json.Decoder(_Chunk)
_ERROR_DECODER: Final = msgspec.json.Decoder(_ErrorBody)
_ARGUMENTS_DECODER: Final = msgspec.json.Decoder()

_FINISH_REASONS: Final[Mapping[str, FinishReason]] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "error",
}


class _PendingCall:
    """The fragments of one streamed tool call, by its index."""

    __slots__ = ("fragments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.fragments: list[str] = []


def provider_error(message: str | None, kind: str | None, *, secret: str | None) -> ModelError:
    """A ``MODEL_PROVIDER_ERROR`` for an error the provider put in the stream: a bounded excerpt
    of its text, with ``secret`` (the key) blanked should the provider echo it."""
    text = (message or "no message")[:MAX_ERROR_EXCERPT]
    if secret:
        text = text.replace(secret, "<hidden>")
    label = f" ({kind[:60]})" if kind else ""
    return ModelError(MODEL_PROVIDER_ERROR, f"the provider reported an error{label}: {text}")


class ChunkAssembler:
    """Turns the ``data:`` payloads of one stream into frames.

    :meth:`feed` takes one payload and returns the text frames it carries (tool-call
    fragments are only collected); :meth:`finish` returns the tool-call frames and the
    completion once the stream ended with ``[DONE]``. The text and the arguments are
    counted against ``limits`` as they arrive.

    Args:
        aliases: The request's alias table, to map returned names back (``call_name``).
        secret: The API key, blanked out of any provider error text and of the answer's text.
        limits: The most text and argument bytes the response may carry.
    """

    def __init__(self, aliases: ToolNameAliases, *, secret: str | None, limits: StreamLimits) -> None:
        self._aliases = aliases
        self._secret = secret
        self._id: str | None = None
        self.answer = Answer(limits, secret=secret)
        self._calls: dict[int, _PendingCall] = {}
        self._finish: str | None = None
        self._usage = Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
        self.done = False

    def error_event(self, data: str) -> ModelError:
        """The error of an SSE event named ``error`` (some compatible servers send one)."""
        try:
            body = _ERROR_DECODER.decode(data)
        except msgspec.DecodeError:
            return provider_error(data, None, secret=self._secret)
        return provider_error(body.message, body.type, secret=self._secret)

    def feed(self, data: str) -> list[ModelEvent]:
        """The text frames of one payload; ``[DONE]`` marks the stream done.

        Raises:
            ModelError: ``MODEL_STREAM_INVALID`` (not JSON of the documented shape, a second
                choice, anything after ``[DONE]``), ``MODEL_PROVIDER_ERROR`` (an ``error``
                object), ``MODEL_STREAM_TOO_LARGE`` (more text or argument bytes than allowed).
        """
        if self.done:
            raise _invalid("the stream went on after [DONE]")
        if data.strip() == DONE:
            self.done = True
            return []
        try:
            chunk = _CHUNK_DECODER.decode(data)
        except msgspec.DecodeError as error:
            raise _invalid(f"a chunk is not JSON of the documented shape: {str(error)[:200]}") from None
        if chunk.error is not None:
            raise provider_error(chunk.error.message, chunk.error.type, secret=self._secret)
        if chunk.id and self._id is None:
            self._id = chunk.id
        if chunk.usage is not None:
            prompt, completion = chunk.usage.prompt_tokens, chunk.usage.completion_tokens
            self._usage = Usage(
                prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
            )
        frames: list[ModelEvent] = []
        for choice in chunk.choices or ():
            if choice.index != 0:
                raise _invalid(f"the stream carries a choice of index {choice.index}; only one is asked for")
            if choice.finish_reason is not None:
                self._finish = choice.finish_reason
            if choice.delta is not None:
                frames.extend(self._take_delta(choice.delta))
        return frames

    def _take_delta(self, delta: _Delta) -> list[TextDeltaFrame]:
        for fragment in delta.tool_calls or ():
            self._take_call_fragment(fragment)
        text = (delta.content or "") + (delta.refusal or "")
        return self.answer.add(text) if text else []

    def _take_call_fragment(self, fragment: _ToolCallDelta) -> None:
        pending = self._calls.setdefault(fragment.index, _PendingCall())
        if fragment.id:
            if pending.id is not None and pending.id != fragment.id:
                raise _invalid(f"tool call {fragment.index} changes its id")
            pending.id = fragment.id
        function = fragment.function
        if function is None:
            return
        if function.name:
            if pending.name is not None and pending.name != function.name:
                raise _invalid(f"tool call {fragment.index} changes its name")
            pending.name = function.name
        if function.arguments:
            self.answer.count_arguments(function.arguments)
            pending.fragments.append(function.arguments)

    def finish(self) -> list[ModelEvent]:
        """The text held back, the tool-call frames in index order, then the completion.

        Raises:
            ModelError: ``MODEL_STREAM_INVALID`` (no ``[DONE]``, no finish reason, a call
                without id or name, ``tool_calls`` without a call),
                ``MODEL_TOOL_ARGUMENTS_INVALID`` (arguments that are not a JSON object).
        """
        if not self.done:
            raise _invalid("the stream ended without [DONE]")
        if self._finish is None:
            raise _invalid("the stream ended without a finish reason")
        # An unknown reason is reported as an error finish: the run fails with the content kept.
        finish = _FINISH_REASONS.get(self._finish, "error")
        calls: tuple[ToolCall, ...] = ()
        if finish in ("stop", "tool_calls") and self._calls:
            calls = tuple(self._call(index, self._calls[index]) for index in sorted(self._calls))
            # Some compatible servers say ``stop`` after calling tools.
            finish = "tool_calls"
        elif finish == "tool_calls":
            raise _invalid("the finish reason is tool_calls but no tool call was streamed")
        held = self.answer.end()
        response = CompletionResponse(
            id=self._id or "",
            content=self.answer.content,
            tool_calls=calls,
            usage=self._usage,
            finish_reason=finish,
        )
        return [*held, *(ToolCallFrame(call) for call in calls), ResponseCompletedFrame(response)]

    def _call(self, index: int, pending: _PendingCall) -> ToolCall:
        if not pending.id or not pending.name:
            raise _invalid(f"tool call {index} has no id or no name")
        text = "".join(pending.fragments)
        arguments: object = {}
        if text.strip():
            try:
                arguments = _ARGUMENTS_DECODER.decode(text)
            except msgspec.DecodeError:
                raise ModelError(
                    ARGUMENTS_INVALID, f"the arguments of tool call {index} are not JSON"
                ) from None
        if type(arguments) is not dict:
            raise ModelError(ARGUMENTS_INVALID, f"the arguments of tool call {index} are not a JSON object")
        return ToolCall(id=pending.id, name=self._aliases.call_name(pending.name), arguments=arguments)  # pyright: ignore[reportUnknownArgumentType]


def _invalid(message: str) -> ModelError:
    return ModelError(MODEL_STREAM_INVALID, message)
