"""Decision table, durability, hostile streams and tools, budgets, steering and cancellation (spec §8)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from runtime_helpers import d, drain, make_input, registry, tool_turn, types

from harness_kernel.events import Event
from harness_kernel.models import (
    CompletionResponse,
    FakeModel,
    ResponseCompletedFrame,
    ScriptedTurn,
    TextDeltaFrame,
    ToolCall,
    ToolCallFrame,
    Usage,
)
from harness_kernel.policy import PermissionDecision
from harness_kernel.runtime import (
    EventAppendError,
    InvalidRunInputError,
    MinimalAgentRuntime,
    ModelStreamError,
    RunAlreadyExistsError,
    RunTerminalError,
    RuntimeBudget,
    RuntimeBudgetExceededError,
    RuntimeConsumerError,
)
from harness_kernel.store import MemoryEventStore
from harness_tools import (
    SandboxBoundary,
    ToolPermissionIntent,
    create_bounded_tool,
    create_echo_tool,
    create_read_file_tool,
    create_tool,
)
from harness_workspace import MemoryWorkspace


class Controller:
    def __init__(self, effect: str = "allow", resolve: Any = None) -> None:
        self.effect = effect
        self.intents: list[ToolPermissionIntent] = []
        self.resolve = resolve

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        self.intents.append(intent)
        return PermissionDecision(self.effect, "by rule", "rule-1")  # pyright: ignore[reportArgumentType]


def _policy(events: list[Event]) -> Any:
    return next(d(e) for e in events if e.type == "policy.decision")


def _result(events: list[Event]) -> Any:
    return next(d(e) for e in events if e.type == "tool.result")


async def _tool_run(tool: Any, **overrides: Any) -> tuple[list[Event], BaseException | None]:
    model = FakeModel(
        [
            tool_turn(("m1", tool.name, overrides.pop("arguments", {"path": "a.txt"}))),
            ScriptedTurn(content="ok"),
        ]
    )
    return await drain(MinimalAgentRuntime().run(make_input(model, tools=registry(tool), **overrides)))


def _unbounded() -> Any:
    async def run(params: dict[str, object], context: object = None) -> object:
        raise AssertionError("must not execute")

    return create_tool(name="raw", description="raw", parameters=dict[str, object], execute=run)


@pytest.mark.parametrize(
    ("row", "case", "effect", "rule_id", "code"),
    [
        (0, "bad_authorization", "deny", "runtime.authorization.invalid", "TOOL_AUTHORIZATION_FAILED"),
        (1, "workspace_missing", "deny", "runtime.m8.workspace_required", "WORKSPACE_OPERATION_REQUIRED"),
        (2, "controller_missing", "deny", "runtime.m8.permission_required", "TOOL_PERMISSION_REQUIRED"),
        (3, "unbounded", "deny", "runtime.m8.reviewed_boundaries_only", "TOOL_NOT_PURE"),
        (4, "pure", "allow", "runtime.m7.pure", None),
        (5, "controller_deny", "deny", "rule-1", "TOOL_POLICY_DENIED"),
        (6, "controller_raises", "deny", "runtime.policy.invalid", "TOOL_AUTHORIZATION_FAILED"),
    ],
)
async def test_decision_table_rows(row: int, case: str, effect: str, rule_id: str, code: str | None) -> None:
    workspace = MemoryWorkspace({"a.txt": "text"})
    overrides: dict[str, Any] = {}
    tool: Any = create_read_file_tool("/repo")
    if case == "bad_authorization":

        def authorize(params: object) -> ToolPermissionIntent:
            raise RuntimeError("boom")

        async def run(params: object, context: object = None) -> object:
            raise AssertionError("must not execute")

        tool = create_bounded_tool(
            create_tool(
                name="auth",
                description="d",
                parameters=dict[str, object],
                execute=run,
                authorization=authorize,
            ),
            {"kind": "pure"},
        )
    elif case == "workspace_missing":
        overrides["permission"] = Controller()
    elif case == "controller_missing":
        overrides["workspace"] = workspace
    elif case == "unbounded":
        tool = _unbounded()
    elif case == "pure":
        tool = create_echo_tool()
    elif case == "controller_deny":
        overrides |= {"workspace": workspace, "permission": Controller("deny")}
    else:

        class Broken:
            def decide(self, intent: object) -> object:
                raise RuntimeError("broken")

        overrides |= {"workspace": workspace, "permission": Broken()}
    events, error = await _tool_run(tool, **overrides)
    assert error is None, row
    decision = _policy(events)
    assert (decision.effect, decision.rule_id) == (effect, rule_id)
    result = _result(events)
    if code is None:
        assert result.ok is True
    else:
        assert result.error.code == code
    assert workspace.calls == []


async def test_workspace_tool_gets_a_one_operation_view_and_keeps_workspace_error_codes() -> None:
    workspace = MemoryWorkspace({"a.txt": "text"})
    events, error = await _tool_run(
        create_read_file_tool("/repo"), workspace=workspace, permission=Controller()
    )
    assert error is None
    assert _result(events).ok is True
    seen: list[object] = []

    async def probe(params: object, context: Any = None) -> object:
        seen.append(context.workspace)
        await context.workspace.execute(None)
        return {}

    tool = create_bounded_tool(
        create_tool(name="probe", description="d", parameters=dict[str, object], execute=probe),
        {"kind": "workspace", "capability": "read_file", "root": "/r", "access": "read"},
    )
    events, error = await _tool_run(tool, workspace=workspace, permission=Controller())
    assert _result(events).error.code == "WORKSPACE_OPERATION_UNSUPPORTED"


async def test_advertisement_keeps_pure_tools_and_workspace_tools_only_with_a_workspace() -> None:
    sandbox = create_bounded_tool(_unbounded(), SandboxBoundary(root="/s"))
    tools = registry(create_echo_tool(), create_read_file_tool("/repo"), sandbox)
    model = FakeModel([ScriptedTurn(content="a")])
    await drain(MinimalAgentRuntime().run(make_input(model, tools=tools)))
    assert [t.name for t in model.requests[0].tools or ()] == ["echo"]
    model = FakeModel([ScriptedTurn(content="a")])
    await drain(MinimalAgentRuntime().run(make_input(model, tools=tools, workspace=MemoryWorkspace())))
    assert [t.name for t in model.requests[0].tools or ()] == ["echo", "read_file"]
    model = FakeModel([ScriptedTurn(content="a")])
    await drain(MinimalAgentRuntime().run(make_input(model)))
    assert model.requests[0].tools is None


class SeeingStore(MemoryEventStore):
    """Records, at each append, how many events the consumer had received."""

    def __init__(self, seen: list[Event]) -> None:
        super().__init__()
        self.seen = seen
        self.log: list[tuple[str, int]] = []

    async def append(self, event: Event) -> None:
        self.log.append((event.type, len(self.seen)))
        await super().append(event)


async def test_every_event_is_appended_before_delivery_and_the_model_waits_for_model_request() -> None:
    seen: list[Event] = []
    store = SeeingStore(seen)
    model = FakeModel([ScriptedTurn(text_deltas=["a", "b"])])
    async with MinimalAgentRuntime().run(make_input(model, store)) as stream:
        async for event in stream:
            assert event in store.events
            if event.type == "model.request":
                assert model.requests == ()
            seen.append(event)
    delivered_at_append = [count for _, count in store.log]
    # Admission events go back to back; afterwards each append waits for the previous delivery.
    assert delivered_at_append[:3] == [0, 0, 0]
    assert delivered_at_append[3:8] == [3, 4, 5, 6, 7]


class FailingStore(MemoryEventStore):
    def __init__(self, fail_type: str) -> None:
        super().__init__()
        self.fail_type = fail_type

    async def append(self, event: Event) -> None:
        if event.type == self.fail_type:
            raise OSError("disk full")
        await super().append(event)


@pytest.mark.parametrize(
    "fail_type",
    [
        "agent.started",
        "model.request",
        "tool.call",
        "policy.decision",
        "tool.result",
        "message.completed",
        "turn.completed",
        "agent.stopped",
    ],
)
async def test_failed_append_poisons_the_run(fail_type: str) -> None:
    executed: list[object] = []

    async def run(params: object, context: object = None) -> object:
        executed.append(params)
        return {}

    tool = create_bounded_tool(
        create_tool(name="t", description="d", parameters=dict[str, object], execute=run), {"kind": "pure"}
    )
    store = FailingStore(fail_type)
    model = FakeModel([tool_turn(("m1", "t", {})), ScriptedTurn(content="ok")])
    events, error = await drain(MinimalAgentRuntime().run(make_input(model, store, tools=registry(tool))))
    assert isinstance(error, EventAppendError)
    assert error.event_type == fail_type
    assert isinstance(error.__cause__, OSError)
    assert events == list(store.events)
    assert "agent.stopped" not in types(events)
    if fail_type in ("agent.started", "model.request", "tool.call", "policy.decision"):
        assert executed == []
    if fail_type == "model.request":
        assert model.requests == ()


def _completed(
    content: str = "", calls: tuple[ToolCall, ...] = (), finish: str = "stop"
) -> ResponseCompletedFrame:
    usage = Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)
    return ResponseCompletedFrame(
        response=CompletionResponse(
            id="r",
            content=content,
            tool_calls=calls,
            usage=usage,
            finish_reason=finish,  # pyright: ignore[reportArgumentType]
        )
    )


CALL = ToolCall(id="c1", name="echo", arguments={})


@pytest.mark.parametrize(
    "frames",
    [
        [ToolCallFrame(call=CALL), _completed("", (), "stop")],
        [ToolCallFrame(call=CALL), TextDeltaFrame(delta="x"), _completed("x", (CALL,), "tool_calls")],
        [TextDeltaFrame(delta="a"), _completed("b")],
        [ToolCallFrame(call=ToolCall(id="c1", name="echo", arguments={1, 2})), _completed()],  # pyright: ignore[reportArgumentType]
        [ToolCallFrame(call=CALL), ToolCallFrame(call=CALL), _completed("", (CALL, CALL), "tool_calls")],
        [TextDeltaFrame(delta="a")],
        ["not a frame"],
        [TextDeltaFrame(delta="x" * (1_048_577)), _completed("x" * 1_048_577)],
        [_completed("a", (), "tool_calls")],
        [_completed("a", (), "length")],
    ],
)
async def test_hostile_model_streams_fail_the_run_with_model_stream_error(frames: list[object]) -> None:
    model = FakeModel([ScriptedTurn(stream=frames)])
    events, error = await drain(
        MinimalAgentRuntime().run(make_input(model, tools=registry(create_echo_tool())))
    )
    assert isinstance(error, ModelStreamError)
    assert types(events)[-2:] == ["turn.completed", "agent.stopped"]
    assert d(events[-1]).status == "failed"
    assert "tool.call" not in types(events)


async def test_frames_after_the_completion_are_never_pulled() -> None:
    model = FakeModel([ScriptedTurn(stream=[_completed("a"), TextDeltaFrame(delta="x")])])
    events, error = await drain(MinimalAgentRuntime().run(make_input(model)))
    assert error is None
    assert "message.delta" not in types(events)


async def test_repeated_model_call_ids_across_rounds_are_rejected() -> None:
    model = FakeModel([tool_turn(("m1", "echo", {})), tool_turn(("m1", "echo", {}))])
    _, error = await drain(MinimalAgentRuntime().run(make_input(model, tools=registry(create_echo_tool()))))
    assert isinstance(error, ModelStreamError)


@pytest.mark.parametrize(
    ("result", "code"), [(RuntimeError("bad"), "TOOL_EXECUTION_FAILED"), ({1, 2}, "TOOL_INVALID_RESULT")]
)
async def test_hostile_tools_become_typed_observations(result: object, code: str) -> None:
    async def run(params: object, context: object = None) -> object:
        if isinstance(result, Exception):
            raise result
        return result

    tool = create_bounded_tool(
        create_tool(name="t", description="d", parameters=dict[str, object], execute=run), {"kind": "pure"}
    )
    events, error = await _tool_run(tool, arguments={})
    assert error is None
    assert _result(events).error.code == code


async def test_unknown_tool_and_bad_arguments_skip_policy() -> None:
    model = FakeModel(
        [tool_turn(("m1", "nope", {}), ("m2", "read_file", {"bad": 1})), ScriptedTurn(content="ok")]
    )
    tools = registry(create_read_file_tool("/repo"))
    events, _ = await drain(
        MinimalAgentRuntime().run(make_input(model, tools=tools, workspace=MemoryWorkspace()))
    )
    assert "policy.decision" not in types(events)
    codes = [d(e).error.code for e in events if e.type == "tool.result"]
    assert codes == ["TOOL_NOT_FOUND", "TOOL_BAD_INPUT"]


async def test_step_budget_warns_then_exceeds() -> None:
    model = FakeModel([tool_turn((f"m{i}", "echo", {})) for i in range(5)])
    run_input = make_input(model, tools=registry(create_echo_tool()), budget=RuntimeBudget(max_steps=2))
    events, error = await drain(MinimalAgentRuntime().run(run_input))
    assert isinstance(error, RuntimeBudgetExceededError)
    assert (error.metric, error.used, error.limit) == ("steps", 2, 2)
    warnings = [(d(e).used, d(e).pct) for e in events if e.type == "budget.warning"]
    assert warnings == [(1, 50), (2, 100)]
    assert d(events[-1]).note == "steps budget exhausted (2/2)"
    assert d(events[-1]).status == "budget_exceeded"


async def test_tool_call_budget_ends_the_run_without_policy() -> None:
    model = FakeModel([tool_turn(("m1", "echo", {}), ("m2", "echo", {}))])
    run_input = make_input(model, tools=registry(create_echo_tool()), budget=RuntimeBudget(max_tool_calls=1))
    events, error = await drain(MinimalAgentRuntime().run(run_input))
    assert isinstance(error, RuntimeBudgetExceededError)
    assert types(events)[-5:] == [
        "message.completed",
        "tool.call",
        "budget.warning",
        "turn.completed",
        "agent.stopped",
    ]


async def test_steering_before_the_first_request_is_applied_to_it_and_ends_with_the_run() -> None:
    runtime = MinimalAgentRuntime()
    model = FakeModel([ScriptedTurn(content="a")])
    stream = runtime.run(make_input(model))
    await runtime.steer("run-1", "also this")
    events: list[Event] = []
    async with stream:
        async for event in stream:
            events.append(event)
    assert types(events)[:6] == [
        "agent.started",
        "turn.started",
        "message.completed",
        "steering.queued",
        "steering.applied",
        "model.request",
    ]
    assert d(events[4]).message_id == d(events[3]).message_id
    assert d(events[4]).request_id == d(events[5]).request_id
    assert d(events[5]).message_revision == 2
    assert len(model.requests[0].messages) == 2
    with pytest.raises(RunTerminalError):
        await runtime.steer("run-1", "after")


async def test_cancel_while_the_model_is_pulled_persists_the_canceled_pair() -> None:
    runtime = MinimalAgentRuntime()
    store = MemoryEventStore()

    class Hanging:
        async def stream(self, request: object) -> Any:
            await trio.sleep_forever()
            yield  # pragma: no cover

    events: list[Event] = []
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async with runtime.run(make_input(Hanging(), store)) as stream:
                async for event in stream:
                    events.append(event)
                    if event.type == "model.request":
                        nursery.start_soon(runtime.cancel, "run-1")

        nursery.start_soon(consume)
    assert types(events)[-2:] == ["turn.completed", "agent.stopped"]
    assert d(events[-1]).note == "run canceled"
    await runtime.cancel("run-1")  # a canceled tombstone returns


async def test_cancel_before_admission_persists_admission_then_the_pair() -> None:
    runtime = MinimalAgentRuntime()
    store = MemoryEventStore()
    stream = runtime.run(make_input(FakeModel(), store))
    await runtime.cancel("run-1")
    assert types(store.events) == [
        "agent.started",
        "turn.started",
        "message.completed",
        "turn.completed",
        "agent.stopped",
    ]
    events, error = await drain(stream)
    assert error is None
    assert len(events) == 5


async def test_completion_wins_after_the_final_assistant_message_is_acknowledged() -> None:
    runtime = MinimalAgentRuntime()
    async with runtime.run(make_input(FakeModel([ScriptedTurn(content="a")]))) as stream:
        async for event in stream:
            if event.type == "turn.completed":
                assert d(event).status == "completed"
            if event.type == "message.completed" and d(event).role == "assistant":
                await stream.__anext__()  # acknowledge: the terminal pair follows
                with pytest.raises(RunTerminalError) as raised:
                    await runtime.cancel("run-1")
                assert raised.value.status in ("completing", "completed")


async def test_aclose_abandons_and_persists_the_canceled_pair_unseen() -> None:
    store = MemoryEventStore()
    stream = MinimalAgentRuntime().run(make_input(FakeModel([ScriptedTurn(content="a")]), store))
    async with stream:
        async for event in stream:
            if event.type == "turn.started":
                break
    assert types(store.events)[-2:] == ["turn.completed", "agent.stopped"]
    assert d(store.events[-1]).status == "canceled"


async def test_consumer_misuse_and_admission_errors() -> None:
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(FakeModel()))
    stream.__aiter__()
    with pytest.raises(RuntimeConsumerError):
        stream.__aiter__()
    with pytest.raises(RunAlreadyExistsError):
        runtime.run(make_input(FakeModel()))
    await stream.aclose()
    with pytest.raises(RunAlreadyExistsError):
        runtime.run(make_input(FakeModel()))
    with pytest.raises(InvalidRunInputError):
        runtime.run(make_input(FakeModel(), run_id=""))
    with pytest.raises(InvalidRunInputError):
        runtime.run(make_input(FakeModel(), run_id="r2", budget=RuntimeBudget(max_steps=True)))

    def empty_id(prefix: str) -> str:
        return ""

    bad_ids = make_input(FakeModel(), run_id="r3", new_id=empty_id)
    events, error = await drain(runtime.run(bad_ids))
    assert events == []
    assert isinstance(error, InvalidRunInputError)


async def test_a_taken_run_id_is_refused_before_tool_definitions_are_computed() -> None:
    # §8.2: the run-id check (step 2) precedes the advertised definitions (step 3).
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(FakeModel()))
    unbounded_schema = create_bounded_tool(
        create_tool(
            name="deep",
            description="a tool whose schema is not bounded JSON",
            parameters=dict[str, object],
            input_schema={"type": "object", "x": float("nan")},
            execute=lambda params, context=None: _never(),
        ),
        {"kind": "pure"},
    )

    with pytest.raises(RunAlreadyExistsError):
        runtime.run(make_input(FakeModel(), tools=registry(unbounded_schema)))
    with pytest.raises(InvalidRunInputError):
        runtime.run(make_input(FakeModel(), run_id="other", tools=registry(unbounded_schema)))
    await stream.aclose()


async def _never() -> object:
    raise AssertionError("never executed")
