"""Context accounting and compaction in the run (issue #23 §2)."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import d, drain, make_input, pure_tool, registry, tool_turn, types

from harness_kernel.models import (
    AssistantMessage,
    ChatMessage,
    FakeModel,
    ScriptedTurn,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from harness_kernel.runtime import (
    ContextCompactionError,
    ContextOverflowError,
    ContextPolicy,
    MinimalAgentRuntime,
    RuntimeBudget,
    RuntimeBudgetExceededError,
)
from harness_kernel.runtime._context import SUMMARY_INSTRUCTION, SUMMARY_PREFIX, request_bytes
from harness_kernel.store import MemoryEventStore


def _history(pairs: int, size: int = 200) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for i in range(pairs):
        messages.append(UserMessage(content=f"question {i} " + "q" * size))
        messages.append(AssistantMessage(content=f"answer {i} " + "a" * size))
    return messages


def _policy(**overrides: int) -> ContextPolicy:
    fields = {"window_tokens": 100_000, "threshold_tokens": 50_000, "tail_messages": 4, "reserve_tokens": 0}
    fields.update(overrides)
    return ContextPolicy(**fields)


async def test_every_request_is_accounted_first_with_its_exact_utf8_size() -> None:
    async def execute(params: dict[str, object], context: object = None) -> object:
        return {"ok": "é"}

    tools = registry(pure_tool("probe", execute))
    model = FakeModel([tool_turn(("m1", "probe", {"x": "ü"})), ScriptedTurn(content="done")])
    events, error = await drain(
        MinimalAgentRuntime().run(make_input(model, tools=tools, context_policy=_policy(), system="be brief"))
    )
    assert error is None
    accounted = [e for e in events if e.type == "context.accounted"]
    requests = [e for e in events if e.type == "model.request"]
    assert len(accounted) == len(requests) == len(model.requests) == 2
    for event, sent in zip(accounted, model.requests, strict=True):
        following = events[events.index(event) + 1]
        assert following.type == "model.request"
        assert d(event).request_id == d(following).request_id
        assert d(event).method == "utf8-bytes"
        assert d(event).messages == len(sent.messages)
        assert d(event).tokens == request_bytes(sent.messages, system=sent.system, tools=sent.tools)
        assert (d(event).window_tokens, d(event).threshold_tokens, d(event).reserve_tokens) == (
            100_000,
            50_000,
            0,
        )


async def test_a_provider_tokenizer_counts_instead_of_bytes() -> None:
    class Counting(FakeModel):
        def count_tokens(self, request: Any) -> int:
            return 7 * len(request.messages)

    model = Counting([ScriptedTurn(content="a")])
    events, _ = await drain(MinimalAgentRuntime().run(make_input(model, context_policy=_policy())))
    accounted = next(d(e) for e in events if e.type == "context.accounted")
    assert (accounted.method, accounted.tokens) == ("tokenizer", 7)


async def test_a_request_over_the_window_is_a_typed_overflow_and_nothing_is_sent() -> None:
    model = FakeModel([ScriptedTurn(content="never")])
    store = MemoryEventStore()
    policy = _policy(window_tokens=300, threshold_tokens=250, reserve_tokens=40, tail_messages=1)
    events, error = await drain(
        MinimalAgentRuntime().run(make_input(model, store, input="x" * 400, context_policy=policy))
    )
    assert isinstance(error, ContextOverflowError)
    assert (error.reserve, error.window) == (40, 300)
    assert error.occupancy > 260
    assert len(model.requests) == 0
    assert "model.request" not in types(events)
    assert "context.accounted" not in types(events)
    assert d(events[-2]).status == "failed"
    assert d(events[-2]).message_revision == 1


async def test_at_the_threshold_the_prefix_is_replaced_by_the_summary_in_the_next_request() -> None:
    context = _history(10)
    model = FakeModel([ScriptedTurn(content="the story so far"), ScriptedTurn(content="answer")])
    store = MemoryEventStore()
    size = request_bytes([*context, UserMessage(content="hello")], system=None, tools=None)
    policy = _policy(window_tokens=size * 2, threshold_tokens=size - 10, tail_messages=3)
    events, error = await drain(
        MinimalAgentRuntime().run(make_input(model, store, context=context, context_policy=policy))
    )
    assert error is None
    summary_request, request = model.requests
    # The summary request: the prefix, then the fixed instruction; no tools, no system.
    assert summary_request.tools is None
    assert summary_request.system is None
    assert summary_request.messages[-1] == UserMessage(content=SUMMARY_INSTRUCTION)
    prefix = summary_request.messages[:-1]
    tail = [*context, UserMessage(content="hello")][len(prefix) :]
    assert len(tail) >= 3
    assert tuple(request.messages) == (UserMessage(content=SUMMARY_PREFIX + "the story so far"), *tail)
    order = types(events)
    assert order.index("context.checkpoint") + 1 == order.index("context.compacted")
    assert order.index("context.compacted") < order.index("context.accounted") < order.index("model.request")
    checkpoint = d(events[order.index("context.checkpoint")])
    compacted = d(events[order.index("context.compacted")])
    assert (checkpoint.revision, checkpoint.tail_start, checkpoint.summary) == (
        1,
        len(prefix),
        "the story so far",
    )
    assert compacted.before_messages == 21
    assert compacted.after_messages == len(tail) + 1
    assert compacted.after_tokens < compacted.before_tokens
    assert compacted.usage.total_tokens > 0
    accounted = d(events[order.index("context.accounted")])
    assert accounted.tokens == compacted.after_tokens
    # The run's usage counts the summary too.
    turn = d(events[-2])
    assert (
        turn.usage.total_tokens
        == compacted.usage.total_tokens + d(events[order.index("model.response")]).usage.total_tokens
    )
    # The history is never deleted: the user's message is still stored as it was.
    assert d(store.events[2]).content == "hello"


async def test_the_tail_keeps_a_tool_result_with_its_call() -> None:
    call = ToolCall(id="c1", name="probe", arguments={})
    context: list[ChatMessage] = [
        *_history(6),
        AssistantMessage(content="", tool_calls=(call,)),
        ToolMessage(content='{"ok":true}', name="probe", tool_call_id="c1"),
        AssistantMessage(content="seen"),
    ]
    model = FakeModel([ScriptedTurn(content="summary"), ScriptedTurn(content="answer")])
    size = request_bytes([*context, UserMessage(content="hello")], system=None, tools=None)
    policy = _policy(window_tokens=size * 2, threshold_tokens=size - 10, tail_messages=3)
    _, error = await drain(
        MinimalAgentRuntime().run(make_input(model, context=context, context_policy=policy))
    )
    assert error is None
    sent = model.requests[1].messages
    # tail_messages=3 would start at the tool result; the tail starts at its call instead.
    assert isinstance(sent[1], AssistantMessage)
    assert sent[1].tool_calls == (call,)
    assert isinstance(sent[2], ToolMessage)


@pytest.mark.parametrize(
    "answer",
    [
        ScriptedTurn(content=""),
        ScriptedTurn(content="   "),
        ScriptedTurn(content="x" * 20_000),
        ScriptedTurn(tool_calls=[ToolCall(id="t", name="probe", arguments={})]),
        ScriptedTurn(content="cut", finish_reason="length"),
    ],
    ids=["empty", "blank", "does-not-shrink", "tool-call", "length"],
)
async def test_an_unusable_summary_fails_the_run_and_stores_nothing_destructive(answer: ScriptedTurn) -> None:
    context = _history(10)
    model = FakeModel([answer, ScriptedTurn(content="never")])
    store = MemoryEventStore()
    size = request_bytes([*context, UserMessage(content="hello")], system=None, tools=None)
    policy = _policy(window_tokens=size * 3, threshold_tokens=size - 10, tail_messages=3)
    events, error = await drain(
        MinimalAgentRuntime().run(make_input(model, store, context=context, context_policy=policy))
    )
    assert isinstance(error, ContextCompactionError)
    assert len(model.requests) == 1
    stored = types(store.events)
    for kind in ("context.checkpoint", "context.compacted", "model.request", "context.accounted"):
        assert kind not in stored
    assert d(events[-2]).status == "failed"
    assert d(events[-2]).message_revision == len(context) + 1


async def test_a_failing_summary_request_is_a_compaction_error() -> None:
    class Broken(FakeModel):
        def stream(self, request: Any) -> Any:
            raise OSError("provider down")

    context = _history(10)
    size = request_bytes([*context, UserMessage(content="hello")], system=None, tools=None)
    policy = _policy(window_tokens=size * 3, threshold_tokens=size - 10, tail_messages=3)
    _, error = await drain(
        MinimalAgentRuntime().run(make_input(Broken([]), context=context, context_policy=policy))
    )
    assert isinstance(error, ContextCompactionError)
    assert "failed" in error.message


async def test_summary_usage_that_reaches_the_hard_budget_stops_before_another_request() -> None:
    context = _history(10)
    usage = Usage(prompt_tokens=90, completion_tokens=20, total_tokens=110)
    model = FakeModel([ScriptedTurn(content="summary", usage=usage), ScriptedTurn(content="never")])
    size = request_bytes([*context, UserMessage(content="hello")], system=None, tools=None)
    policy = _policy(window_tokens=size * 3, threshold_tokens=size - 10, tail_messages=3)
    events, error = await drain(
        MinimalAgentRuntime().run(
            make_input(
                model,
                context=context,
                context_policy=policy,
                budget=RuntimeBudget(max_model_tokens=100),
            )
        )
    )
    assert isinstance(error, RuntimeBudgetExceededError)
    assert (error.metric, error.used, error.limit) == ("tokens", 110, 100)
    assert len(model.requests) == 1
    order = types(events)
    assert "context.compacted" in order
    assert "model.request" not in order
    assert order[-3:] == ["budget.warning", "turn.completed", "agent.stopped"]
    assert d(events[-2]).status == "budget_exceeded"


async def test_a_tail_that_cannot_fit_the_window_is_a_typed_overflow() -> None:
    context = _history(4)
    huge = "z" * 5_000
    model = FakeModel([ScriptedTurn(content="summary"), ScriptedTurn(content="never")])
    policy = _policy(window_tokens=3_000, threshold_tokens=1_000, tail_messages=1)
    events, error = await drain(
        MinimalAgentRuntime().run(make_input(model, context=context, input=huge, context_policy=policy))
    )
    # The prefix was summarised, but the tail (the huge input) alone is over the window.
    assert isinstance(error, ContextOverflowError)
    assert error.window == 3_000
    assert "model.request" not in types(events)
    assert len(model.requests) == 1
