"""The model vocabulary: frozen records, camelCase tagged encoding and the small helpers (spec §4.1)."""

from __future__ import annotations

import msgspec
import pytest

from harness_kernel.models import (
    AssistantMessage,
    ChatMessage,
    CompletionRequest,
    CompletionResponse,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    SystemMessage,
    TextDeltaFrame,
    ToolCall,
    ToolCallFrame,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
    normalize_model_text_deltas,
)
from harness_kernel.models._types import MAX_MODEL_TEXT_DELTA_CHARS, add_usage, empty_usage, estimate_tokens


def test_messages_encode_camel_case_with_a_role_tag_and_decode_back() -> None:
    messages: list[ChatMessage] = [
        SystemMessage("be brief"),
        UserMessage("hi"),
        AssistantMessage("", tool_calls=(ToolCall("c1", "echo", {"text": "x"}),)),
        ToolMessage("x", name="echo", tool_call_id="c1"),
    ]
    wire = msgspec.json.encode(messages)
    assert wire == (
        b'[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},'
        b'{"role":"assistant","content":"","toolCalls":[{"id":"c1","name":"echo","arguments":{"text":"x"}}]},'
        b'{"role":"tool","content":"x","name":"echo","toolCallId":"c1"}]'
    )
    decoded = msgspec.json.decode(wire, type=list[ChatMessage])
    assert [type(m) for m in decoded] == [SystemMessage, UserMessage, AssistantMessage, ToolMessage]
    assert decoded[3] == messages[3]


def test_assistant_message_without_tool_calls_omits_the_key() -> None:
    assert msgspec.json.encode(AssistantMessage("done")) == b'{"role":"assistant","content":"done"}'


def test_frames_encode_with_a_type_tag() -> None:
    response = CompletionResponse(
        id="r1", content="ok", tool_calls=(), usage=Usage(1, 2, 3), finish_reason="stop"
    )
    frames: list[ModelEvent] = [
        TextDeltaFrame("ok"),
        ToolCallFrame(ToolCall("c", "n", None)),
        ResponseCompletedFrame(response),
    ]
    wire = msgspec.json.encode(frames)
    assert wire == (
        b'[{"type":"text.delta","delta":"ok"},'
        b'{"type":"tool.call","call":{"id":"c","name":"n","arguments":null}},'
        b'{"type":"response.completed","response":{"id":"r1","content":"ok","toolCalls":[],'
        b'"usage":{"promptTokens":1,"completionTokens":2,"totalTokens":3},"finishReason":"stop"}}]'
    )
    assert msgspec.json.decode(wire, type=list[ModelEvent]) == frames


def test_records_are_frozen() -> None:
    message = UserMessage("hi")
    with pytest.raises(AttributeError):
        message.content = "changed"  # pyright: ignore[reportAttributeAccessIssue]
    definition = ToolDefinition("echo", "echoes", {"type": "object"})
    with pytest.raises(AttributeError):
        definition.name = "other"  # pyright: ignore[reportAttributeAccessIssue]


def test_model_request_is_a_completion_request_with_state_coordinates() -> None:
    request = ModelRequest(messages=(UserMessage("hi"),), context_version=1, message_revision=1)
    assert isinstance(request, CompletionRequest)
    assert (request.tools, request.model, request.max_tokens, request.system) == (None, None, None, None)
    assert (request.provider_options, request.signal) == (None, None)
    assert msgspec.json.encode(request) == (
        b'{"messages":[{"role":"user","content":"hi"}],"contextVersion":1,"messageRevision":1}'
    )
    plain = ModelRequest(messages=())
    assert (plain.context_version, plain.message_revision) == (None, None)


def test_normalize_drops_empty_chunks_and_splits_oversized_ones() -> None:
    big = "a" * MAX_MODEL_TEXT_DELTA_CHARS + "bc"
    deltas = normalize_model_text_deltas(["", "x", "", big, ""])
    assert deltas == ("x", "a" * MAX_MODEL_TEXT_DELTA_CHARS, "bc")
    assert "".join(deltas) == "x" + big
    assert normalize_model_text_deltas([]) == ()
    assert MAX_MODEL_TEXT_DELTA_CHARS == 1_048_576


def test_normalize_rejects_non_str_chunks() -> None:
    with pytest.raises(TypeError):
        normalize_model_text_deltas([b"x"])  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("é" * 8, 2), ("x" * 4001, 1001)]
)
def test_estimate_tokens_is_a_quarter_of_the_code_points_rounded_up(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_usage_helpers_add_field_by_field() -> None:
    assert empty_usage() == Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
    assert add_usage(Usage(1, 2, 3), Usage(10, 20, 30)) == Usage(11, 22, 33)
