"""Context accounting and compaction, the pure part (issue #23 §2): policy, sizes, tail, summary."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel._json import MAX_SAFE_INTEGER, encode_json
from harness_kernel._messages import freeze_messages
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    ModelRequest,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from harness_kernel.runtime._context import (
    MAX_TAIL_MESSAGES,
    SUMMARY_INSTRUCTION,
    SUMMARY_PREFIX,
    ContextPolicy,
    Estimate,
    check_context_policy,
    check_summary,
    check_window,
    compacted_messages,
    estimate,
    message_bytes,
    needs_compaction,
    request_bytes,
    request_bytes_from_sizes,
    request_fixed_bytes,
    summary_request_messages,
    tail_start,
)
from harness_kernel.runtime._errors import (
    ContextCompactionError,
    ContextOverflowError,
    InvalidRunInputError,
)
from harness_workspace import JsonValue

SETTINGS: Final = settings(max_examples=150, deadline=None, database=None)

# ------------------------------------------------------------------ strategies
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
"""Any text without lone surrogates: controls, quotes, backslashes, non-ASCII, astral code points."""

scalars_without_floats = st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | texts
finite_floats = st.floats(allow_nan=False, allow_infinity=False)


def json_values(scalars: st.SearchStrategy[JsonValue]) -> st.SearchStrategy[JsonValue]:
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
        max_leaves=12,
    )


def tool_calls(arguments: st.SearchStrategy[JsonValue]) -> st.SearchStrategy[ToolCall]:
    return st.builds(ToolCall, id=texts, name=texts, arguments=arguments)


def chat_messages(arguments: st.SearchStrategy[JsonValue]) -> st.SearchStrategy[ChatMessage]:
    calls = st.none() | st.lists(tool_calls(arguments), max_size=3).map(tuple)
    return st.one_of(
        st.builds(SystemMessage, content=texts),
        st.builds(UserMessage, content=texts),
        st.builds(AssistantMessage, content=texts, tool_calls=calls),
        st.builds(ToolMessage, content=texts, name=texts, tool_call_id=texts),
    )


def tool_definitions(arguments: st.SearchStrategy[JsonValue]) -> st.SearchStrategy[ToolDefinition]:
    return st.builds(
        ToolDefinition,
        name=texts,
        description=texts,
        input_schema=st.dictionaries(texts, arguments, max_size=3),
    )


def request_parts(
    arguments: st.SearchStrategy[JsonValue],
) -> st.SearchStrategy[tuple[list[ChatMessage], str | None, tuple[ToolDefinition, ...] | None]]:
    return st.tuples(
        st.lists(chat_messages(arguments), max_size=6),
        st.none() | texts,
        st.none() | st.lists(tool_definitions(arguments), max_size=3).map(tuple),
    )


plain_arguments = json_values(scalars_without_floats)
any_arguments = json_values(scalars_without_floats | finite_floats)


# ------------------------------------------------------------------ the reference encoding
def wire_message(message: ChatMessage) -> dict[str, object]:
    """The canonical wire dict of one message, written out by hand."""
    if type(message) is AssistantMessage:
        wire: dict[str, object] = {"role": "assistant", "content": message.content}
        if message.tool_calls is not None:
            wire["toolCalls"] = [
                {"id": call.id, "name": call.name, "arguments": call.arguments} for call in message.tool_calls
            ]
        return wire
    if type(message) is ToolMessage:
        return {
            "role": "tool",
            "content": message.content,
            "name": message.name,
            "toolCallId": message.tool_call_id,
        }
    role = "system" if type(message) is SystemMessage else "user"
    return {"role": role, "content": message.content}


def wire_request(
    messages: Sequence[ChatMessage], system: str | None, tools: Sequence[ToolDefinition] | None
) -> dict[str, object]:
    whole: dict[str, object] = {}
    if system is not None:
        whole["system"] = system
    if tools is not None:
        whole["tools"] = [
            {
                "name": tool.name,
                "description": tool.description,
                "inputSchema": dict(tool.input_schema),
            }
            for tool in tools
        ]
    whole["messages"] = [wire_message(message) for message in messages]
    return whole


def reference_bytes(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


# ------------------------------------------------------------------ policy
@st.composite
def valid_policies(draw: st.DrawFn) -> ContextPolicy:
    window = draw(st.integers(1, MAX_SAFE_INTEGER) | st.integers(1, 100))
    reserve = draw(st.integers(0, window - 1))
    threshold = draw(st.integers(1, window - reserve))
    tail = draw(st.integers(0, MAX_TAIL_MESSAGES))
    return ContextPolicy(
        window_tokens=window, threshold_tokens=threshold, tail_messages=tail, reserve_tokens=reserve
    )


class Count(int):
    """An ``int`` subclass, which the policy refuses like any non-int."""


not_ints = st.one_of(
    st.booleans(),
    st.floats(allow_nan=False),
    texts,
    st.none(),
    st.integers(0, 100).map(Count),
)


@given(valid_policies())
@SETTINGS
def test_a_valid_policy_is_accepted_as_an_equal_fresh_copy(policy: ContextPolicy) -> None:
    checked = check_context_policy(policy)

    assert checked == policy
    assert checked is not policy
    assert type(checked) is ContextPolicy


def test_no_policy_passes_through_and_the_defaults_keep_eight_messages() -> None:
    assert check_context_policy(None) is None
    policy = ContextPolicy(window_tokens=100, threshold_tokens=80)
    assert check_context_policy(policy) == ContextPolicy(
        window_tokens=100, threshold_tokens=80, tail_messages=8, reserve_tokens=0
    )


@pytest.mark.parametrize(
    "value",
    [
        {"window_tokens": 100, "threshold_tokens": 80},
        object(),
        100,
        dataclasses.make_dataclass("ContextPolicy", ["window_tokens"])(100),
    ],
)
def test_anything_but_an_exact_policy_is_refused(value: object) -> None:
    with pytest.raises(InvalidRunInputError, match=r"^context_policy must be a ContextPolicy") as caught:
        check_context_policy(value)
    assert caught.value.code == "RUNTIME_INVALID_INPUT"


@st.composite
def policies_with_one_bad_field(draw: st.DrawFn) -> tuple[ContextPolicy, str]:
    policy = draw(valid_policies())
    window, reserve = policy.window_tokens, policy.reserve_tokens
    field = draw(st.sampled_from(["window_tokens", "threshold_tokens", "tail_messages", "reserve_tokens"]))
    # The values just past each bound, and any others beyond them.
    low, high = {
        "window_tokens": (0, MAX_SAFE_INTEGER + 1),
        "reserve_tokens": (-1, window),
        "threshold_tokens": (0, window - reserve + 1),
        "tail_messages": (-1, MAX_TAIL_MESSAGES + 1),
    }[field]
    out_of_range = st.sampled_from([low, high]) | st.integers(max_value=low) | st.integers(min_value=high)
    bad = draw(not_ints | out_of_range)
    return dataclasses.replace(policy, **{field: bad}), field


@given(policies_with_one_bad_field())
@SETTINGS
def test_every_invalid_field_is_refused_with_a_message_naming_it(case: tuple[ContextPolicy, str]) -> None:
    policy, field = case
    with pytest.raises(InvalidRunInputError) as caught:
        check_context_policy(policy)
    assert caught.value.message.startswith(f"context_policy.{field} must be")
    assert caught.value.code == "RUNTIME_INVALID_INPUT"


def test_the_reserve_may_take_all_but_one_token_of_the_window() -> None:
    tight = ContextPolicy(window_tokens=10, threshold_tokens=1, reserve_tokens=9)
    assert check_context_policy(tight) == tight
    with pytest.raises(InvalidRunInputError, match=r"^context_policy\.threshold_tokens"):
        check_context_policy(dataclasses.replace(tight, threshold_tokens=2))
    with pytest.raises(InvalidRunInputError, match=r"^context_policy\.reserve_tokens"):
        check_context_policy(dataclasses.replace(tight, reserve_tokens=10))


@given(valid_policies(), st.integers(0, 2 * MAX_SAFE_INTEGER))
@SETTINGS
def test_compaction_is_due_exactly_from_the_threshold(policy: ContextPolicy, tokens: int) -> None:
    assert needs_compaction(tokens, policy) is (tokens >= policy.threshold_tokens)
    assert needs_compaction(policy.threshold_tokens, policy)
    assert not needs_compaction(policy.threshold_tokens - 1, policy)


@given(valid_policies(), st.integers(0, 2 * MAX_SAFE_INTEGER))
@SETTINGS
def test_the_window_refuses_exactly_what_leaves_less_than_the_reserve(
    policy: ContextPolicy, tokens: int
) -> None:
    if tokens + policy.reserve_tokens <= policy.window_tokens:
        check_window(tokens, policy)
        return
    with pytest.raises(ContextOverflowError) as caught:
        check_window(tokens, policy)
    error = caught.value
    assert error.code == "RUNTIME_CONTEXT_OVERFLOW"
    assert (error.occupancy, error.reserve, error.window) == (
        tokens,
        policy.reserve_tokens,
        policy.window_tokens,
    )
    assert error.message == (
        f"context occupancy {tokens} + reserve {policy.reserve_tokens}"
        f" exceeds the window {policy.window_tokens}"
    )


def test_the_window_holds_its_last_token_and_no_more() -> None:
    policy = ContextPolicy(window_tokens=100, threshold_tokens=50, reserve_tokens=20)
    check_window(80, policy)
    with pytest.raises(ContextOverflowError):
        check_window(81, policy)


# ------------------------------------------------------------------ sizes
@given(chat_messages(plain_arguments))
@SETTINGS
def test_a_message_measures_as_its_canonical_wire_dict(message: ChatMessage) -> None:
    assert message_bytes(message) == reference_bytes(wire_message(message))


@given(request_parts(plain_arguments))
@SETTINGS
def test_request_bytes_equals_the_length_of_encoding_the_whole_request(
    parts: tuple[list[ChatMessage], str | None, tuple[ToolDefinition, ...] | None],
) -> None:
    messages, system, tools = parts

    assert request_bytes(messages, system=system, tools=tools) == reference_bytes(
        wire_request(messages, system, tools)
    )


@given(request_parts(any_arguments))
@SETTINGS
def test_with_floats_request_bytes_equals_the_kernel_codecs_encoding(
    parts: tuple[list[ChatMessage], str | None, tuple[ToolDefinition, ...] | None],
) -> None:
    # The wire spells floats as the kernel's codec does (1e16, where json.dumps writes 1e+16).
    messages, system, tools = parts

    assert request_bytes(messages, system=system, tools=tools) == len(
        encode_json(wire_request(messages, system, tools))
    )


def test_floats_are_measured_in_the_kernel_codecs_spelling() -> None:
    message = AssistantMessage(content="", tool_calls=(ToolCall(id="c", name="n", arguments=[1e16]),))
    assert message_bytes(message) == len(
        b'{"role":"assistant","content":"","toolCalls":[{"id":"c","name":"n","arguments":[1e16]}]}'
    )


@given(request_parts(plain_arguments))
@SETTINGS
def test_frozen_state_messages_measure_like_the_plain_ones(
    parts: tuple[list[ChatMessage], str | None, tuple[ToolDefinition, ...] | None],
) -> None:
    messages, system, tools = parts
    frozen = freeze_messages(messages)

    assert request_bytes(frozen, system=system, tools=tools) == reference_bytes(
        wire_request(messages, system, tools)
    )


@given(request_parts(plain_arguments), st.lists(chat_messages(plain_arguments), max_size=4))
@SETTINGS
def test_cached_sizes_grow_a_request_without_measuring_it_again(
    parts: tuple[list[ChatMessage], str | None, tuple[ToolDefinition, ...] | None],
    later: list[ChatMessage],
) -> None:
    messages, system, tools = parts
    fixed = request_fixed_bytes(system=system, tools=tools)
    sizes = [message_bytes(message) for message in messages]
    for message in later:
        messages.append(message)
        sizes.append(message_bytes(message))
        expected = request_bytes(messages, system=system, tools=tools)
        assert request_bytes_from_sizes(sizes, fixed=fixed) == expected
    assert request_bytes_from_sizes([], fixed=fixed) == request_bytes([], system=system, tools=tools)


def test_an_empty_request_is_its_envelope() -> None:
    assert request_bytes([], system=None, tools=None) == len(b'{"messages":[]}')
    assert request_bytes([], system="", tools=()) == len(b'{"system":"","tools":[],"messages":[]}')


# ------------------------------------------------------------------ estimate
class Counter:
    """A tokenizer stand-in that answers a scripted value and keeps the requests it saw."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.requests: list[ModelRequest] = []

    def count_tokens(self, request: ModelRequest) -> object:
        self.requests.append(request)
        return self.answer


class NotACounter:
    count_tokens = 5


class UnreadableCounter:
    @property
    def count_tokens(self) -> object:
        raise RuntimeError("no tokenizer here")


class TokenizerFailed(Exception):
    pass


class FailingCounter:
    def count_tokens(self, request: ModelRequest) -> int:
        raise TokenizerFailed(request.model)


SAMPLE_MESSAGES: Final[tuple[ChatMessage, ...]] = (
    UserMessage(content="list the files"),
    AssistantMessage(content="", tool_calls=(ToolCall(id="c1", name="list", arguments={"path": "."}),)),
    ToolMessage(content="a.txt\nb.txt", name="list", tool_call_id="c1"),
)
SAMPLE_TOOLS: Final = (ToolDefinition(name="list", description="List a folder.", input_schema={}),)


@given(request_parts(plain_arguments), st.sampled_from([None, object(), NotACounter()]))
@SETTINGS
def test_without_a_callable_count_tokens_the_estimate_is_the_request_bytes(
    parts: tuple[list[ChatMessage], str | None, tuple[ToolDefinition, ...] | None], counter: object
) -> None:
    messages, system, tools = parts
    sizes = [message_bytes(message) for message in messages]

    expected = Estimate(
        tokens=request_bytes(messages, system=system, tools=tools),
        method="utf8-bytes",
        messages=len(messages),
    )
    assert estimate(messages, system=system, tools=tools, counter=counter) == expected
    assert estimate(messages, system=system, tools=tools, counter=counter, message_sizes=sizes) == expected


def test_cached_sizes_must_hold_one_size_per_message() -> None:
    with pytest.raises(ValueError, match="2 sizes for 3 messages"):
        estimate(SAMPLE_MESSAGES, system=None, tools=None, message_sizes=[1, 2])


@pytest.mark.parametrize("answer", [0, 1234, MAX_SAFE_INTEGER])
def test_a_tokenizer_counts_the_request_built_from_the_parts(answer: int) -> None:
    counter = Counter(answer)

    result = estimate(SAMPLE_MESSAGES, system="be brief", tools=SAMPLE_TOOLS, counter=counter)

    assert result == Estimate(tokens=answer, method="tokenizer", messages=3)
    assert counter.requests == [
        ModelRequest(messages=SAMPLE_MESSAGES, tools=SAMPLE_TOOLS, model="estimate", system="be brief")
    ]


def type_name(value: object) -> str:
    return type(value).__name__


@pytest.mark.parametrize(
    "answer", [True, False, -1, MAX_SAFE_INTEGER + 1, 10**5000, 3.0, "3", None, Count(3)], ids=type_name
)
def test_a_tokenizer_answer_that_is_not_a_safe_int_is_refused(answer: object) -> None:
    with pytest.raises(InvalidRunInputError, match=r"^counter\.count_tokens must return an int") as caught:
        estimate(SAMPLE_MESSAGES, system=None, tools=None, counter=Counter(answer))
    assert caught.value.code == "RUNTIME_INVALID_INPUT"


def test_an_unreadable_count_tokens_is_refused() -> None:
    with pytest.raises(InvalidRunInputError, match="could not be read") as caught:
        estimate(SAMPLE_MESSAGES, system=None, tools=None, counter=UnreadableCounter())
    assert type(caught.value.__cause__) is RuntimeError


def test_a_tokenizer_failure_propagates_unchanged() -> None:
    with pytest.raises(TokenizerFailed, match="estimate"):
        estimate(SAMPLE_MESSAGES, system=None, tools=None, counter=FailingCounter())


# ------------------------------------------------------------------ tail
@st.composite
def well_formed_histories(draw: st.DrawFn) -> list[ChatMessage]:
    """User turns, plain answers, and answers with calls followed by all their results."""
    history: list[ChatMessage] = []
    if draw(st.booleans()):
        history.append(SystemMessage(content="system"))
    blocks = draw(st.lists(st.sampled_from(["user", "answer", "calls"]), max_size=14))
    for number, block in enumerate(blocks):
        if block == "user":
            history.append(UserMessage(content=f"user {number}"))
        elif block == "answer":
            history.append(AssistantMessage(content=f"answer {number}"))
        else:
            ids = [f"call-{number}-{index}" for index in range(draw(st.integers(1, 3)))]
            calls = tuple(ToolCall(id=call_id, name="tool", arguments={}) for call_id in ids)
            history.append(AssistantMessage(content="", tool_calls=calls))
            for call_id in draw(st.permutations(ids)):
                history.append(ToolMessage(content="result", name="tool", tool_call_id=call_id))
    return history


def caller_index(history: Sequence[ChatMessage], call_id: str) -> int:
    for index, message in enumerate(history):
        if type(message) is AssistantMessage and any(call.id == call_id for call in message.tool_calls or ()):
            return index
    raise AssertionError(f"no call {call_id}")


@given(well_formed_histories())
@SETTINGS
def test_the_tail_never_separates_a_tool_result_from_its_call(history: list[ChatMessage]) -> None:
    previous = len(history)
    for tail_messages in range(len(history) + 3):
        start = tail_start(history, tail_messages)

        assert 0 <= start <= len(history)
        assert len(history) - start >= min(tail_messages, len(history))
        for message in history[start:]:
            if type(message) is ToolMessage:
                assert caller_index(history, message.tool_call_id) >= start
        if 0 < start < len(history):
            assert type(history[start]) is not ToolMessage
        # The tail moved earlier only over tool results.
        requested = max(len(history) - tail_messages, 0)
        assert all(type(message) is ToolMessage for message in history[start + 1 : requested + 1])
        assert start <= previous  # a longer tail never starts later
        assert tail_start(tuple(history), tail_messages) == start
        if start > 0:
            assert summary_request_messages(history[:start])[-1] == UserMessage(content=SUMMARY_INSTRUCTION)
        previous = start


def test_a_tail_that_would_begin_inside_tool_results_begins_at_their_call() -> None:
    history = [UserMessage(content="go"), *SAMPLE_MESSAGES, AssistantMessage(content="done")]

    assert tail_start(history, 1) == 4
    assert tail_start(history, 2) == 2  # the result at 3 pulls in its call at 2
    assert tail_start(history, 3) == 2
    assert tail_start(history, 4) == 1
    assert tail_start(history, 5) == 0
    assert tail_start(history, 0) == 5
    assert tail_start([], 0) == 0
    assert tail_start([ToolMessage(content="", name="t", tool_call_id="c")], 0) == 1


def test_a_negative_tail_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="tail_messages"):
        tail_start(SAMPLE_MESSAGES, -1)


# ------------------------------------------------------------------ summary
def test_the_summary_request_is_the_prefix_then_the_instruction() -> None:
    prefix = [UserMessage(content="hello"), AssistantMessage(content="hi")]

    assert summary_request_messages(prefix) == (*prefix, UserMessage(content=SUMMARY_INSTRUCTION))


def test_a_summary_request_needs_a_prefix_that_does_not_end_with_open_calls() -> None:
    with pytest.raises(ValueError, match="nothing to summarise"):
        summary_request_messages(())
    with pytest.raises(ValueError, match="tool calls"):
        summary_request_messages(SAMPLE_MESSAGES[:2])


@given(texts, st.lists(chat_messages(plain_arguments), max_size=5))
@SETTINGS
def test_compacted_messages_are_the_summary_then_the_tail_itself(
    summary: str, tail: list[ChatMessage]
) -> None:
    compacted = compacted_messages(summary, tail)

    assert compacted[0] == UserMessage(content=SUMMARY_PREFIX + summary)
    assert len(compacted) == len(tail) + 1
    assert all(kept is original for kept, original in zip(compacted[1:], tail, strict=True))


@given(
    texts.filter(lambda text: text.strip() != ""),
    st.integers(1, MAX_SAFE_INTEGER),
    st.data(),
)
@SETTINGS
def test_a_summary_that_shrinks_the_context_is_accepted(
    summary: str, before: int, data: st.DataObject
) -> None:
    after = data.draw(st.integers(0, before - 1))

    assert check_summary(summary, before_bytes=before, after_bytes=after) is summary


@given(texts.filter(lambda text: text.strip() != ""), st.integers(0, MAX_SAFE_INTEGER), st.data())
@SETTINGS
def test_a_summary_that_does_not_shrink_the_context_is_refused(
    summary: str, before: int, data: st.DataObject
) -> None:
    after = data.draw(st.integers(before, MAX_SAFE_INTEGER))
    with pytest.raises(ContextCompactionError, match="does not shrink") as caught:
        check_summary(summary, before_bytes=before, after_bytes=after)
    assert caught.value.code == "RUNTIME_CONTEXT_COMPACTION_FAILED"


@given(st.one_of(st.none(), st.integers(), st.binary(), st.lists(texts)))
@SETTINGS
def test_a_summary_that_is_not_a_str_is_refused(summary: object) -> None:
    with pytest.raises(ContextCompactionError, match="must be a str"):
        check_summary(summary, before_bytes=100, after_bytes=1)


@pytest.mark.parametrize(
    ("summary", "reason"),
    [("", "empty"), (" \n\t", "empty"), ("ok \ud800", "lone surrogate")],
)
def test_an_empty_or_unencodable_summary_is_refused(summary: str, reason: str) -> None:
    with pytest.raises(ContextCompactionError, match=reason):
        check_summary(summary, before_bytes=100, after_bytes=1)


def test_a_long_session_compacts_below_its_threshold_with_cached_sizes() -> None:
    history: list[ChatMessage] = []
    for turn in range(500):
        history.append(UserMessage(content=f"step {turn}: " + "read the next file " * 5))
        history.append(AssistantMessage(content="done " * 20))
    policy = ContextPolicy(
        window_tokens=200_000, threshold_tokens=50_000, tail_messages=8, reserve_tokens=4_000
    )
    fixed = request_fixed_bytes(system="be careful", tools=SAMPLE_TOOLS)
    sizes = [message_bytes(message) for message in history]
    before = estimate(history, system="be careful", tools=SAMPLE_TOOLS, message_sizes=sizes)
    assert before.tokens == request_bytes_from_sizes(sizes, fixed=fixed)
    assert needs_compaction(before.tokens, policy)
    check_window(before.tokens, policy)

    start = tail_start(history, policy.tail_messages)
    compacted = compacted_messages("The user is reading files one by one.", history[start:])
    after_sizes = [message_bytes(compacted[0]), *sizes[start:]]
    after = request_bytes_from_sizes(after_sizes, fixed=fixed)

    assert after == request_bytes(compacted, system="be careful", tools=SAMPLE_TOOLS)
    assert not needs_compaction(after, policy)
    assert check_summary(
        "The user is reading files one by one.", before_bytes=before.tokens, after_bytes=after
    )
