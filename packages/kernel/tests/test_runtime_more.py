"""Asks and grants, timeouts, token budgets, cancellation, consumer misuse, terminal retry, limits (§8)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import msgspec
import pytest
import trio
import trio.testing
from runtime_helpers import AskController, Ids, d, drain, make_input, pure_tool, registry, tool_turn, types

from harness_kernel.events import Event
from harness_kernel.models import (
    CompletionResponse,
    FakeModel,
    ModelRequest,
    ResponseCompletedFrame,
    ScriptedTurn,
    TextDeltaFrame,
    ToolCall,
    Usage,
    UserMessage,
)
from harness_kernel.policy import PermissionRequest, PermissionResolution
from harness_kernel.runtime import (
    AgentRuntimeError,
    InvalidRunInputError,
    MinimalAgentRuntime,
    ModelStreamError,
    ModelTimeoutError,
    RunInput,
    RuntimeBudget,
    RuntimeBudgetExceededError,
    RuntimeConsumerError,
)
from harness_kernel.store import MemoryEventStore
from harness_tools import ToolExecutionContext, ToolPermissionIntent, create_echo_tool
from harness_workspace import AbortController, AbortSignal


def _of(events: list[Event], event_type: str) -> list[Any]:
    return [d(e) for e in events if e.type == event_type]


def _opt(value: object) -> object:
    return None if value is msgspec.UNSET else value


def _terminal(events: list[Event]) -> tuple[str, object]:
    completed = d(events[-2])
    assert types(events[-2:]) == ["turn.completed", "agent.stopped"]
    assert d(events[-1]).status == completed.status
    return completed.status, _opt(completed.note)


def _usage(prompt: int, completion: int) -> Usage:
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def _run_scoped(name: str = "scoped", scope: Literal["once", "run"] = "run") -> Any:
    async def run(params: dict[str, object], context: object = None) -> object:
        return {"done": True}

    def authorize(params: dict[str, object]) -> ToolPermissionIntent:
        return ToolPermissionIntent(action="tool.call", subject="shared", scope=scope)

    return pure_tool(name, run, authorize)


async def _ask_run(
    resolve: Any, *calls: tuple[str, str, Any], tool: Any = None, ids: Ids | None = None
) -> tuple[list[Event], BaseException | None]:
    model = FakeModel([tool_turn(*calls), ScriptedTurn(content="ok")])
    run_input = make_input(
        model,
        tools=registry(tool if tool is not None else create_echo_tool()),
        permission=AskController(resolve),
        ids=ids or Ids(),
    )
    return await drain(MinimalAgentRuntime().run(run_input))


# ------------------------------------------------------------------ ask / resolve (§8.6 step 7)


@pytest.mark.parametrize(
    ("answer", "decision", "note", "ok"),
    [
        ("allow", "allow", None, True),
        ("deny", "deny", None, False),
        (PermissionResolution("allow", note="fine"), "allow", "fine", True),
        (PermissionResolution("deny", note="not today"), "deny", "not today", False),
    ],
)
async def test_an_operator_answer_is_published_with_actor_operator(
    answer: object, decision: str, note: str | None, ok: bool
) -> None:
    seen: list[tuple[PermissionRequest, AbortSignal]] = []

    async def resolve(request: PermissionRequest, signal: AbortSignal) -> object:
        seen.append((request, signal))
        return answer

    ids = Ids()
    events, error = await _ask_run(resolve, ("m1", "echo", {"x": 1}), ids=ids)
    assert error is None
    start = types(events).index("policy.decision")
    assert types(events)[start : start + 5] == [
        "policy.decision",
        "permission.requested",
        "permission.resolved",
        "tool.result",
        "message.completed",
    ]
    requested, resolved = events[start + 1], events[start + 2]
    assert requested.actor == "kernel"
    assert resolved.actor == "operator"
    req = d(requested)
    assert (req.permission_id, req.call_id, req.action, req.subject, req.scope) == (
        "perm-1",
        "call-1",
        "tool.call",
        "echo",
        "once",
    )
    assert req.reason == "needs an operator"
    res = d(resolved)
    assert (res.permission_id, res.decision, _opt(res.note), res.scope) == ("perm-1", decision, note, "once")
    request, signal = seen[0]
    assert (request.permission_id, request.call_id, request.run_id) == ("perm-1", "call-1", "run-1")
    assert signal.aborted is False
    result = d(events[start + 3])
    assert result.ok is ok
    if not ok:
        assert result.error.code == "TOOL_PERMISSION_DENIED"
        assert result.error.message == (note or "operator denied permission")
    # §8.11: `perm`, evt(requested), evt(resolved) between the decision and the result.
    evt = ["evt", "now"]
    begin = ids.calls.index("perm")
    assert ids.calls[begin - 2 : begin + 7] == [*evt, "perm", *evt, *evt, *evt]


def _raises(request: PermissionRequest, signal: AbortSignal) -> object:
    raise RuntimeError("resolver broke")


async def _returns_maybe(request: PermissionRequest, signal: AbortSignal) -> object:
    return "maybe"


async def _returns_wrong_case(request: PermissionRequest, signal: AbortSignal) -> object:
    return "Allow"


def _not_awaitable(request: PermissionRequest, signal: AbortSignal) -> object:
    return "allow"


async def _raises_later(request: PermissionRequest, signal: AbortSignal) -> object:
    await trio.lowlevel.checkpoint()
    raise ValueError("late failure")


@pytest.mark.parametrize(
    ("resolve", "note"),
    [
        (None, "no permission resolver"),
        (_raises, "permission resolver failed closed"),
        (_raises_later, "permission resolver failed closed"),
        (_returns_maybe, "permission resolver failed closed"),
        (_returns_wrong_case, "permission resolver failed closed"),
        (_not_awaitable, "permission resolver failed closed"),
    ],
)
async def test_a_missing_or_failing_resolver_denies_with_actor_kernel(resolve: Any, note: str) -> None:
    events, error = await _ask_run(resolve, ("m1", "echo", {}))
    assert error is None
    resolved = next(e for e in events if e.type == "permission.resolved")
    assert resolved.actor == "kernel"
    assert (d(resolved).decision, _opt(d(resolved).note)) == ("deny", note)
    result = _of(events, "tool.result")[0]
    assert (result.ok, result.error.code, result.error.message) == (False, "TOOL_PERMISSION_DENIED", note)
    assert _terminal(events) == ("completed", None)


async def test_a_run_scoped_grant_answers_later_asks_without_permission_events() -> None:
    answers: list[PermissionRequest] = []

    async def resolve(request: PermissionRequest, signal: AbortSignal) -> object:
        answers.append(request)
        return PermissionResolution("allow")

    events, error = await _ask_run(resolve, ("m1", "scoped", {}), ("m2", "scoped", {}), tool=_run_scoped())
    assert error is None
    assert len(answers) == 1
    assert len(_of(events, "permission.requested")) == 1
    assert len(_of(events, "permission.resolved")) == 1
    assert [p.effect for p in _of(events, "policy.decision")] == ["ask", "ask"]
    assert [r.ok for r in _of(events, "tool.result")] == [True, True]
    assert _of(events, "permission.requested")[0].scope == "run"
    between = types(events)[types(events).index("tool.result") + 2 :]
    assert between[:4] == ["tool.call", "policy.decision", "tool.result", "message.completed"]


@pytest.mark.parametrize(("scope", "answer"), [("once", "allow"), ("run", "deny")])
async def test_once_scopes_and_denials_grant_nothing(scope: Literal["once", "run"], answer: str) -> None:
    count = 0

    async def resolve(request: PermissionRequest, signal: AbortSignal) -> object:
        nonlocal count
        count += 1
        return answer

    tool = _run_scoped(scope=scope)
    events, error = await _ask_run(resolve, ("m1", "scoped", {}), ("m2", "scoped", {}), tool=tool)
    assert error is None
    assert count == 2
    assert len(_of(events, "permission.resolved")) == 2


async def test_cancel_while_awaiting_the_resolver_denies_then_cancels_the_tool_and_the_run() -> None:
    runtime = MinimalAgentRuntime()
    signals: list[AbortSignal] = []
    events: list[Event] = []
    async with trio.open_nursery() as nursery:

        async def resolve(request: PermissionRequest, signal: AbortSignal) -> object:
            signals.append(signal)
            nursery.start_soon(runtime.cancel, "run-1")
            await trio.sleep_forever()
            raise AssertionError("unreachable")

        model = FakeModel([tool_turn(("m1", "echo", {})), ScriptedTurn(content="never")])
        run_input = make_input(model, tools=registry(create_echo_tool()), permission=AskController(resolve))
        async with runtime.run(run_input) as stream:
            async for event in stream:
                events.append(event)
    assert types(events)[-7:] == [
        "policy.decision",
        "permission.requested",
        "permission.resolved",
        "tool.result",
        "message.completed",
        "turn.completed",
        "agent.stopped",
    ]
    resolved = events[-5]
    assert resolved.actor == "kernel"
    assert (d(resolved).decision, _opt(d(resolved).note)) == (
        "deny",
        "run canceled while awaiting permission",
    )
    result = d(events[-4])
    assert (result.error.code, result.error.message) == ("TOOL_CANCELED", "tool canceled")
    assert _terminal(events) == ("canceled", "run canceled")
    assert signals[0].aborted
    assert len(model.requests) == 1


async def test_cancel_while_a_slow_tool_runs_observes_tool_canceled() -> None:
    runtime = MinimalAgentRuntime()
    contexts: list[ToolExecutionContext] = []
    events: list[Event] = []
    async with trio.open_nursery() as nursery:

        async def slow(params: dict[str, object], context: ToolExecutionContext) -> object:
            contexts.append(context)
            nursery.start_soon(runtime.cancel, "run-1")
            await trio.sleep_forever()
            raise AssertionError("unreachable")

        model = FakeModel([tool_turn(("m1", "slow", {})), ScriptedTurn(content="never")])
        stream = runtime.run(make_input(model, tools=registry(pure_tool("slow", slow))))
        async with stream:
            async for event in stream:
                events.append(event)
    assert types(events)[-5:] == [
        "policy.decision",
        "tool.result",
        "message.completed",
        "turn.completed",
        "agent.stopped",
    ]
    assert d(events[-4]).error.code == "TOOL_CANCELED"
    assert _terminal(events) == ("canceled", "run canceled")
    signal = contexts[0].signal
    assert signal is not None
    assert signal.aborted
    assert contexts[0].call_id == "call-1"


# ------------------------------------------------------------------ model timeout (§8.5)


class Stalling:
    """A model whose first pull never returns."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[object]:
        self.requests.append(request)
        await trio.sleep_forever()
        yield  # pragma: no cover


async def test_a_stalled_model_times_out_and_its_request_signal_ends_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = Stalling()
    events, error = await drain(MinimalAgentRuntime().run(make_input(model, model_timeout_ms=1500)))
    assert isinstance(error, ModelTimeoutError)
    assert (error.code, error.timeout_ms) == ("RUNTIME_MODEL_TIMEOUT", 1500)
    assert _terminal(events) == ("failed", "model round timed out after 1500 ms")
    signal = model.requests[0].signal
    assert signal is not None
    assert signal.aborted
    assert isinstance(signal.reason, ModelTimeoutError)


async def test_the_deadline_covers_the_consumers_time_between_pulls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pulls = 0

    class TwoFrames:
        async def stream(self, request: ModelRequest) -> AsyncIterator[object]:
            nonlocal pulls
            pulls += 1
            yield TextDeltaFrame("hi")
            pulls += 1
            response = CompletionResponse(
                id="r", content="hi", tool_calls=(), usage=_usage(1, 1), finish_reason="stop"
            )
            yield ResponseCompletedFrame(response)

    error: BaseException | None = None
    async with MinimalAgentRuntime().run(make_input(TwoFrames(), model_timeout_ms=1000)) as stream:
        try:
            async for event in stream:
                if event.type == "message.delta":
                    await trio.sleep(2)
        except ModelTimeoutError as raised:
            error = raised
    assert isinstance(error, ModelTimeoutError)
    assert pulls == 1


async def test_every_completed_round_leaves_its_request_signal_aborted() -> None:
    model = FakeModel([ScriptedTurn(content="a")])
    events, error = await drain(MinimalAgentRuntime().run(make_input(model, model_timeout_ms=None)))
    assert error is None
    signal = model.requests[0].signal
    assert isinstance(signal, AbortSignal)
    assert signal.aborted
    assert isinstance(signal.reason, ModelStreamError)
    assert str(signal.reason.message) == "model request stream closed"
    assert _terminal(events) == ("completed", None)


# ------------------------------------------------------------------ token budgets (§8.8)


def _warnings(events: list[Event]) -> list[tuple[str, int, int, int]]:
    return [(w.metric, w.used, w.limit, w.pct) for w in _of(events, "budget.warning")]


async def test_a_zero_token_budget_stops_before_the_first_request() -> None:
    model = FakeModel([ScriptedTurn(content="never")])
    run_input = make_input(model, budget=RuntimeBudget(max_model_tokens=0))
    events, error = await drain(MinimalAgentRuntime().run(run_input))
    assert isinstance(error, RuntimeBudgetExceededError)
    assert (error.metric, error.used, error.limit) == ("tokens", 0, 0)
    assert "model.request" not in types(events)
    assert _warnings(events) == [("tokens", 0, 0, 100)]
    assert _terminal(events) == ("budget_exceeded", "tokens budget exhausted (0/0)")
    assert model.requests == ()


@pytest.mark.parametrize(
    ("usage", "finish_tool_calls", "status", "warnings"),
    [
        (_usage(100, 50), False, "budget_exceeded", [("tokens", 150, 100, 150)]),
        (_usage(60, 40), False, "completed", [("tokens", 100, 100, 100)]),
        (_usage(60, 40), True, "budget_exceeded", [("tokens", 100, 100, 100)]),
        (_usage(30, 19), False, "completed", []),
    ],
)
async def test_the_token_gate_after_a_round(
    usage: Usage, finish_tool_calls: bool, status: str, warnings: list[tuple[str, int, int, int]]
) -> None:
    if finish_tool_calls:
        first = ScriptedTurn(tool_calls=[ToolCall(id="m1", name="echo", arguments={})], usage=usage)
    else:
        first = ScriptedTurn(content="a", usage=usage)
    model = FakeModel([first, ScriptedTurn(content="b", usage=_usage(0, 0))])
    run_input = make_input(
        model, tools=registry(create_echo_tool()), budget=RuntimeBudget(max_model_tokens=100)
    )
    events, error = await drain(MinimalAgentRuntime().run(run_input))
    assert _warnings(events) == warnings
    assert _terminal(events)[0] == status
    assert "tool.call" not in types(events)
    if status == "budget_exceeded":
        assert isinstance(error, RuntimeBudgetExceededError)
        assert (error.metric, error.used, error.limit) == ("tokens", usage.total_tokens, 100)
        assert types(events)[-5:] == [
            "model.response",
            "message.completed",
            "budget.warning",
            "turn.completed",
            "agent.stopped",
        ]
    else:
        assert error is None


@pytest.mark.parametrize(
    ("input_max", "limit", "expected"),
    [(50, 100, [50, 40]), (None, 100, [100, 40]), (50, None, [50, 50]), (30, 100, [30, 30])],
)
async def test_max_tokens_is_clamped_to_the_remaining_token_budget(
    input_max: int | None, limit: int | None, expected: list[int]
) -> None:
    model = FakeModel(
        [
            ScriptedTurn(tool_calls=[ToolCall(id="m1", name="echo", arguments={})], usage=_usage(40, 20)),
            ScriptedTurn(content="done", usage=_usage(10, 10)),
        ]
    )
    run_input = make_input(
        model,
        tools=registry(create_echo_tool()),
        max_tokens=input_max,
        budget=RuntimeBudget(max_model_tokens=limit),
    )
    events, error = await drain(MinimalAgentRuntime().run(run_input))
    assert error is None
    assert [r.max_tokens for r in model.requests] == expected
    if limit is not None:
        # The one-time warning fires once, after round 1 (60 of 100), never again.
        assert _warnings(events) == [("tokens", 60, 100, 60)]
    assert _terminal(events) == ("completed", None)


# ------------------------------------------------------------------ cancellation (§8.4, §8.10)


async def test_aborting_the_input_signal_cancels_the_run() -> None:
    controller = AbortController()

    class AbortsCaller:
        async def stream(self, request: ModelRequest) -> AsyncIterator[object]:
            controller.abort("caller gave up")
            await trio.sleep_forever()
            yield  # pragma: no cover

    runtime = MinimalAgentRuntime()
    events, error = await drain(runtime.run(make_input(AbortsCaller(), signal=controller.signal)))
    assert error is None
    assert _terminal(events) == ("canceled", "run canceled")
    assert "model.response" not in types(events)
    await runtime.cancel("run-1")  # a canceled tombstone


async def test_an_already_aborted_signal_persists_admission_then_the_canceled_pair() -> None:
    model = FakeModel([ScriptedTurn(content="never")])
    signal = AbortSignal.aborted_with("before the run")
    events, error = await drain(MinimalAgentRuntime().run(make_input(model, signal=signal)))
    assert error is None
    assert types(events) == [
        "agent.started",
        "turn.started",
        "message.completed",
        "turn.completed",
        "agent.stopped",
    ]
    assert d(events[-2]).status == "canceled"
    assert model.requests == ()


@pytest.mark.parametrize("where", ["entering the step", "inside the model pull"])
async def test_trio_cancellation_inside_anext_abandons_and_still_persists_the_pair(where: str) -> None:
    store = MemoryEventStore()
    runtime = MinimalAgentRuntime()
    outer = trio.CancelScope()

    class CancelsConsumer:
        async def stream(self, request: ModelRequest) -> AsyncIterator[object]:
            outer.cancel()
            await trio.sleep_forever()
            yield  # pragma: no cover

    model = Stalling() if where == "entering the step" else CancelsConsumer()
    stream = runtime.run(make_input(model, store))
    seen: list[Event] = []
    with outer:
        async for event in stream:
            seen.append(event)
            if event.type == "model.request" and where == "entering the step":
                outer.cancel()
    assert outer.cancelled_caught
    assert types(seen)[-1] == "model.request"
    assert types(store.events)[-2:] == ["turn.completed", "agent.stopped"]
    assert d(store.events[-1]).status == "canceled"
    assert d(store.events[-1]).note == "run canceled"
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()
    await stream.aclose()
    await runtime.cancel("run-1")
    assert len(store.events) == len(seen) + 2


async def test_concurrent_anext_is_a_consumer_error() -> None:
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(Stalling()))
    iterator = stream.__aiter__()
    while (await iterator.__anext__()).type != "model.request":
        pass
    got: list[Event] = []
    async with trio.open_nursery() as nursery:

        async def step() -> None:
            got.append(await stream.__anext__())

        nursery.start_soon(step)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RuntimeConsumerError) as raised:
            await stream.__anext__()
        assert raised.value.code == "RUNTIME_CONSUMER_INVALID"
        await runtime.cancel("run-1")
    assert types(got) == ["turn.completed"]
    assert (await stream.__anext__()).type == "agent.stopped"
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


# ------------------------------------------------------------------ terminal construction retry (§8.9)


class FlakyClock(Ids):
    """``now`` misbehaves once (``bad``: raise or return a non-str) when armed."""

    def __init__(self, bad: str) -> None:
        super().__init__()
        self.bad = bad
        self.armed = False

    def now(self) -> str:
        if self.armed:
            self.armed = False
            self.calls.append("now!")
            if self.bad == "raise":
                raise RuntimeError("clock broke")
            return 123  # pyright: ignore[reportReturnType]
        return super().now()


@pytest.mark.parametrize(
    ("bad", "error_type", "note"),
    [
        ("raise", ModelStreamError, "terminal event construction failed"),
        ("non-str", InvalidRunInputError, "now() must return a str"),
    ],
)
async def test_a_fault_while_building_the_terminal_pair_is_retried_once_as_failed(
    bad: str, error_type: type[Exception], note: str
) -> None:
    clock = FlakyClock(bad)
    store = MemoryEventStore()
    stream = MinimalAgentRuntime().run(make_input(FakeModel([ScriptedTurn(content="a")]), store, ids=clock))
    events: list[Event] = []
    error: BaseException | None = None
    async with stream:
        try:
            async for event in stream:
                events.append(event)
                if event.type == "message.completed" and d(event).role == "assistant":
                    clock.armed = True
        except Exception as raised:
            error = raised
    assert isinstance(error, AgentRuntimeError)
    assert type(error) is error_type
    assert error.message == note
    assert _terminal(events) == ("failed", note)
    assert list(store.events) == events
    assert d(events[-1]).note == note
    # The failed construction took one evt id; the retry built both events afresh.
    assert clock.calls[-6:] == ["evt", "now!", "evt", "now", "evt", "now"]
    assert clock.calls.count("now!") == 1
    if bad == "raise":
        assert isinstance(error.__cause__, RuntimeError)


# ------------------------------------------------------------------ limits (§8.12)


async def test_tool_arguments_over_the_transcript_budget_fail_the_round() -> None:
    big = "x" * 250_000
    calls: list[tuple[str, str, object]] = [(f"m{i}", "echo", {"s": big}) for i in range(17)]
    model = FakeModel([tool_turn(*calls), ScriptedTurn(content="never")])
    events, error = await drain(
        MinimalAgentRuntime().run(make_input(model, tools=registry(create_echo_tool())))
    )
    assert isinstance(error, ModelStreamError)
    assert error.message == "tool transcript exceeds 4 MiB"
    assert "tool.call" not in types(events)
    assert _terminal(events) == ("failed", "tool transcript exceeds 4 MiB")


async def test_tool_outputs_over_the_transcript_budget_become_invalid_results() -> None:
    async def large(params: dict[str, object], context: object = None) -> object:
        return "y" * 260_000

    calls: list[tuple[str, str, object]] = [(f"m{i}", "large", {}) for i in range(17)]
    model = FakeModel([tool_turn(*calls), ScriptedTurn(content="done")])
    events, error = await drain(
        MinimalAgentRuntime().run(make_input(model, tools=registry(pure_tool("large", large))))
    )
    assert error is None
    results = _of(events, "tool.result")
    assert [r.ok for r in results] == [True] * 16 + [False]
    assert (results[-1].error.code, results[-1].error.message) == (
        "TOOL_INVALID_RESULT",
        "tool result is not bounded JSON",
    )
    assert _terminal(events) == ("completed", None)


async def test_at_most_1024_steering_messages_may_be_pending() -> None:
    runtime = MinimalAgentRuntime()
    model = FakeModel([ScriptedTurn(content="a")])
    stream = runtime.run(make_input(model))
    for index in range(1024):
        await runtime.steer("run-1", f"s{index}")
    with pytest.raises(InvalidRunInputError):
        await runtime.steer("run-1", "one too many")
    events, error = await drain(stream)
    assert error is None
    assert types(events).count("steering.queued") == 1024
    assert _of(events, "model.request")[0].message_count == 1025
    assert len(model.requests[0].messages) == 1025


@pytest.mark.parametrize(("count", "ok"), [(128, True), (129, False)])
async def test_at_most_128_tool_calls_per_response(count: int, ok: bool) -> None:
    calls: list[tuple[str, str, object]] = [(f"m{i}", "echo", {}) for i in range(count)]
    model = FakeModel([tool_turn(*calls), ScriptedTurn(content="done")])
    events, error = await drain(
        MinimalAgentRuntime().run(make_input(model, tools=registry(create_echo_tool())))
    )
    if ok:
        assert error is None
        assert len(_of(events, "tool.result")) == 128
    else:
        assert isinstance(error, ModelStreamError)
        assert "tool.call" not in types(events)
        assert _terminal(events)[0] == "failed"


# ------------------------------------------------------------------ admission snapshots (§8.2 step 1)


async def test_later_changes_to_the_callers_objects_have_no_effect() -> None:
    async def boom(params: dict[str, object], context: object = None) -> object:
        raise AssertionError("a tool added after run() must not be found")

    model = FakeModel([tool_turn(("m1", "echo", {}), ("m2", "late", {})), ScriptedTurn(content="done")])
    tools = registry(create_echo_tool())
    context: list[Any] = [UserMessage(content="earlier")]
    options: dict[str, Any] = {"temperature": 0, "nested": {"k": [1, 2]}}
    store = MemoryEventStore()
    controller = AskController(effect="allow")
    run_input = make_input(
        model,
        store,
        tools=tools,
        context=context,
        provider_options=options,
        permission=controller,
    )
    stream = MinimalAgentRuntime().run(run_input)

    def replaced_stream(request: object) -> object:
        raise AssertionError("the replaced stream method must not be called")

    async def replaced_append(event: object) -> None:
        raise AssertionError("the replaced append method must not be called")

    def replaced_decide(intent: object) -> object:
        raise AssertionError("the replaced decide method must not be called")

    tools.add(pure_tool("late", boom))
    context.append(UserMessage(content="later"))
    options["temperature"] = 1
    options["nested"]["k"].append(3)
    model.stream = replaced_stream  # pyright: ignore[reportAttributeAccessIssue]
    store.append = replaced_append
    controller.decide = replaced_decide  # pyright: ignore[reportAttributeAccessIssue]
    events, error = await drain(stream)
    assert error is None
    first = model.requests[0]
    assert [m.content for m in first.messages] == ["earlier", "hello"]
    assert first.provider_options == {"temperature": 0, "nested": {"k": [1, 2]}}
    assert [t.name for t in first.tools or ()] == ["echo"]
    results = _of(events, "tool.result")
    assert results[0].ok is True
    assert (results[1].ok, results[1].error.code) == (False, "TOOL_NOT_FOUND")
    assert list(store.events) == events
    assert len(controller.intents) == 1


async def test_run_input_is_frozen() -> None:
    run_input = make_input(FakeModel())
    with pytest.raises(AttributeError):
        run_input.input = "changed"  # pyright: ignore[reportAttributeAccessIssue]
    assert isinstance(run_input, RunInput)
