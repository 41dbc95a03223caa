"""Message state: validation, deep-frozen copies, revisions and model contexts (spec §3)."""

from __future__ import annotations

import math
from typing import Final

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel._json import encode_json
from harness_kernel.models import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from harness_kernel.state import (
    InvalidMessageStateError,
    ModelContext,
    VersionedMessageState,
    append_message,
    build_model_context,
    create_message_state,
)

SETTINGS: Final = settings(max_examples=150, deadline=None, database=None)


def assistant_calling(arguments: object) -> AssistantMessage:
    return AssistantMessage("", tool_calls=(ToolCall("c1", "echo", arguments),))  # pyright: ignore[reportArgumentType]


def test_empty_state_starts_at_version_1_revision_0() -> None:
    state = create_message_state()
    assert (state.version, state.revision, state.messages) == (1, 0, ())


def test_create_copies_and_deep_freezes_the_prior_messages() -> None:
    arguments = {"path": "a.txt", "lines": [1, 2]}
    calls = [ToolCall("c1", "read", arguments)]
    prior: list[ChatMessage] = [UserMessage("hi")]
    prior.append(AssistantMessage("", tool_calls=calls))  # pyright: ignore[reportArgumentType]
    state = create_message_state(prior)
    prior.append(UserMessage("later"))
    arguments["path"] = "changed"
    assert state.revision == 2
    assert len(state.messages) == 2
    message = state.messages[1]
    assert type(message) is AssistantMessage
    assert message.tool_calls is not None
    assert type(message.tool_calls) is tuple
    frozen = message.tool_calls[0].arguments
    assert frozen == {"path": "a.txt", "lines": [1, 2]}
    with pytest.raises(TypeError):
        frozen["path"] = "x"  # pyright: ignore[reportIndexIssue, reportOptionalSubscript]


def test_append_returns_a_new_state_with_the_next_revision() -> None:
    state = create_message_state([SystemMessage("rules")])
    after = append_message(state, ToolMessage("ok", name="echo", tool_call_id="c1"))
    assert (state.revision, len(state.messages)) == (1, 1)
    assert after.revision == 2
    assert after.messages[0] is state.messages[0]
    assert after.messages[1] == ToolMessage("ok", name="echo", tool_call_id="c1")


def test_revision_may_run_ahead_of_the_message_count() -> None:
    state = VersionedMessageState(revision=5, messages=(UserMessage("a"),))
    assert append_message(state, UserMessage("b")).revision == 6


def test_state_encodes_camel_case() -> None:
    state = create_message_state([UserMessage("a")])
    assert (
        msgspec.json.encode(state) == b'{"version":1,"revision":1,"messages":[{"role":"user","content":"a"}]}'
    )


@pytest.mark.parametrize(
    "state",
    [
        VersionedMessageState(version=2, revision=0, messages=()),  # pyright: ignore[reportArgumentType]
        VersionedMessageState(version=True, revision=0, messages=()),  # pyright: ignore[reportArgumentType]
        VersionedMessageState(revision=0, messages=(UserMessage("a"),)),
        VersionedMessageState(revision=True, messages=()),
        VersionedMessageState(revision=2**53, messages=()),
        VersionedMessageState(revision=0, messages={"a": 1}),  # pyright: ignore[reportArgumentType]
        VersionedMessageState(revision=1, messages=({"role": "user", "content": "a"},)),  # pyright: ignore[reportArgumentType]
    ],
    ids=[
        "version-2",
        "version-bool",
        "revision-behind",
        "revision-bool",
        "revision-unsafe",
        "dict",
        "raw-dict",
    ],
)
def test_invalid_states_are_rejected_by_every_operation(state: VersionedMessageState) -> None:
    with pytest.raises(InvalidMessageStateError) as caught:
        append_message(state, UserMessage("x"))
    assert caught.value.code == "RUNTIME_INVALID_MESSAGE_STATE"
    with pytest.raises(InvalidMessageStateError):
        build_model_context(state, None)


class CustomMessage(UserMessage, frozen=True, tag="custom"):
    """A subclass is not a kernel message class."""


def deep_list(levels: int) -> object:
    value: object = []
    for _ in range(levels):
        value = [value]
    return value


def cyclic() -> object:
    value: list[object] = []
    value.append(value)
    return value


@pytest.mark.parametrize(
    "message",
    [
        CustomMessage("hi"),
        "hello",
        {"role": "user", "content": "hi"},
        UserMessage(42),  # pyright: ignore[reportArgumentType]
        UserMessage("\ud800"),
        ToolMessage("ok", name=None, tool_call_id="c"),  # pyright: ignore[reportArgumentType]
        AssistantMessage("", tool_calls={ToolCall("c", "n", 1)}),  # pyright: ignore[reportArgumentType]
        AssistantMessage("", tool_calls=({"id": "c"},)),  # pyright: ignore[reportArgumentType]
        AssistantMessage("", tool_calls=(ToolCall(1, "n", {}),)),  # pyright: ignore[reportArgumentType]
        assistant_calling({1, 2}),
        assistant_calling({"x": math.nan}),
        assistant_calling({"x": 2**53}),
        assistant_calling(b"bytes"),
        assistant_calling({1: "non-str key"}),
        assistant_calling(deep_list(65)),
        assistant_calling(list(range(100_000))),
        assistant_calling(cyclic()),
    ],
    ids=[
        "subclass",
        "str",
        "dict",
        "non-str-content",
        "lone-surrogate",
        "tool-name-none",
        "calls-set",
        "call-dict",
        "call-id-int",
        "set-arguments",
        "nan",
        "unsafe-int",
        "bytes",
        "int-key",
        "depth-65",
        "too-many-nodes",
        "cycle",
    ],
)
def test_invalid_messages_are_rejected(message: object) -> None:
    state = create_message_state()
    with pytest.raises(InvalidMessageStateError):
        append_message(state, message)  # pyright: ignore[reportArgumentType]
    with pytest.raises(InvalidMessageStateError):
        create_message_state([message])  # pyright: ignore[reportArgumentType]


def test_limits_are_inclusive() -> None:
    state = create_message_state([assistant_calling(deep_list(64)), assistant_calling(list(range(99_999)))])
    assert state.revision == 2


def test_prior_must_be_an_exact_list_or_tuple() -> None:
    with pytest.raises(InvalidMessageStateError):
        create_message_state(iter([UserMessage("a")]))  # pyright: ignore[reportArgumentType]


def test_model_context_is_detached_and_deep_frozen() -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    tools = [ToolDefinition("echo", "echoes", schema)]
    state = create_message_state([UserMessage("hi")])
    context = build_model_context(state, tools)
    schema["type"] = "array"
    tools.clear()
    assert type(context) is ModelContext
    assert (context.version, context.message_revision) == (1, 1)
    assert context.messages == state.messages
    assert context.tools is not None
    assert len(context.tools) == 1
    assert context.tools[0].input_schema == {"type": "object", "properties": {"text": {"type": "string"}}}
    with pytest.raises(TypeError):
        context.tools[0].input_schema["type"] = "x"  # pyright: ignore[reportIndexIssue]


def test_model_context_without_tools() -> None:
    context = build_model_context(create_message_state(), None)
    assert context.tools is None
    assert build_model_context(create_message_state(), ()).tools == ()


@pytest.mark.parametrize(
    "tools",
    [
        [ToolDefinition("echo", "echoes", [])],  # pyright: ignore[reportArgumentType]
        [ToolDefinition("echo", 3, {})],  # pyright: ignore[reportArgumentType]
        [{"name": "echo"}],
        {"echo": ToolDefinition("echo", "", {})},
    ],
    ids=["schema-not-object", "description-int", "dict-tool", "mapping"],
)
def test_invalid_tool_definitions_are_rejected(tools: object) -> None:
    with pytest.raises(InvalidMessageStateError):
        build_model_context(create_message_state(), tools)  # pyright: ignore[reportArgumentType]


# ------------------------------------------------------------------ property: only a state or the typed error
valid_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=12,
)
json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary(max_size=4)
    | st.sets(st.integers(), max_size=2),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children)
        | st.dictionaries(st.text(max_size=3) | st.integers(), children, max_size=4)
    ),
    max_leaves=20,
)
anything = json_like | st.builds(object)
texts = st.text(max_size=5) | st.text(max_size=5) | st.integers() | st.none()
calls = st.builds(ToolCall, st.text(max_size=3), st.text(max_size=3), valid_json) | st.builds(
    ToolCall, texts, texts, anything
)
valid_messages = st.one_of(
    st.builds(UserMessage, st.text(max_size=5)),
    st.builds(
        AssistantMessage,
        st.text(max_size=5),
        st.none()
        | st.lists(st.builds(ToolCall, st.text(max_size=3), st.text(max_size=3), valid_json), max_size=3),
    ),
)
messages = st.one_of(
    valid_messages,
    st.builds(SystemMessage, texts),
    st.builds(UserMessage, texts),
    st.builds(AssistantMessage, texts, st.none() | st.lists(calls, max_size=3) | st.tuples(calls) | anything),
    st.builds(ToolMessage, texts, texts, texts),
    st.builds(CustomMessage, texts),
    anything,
)


@SETTINGS
@given(prior=st.lists(messages, max_size=4) | anything, extra=messages)
def test_arbitrary_values_yield_a_state_or_invalid_message_state_error(prior: object, extra: object) -> None:
    try:
        state = create_message_state(prior)  # pyright: ignore[reportArgumentType]
        state = append_message(state, extra)  # pyright: ignore[reportArgumentType]
    except InvalidMessageStateError:
        return
    assert type(state) is VersionedMessageState
    assert state.revision == len(state.messages)
    assert build_model_context(state, None).messages == state.messages
    # A valid state survives a JSON round trip unchanged in content.
    wire = encode_json(state.messages)
    assert msgspec.json.decode(wire, type=list[ChatMessage]) == list(state.messages)


@SETTINGS
@given(prior=st.lists(valid_messages, max_size=4), extra=valid_messages)
def test_valid_messages_always_build_a_frozen_state(prior: list[ChatMessage], extra: ChatMessage) -> None:
    state = append_message(create_message_state(prior), extra)
    assert state.revision == len(prior) + 1
    for message in state.messages:
        if type(message) is AssistantMessage and message.tool_calls is not None:
            assert type(message.tool_calls) is tuple
            for call in message.tool_calls:
                assert type(call.arguments) not in (dict, list)
    wire = encode_json(state.messages)
    assert msgspec.json.decode(wire, type=list[ChatMessage]) == list(state.messages)
