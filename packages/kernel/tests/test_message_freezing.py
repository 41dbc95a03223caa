"""Message validation: the exact kernel classes, deep-frozen copies, the typed refusal (spec §3).

A run's ``context`` passes through it (``RunInput.context``, spec §8.1).
"""

from __future__ import annotations

import math
from typing import Final

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel._json import encode_json
from harness_kernel._messages import InvalidMessageError, freeze_messages
from harness_kernel.models import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

SETTINGS: Final = settings(max_examples=150, deadline=None, database=None)


def assistant_calling(arguments: object) -> AssistantMessage:
    return AssistantMessage("", tool_calls=(ToolCall("c1", "echo", arguments),))  # pyright: ignore[reportArgumentType]


def test_no_messages_freeze_to_an_empty_tuple() -> None:
    assert freeze_messages([]) == ()
    assert freeze_messages(()) == ()


def test_freezing_copies_and_deep_freezes_the_messages() -> None:
    arguments = {"path": "a.txt", "lines": [1, 2]}
    calls = [ToolCall("c1", "read", arguments)]
    prior: list[ChatMessage] = [UserMessage("hi")]
    prior.append(AssistantMessage("", tool_calls=calls))  # pyright: ignore[reportArgumentType]
    messages = freeze_messages(prior)
    prior.append(UserMessage("later"))
    arguments["path"] = "changed"
    assert len(messages) == 2
    message = messages[1]
    assert type(message) is AssistantMessage
    assert message.tool_calls is not None
    assert type(message.tool_calls) is tuple
    frozen = message.tool_calls[0].arguments
    assert frozen == {"path": "a.txt", "lines": [1, 2]}
    with pytest.raises(TypeError):
        frozen["path"] = "x"  # pyright: ignore[reportIndexIssue, reportOptionalSubscript]


def test_frozen_messages_are_kept_as_the_same_objects() -> None:
    frozen = freeze_messages([SystemMessage("rules"), ToolMessage("ok", name="echo", tool_call_id="c1")])
    again = freeze_messages(frozen)
    assert all(a is b for a, b in zip(frozen, again, strict=True))


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
    with pytest.raises(InvalidMessageError):
        freeze_messages([UserMessage("fine"), message])


def test_limits_are_inclusive() -> None:
    messages = freeze_messages([assistant_calling(deep_list(64)), assistant_calling(list(range(99_999)))])
    assert len(messages) == 2


def test_messages_must_be_an_exact_list_or_tuple() -> None:
    with pytest.raises(InvalidMessageError, match="must be a list or tuple, not list_iterator"):
        freeze_messages(iter([UserMessage("a")]))


# ------------------------------------------------------------ property: frozen messages or the typed error
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
def test_arbitrary_values_yield_frozen_messages_or_invalid_message_error(
    prior: object, extra: object
) -> None:
    try:
        messages = freeze_messages(prior)
        messages = freeze_messages([*messages, extra])
    except InvalidMessageError:
        return
    assert type(messages) is tuple
    # Valid messages survive a JSON round trip unchanged in content.
    wire = encode_json(messages)
    assert msgspec.json.decode(wire, type=list[ChatMessage]) == list(messages)


@SETTINGS
@given(prior=st.lists(valid_messages, max_size=4), extra=valid_messages)
def test_valid_messages_always_freeze(prior: list[ChatMessage], extra: ChatMessage) -> None:
    messages = freeze_messages([*prior, extra])
    assert len(messages) == len(prior) + 1
    for message in messages:
        if type(message) is AssistantMessage and message.tool_calls is not None:
            assert type(message.tool_calls) is tuple
            for call in message.tool_calls:
                assert type(call.arguments) not in (dict, list)
    wire = encode_json(messages)
    assert msgspec.json.decode(wire, type=list[ChatMessage]) == list(messages)
