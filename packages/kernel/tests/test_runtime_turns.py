"""Canonical event orders, exact data and id order of text and tool turns (§2.5, §8.5, §8.6, §8.11)."""

from __future__ import annotations

from runtime_helpers import Ids, d, drain, make_input, registry, tool_turn, types

from harness_kernel.events import serialize_event
from harness_kernel.models import FakeModel, ScriptedTurn
from harness_kernel.runtime import MinimalAgentRuntime
from harness_kernel.store import MemoryEventStore
from harness_tools import create_echo_tool

TEXT_ORDER = [
    "agent.started",
    "turn.started",
    "message.completed",
    "model.request",
    "message.delta",
    "message.delta",
    "model.response",
    "message.completed",
    "turn.completed",
    "agent.stopped",
]


async def test_text_turn_emits_canonical_order_with_exact_data() -> None:
    store = MemoryEventStore()
    ids = Ids()
    model = FakeModel([ScriptedTurn(text_deltas=["Hel", "lo"])])
    events, error = await drain(MinimalAgentRuntime().run(make_input(model, store, ids=ids)))
    assert error is None
    assert types(events) == TEXT_ORDER
    assert list(store.events) == events
    wire = [serialize_event(e).decode() for e in events]
    assert wire[0] == (
        '{"v":1,"type":"agent.started","eventId":"evt-1","at":"2024-01-01T00:00:00.000Z","actor":"kernel",'
        '"data":{"agentId":"agent-1","sessionId":"sess-1","model":"fake-model/v1","runId":"run-1","turnId":"turn-1"}}'
    )
    assert (
        '"data":{"runId":"run-1","sessionId":"sess-1","turnId":"turn-1","inputMessageId":"msg-1"}' in wire[1]
    )
    assert (
        '"messageId":"msg-1","role":"user","content":"hello","stateVersion":1,"messageRevision":1}' in wire[2]
    )
    assert (
        '"data":{"requestId":"req-1","model":"fake-model/v1","messageCount":1,"runId":"run-1","sessionId":"sess-1",'
        '"turnId":"turn-1","step":1,"contextVersion":1,"messageRevision":1}' in wire[3]
    )
    assert '"messageId":"msg-2","role":"assistant","sequence":1,"delta":"lo"}' in wire[5]
    assert '"finishReason":"stop","stateVersion":1,"messageRevision":2}' in wire[7]
    completed = d(events[8])
    assert completed.status == "completed"
    assert completed.output_message_id == "msg-2"
    assert completed.model_requests == 1
    stopped = d(events[9])
    assert (stopped.status, stopped.steps, stopped.tool_calls) == ("completed", 1, 0)
    # §8.11: identifier and clock order of a text turn (no budget warning at 1 of 8 steps).
    evt = ["evt", "now"]
    assert ids.calls == [
        "agent",
        *evt,
        "msg",
        *evt,
        *evt,
        "req",
        "msg",
        *evt,
        *evt,
        *evt,
        *evt,
        *evt,
        *evt,
        *evt,
    ]


async def test_tool_turn_emits_canonical_order_and_feeds_the_observation_back() -> None:
    ids = Ids()
    model = FakeModel([tool_turn(("m1", "echo", {"x": 1})), ScriptedTurn(content="done")])
    run_input = make_input(model, ids=ids, tools=registry(create_echo_tool()))
    events, error = await drain(MinimalAgentRuntime().run(run_input))
    assert error is None
    assert types(events) == [
        "agent.started", "turn.started", "message.completed",
        "model.request", "model.response", "message.completed",
        "tool.call", "policy.decision", "tool.result", "message.completed",
        "model.request", "message.delta", "model.response", "message.completed",
        "turn.completed", "agent.stopped",
    ]  # fmt: skip
    call, decision, result, tool_message = (d(events[i]) for i in range(6, 10))
    assert (call.call_id, call.tool, call.input, call.model_call_id) == ("call-1", "echo", {"x": 1}, "m1")
    assert (decision.effect, decision.rule_id, decision.reason) == (
        "allow",
        "runtime.m7.pure",
        "reviewed pure tool",
    )
    assert (decision.action, decision.subject) == ("tool.call", "echo")
    assert result.ok is True
    assert result.output == {"echo": "ok", "received": {"x": 1}}
    assert tool_message.content == '{"echo":"ok","received":{"x":1}}'
    assert tool_message.tool_call_id == "m1"
    second = model.requests[1]
    assert [type(m).__name__ for m in second.messages] == ["UserMessage", "AssistantMessage", "ToolMessage"]
    assert second.tools is not None
    assert [t.name for t in second.tools] == ["echo"]
    evt = ["evt", "now"]
    start = ids.calls.index("call")
    assert ids.calls[start : start + 11] == ["call", *evt, *evt, *evt, "msg", *evt, "req"]
