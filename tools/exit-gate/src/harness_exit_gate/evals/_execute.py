"""Running a golden scenario: the scripted (or real) model, a deterministic clock and ids,
then every expectation checked against the events, the answer and the workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, cast

import trio

from harness_exit_gate.evals._conversation import (
    ConversationFailedError,
    ScenarioConversation,
    run_conversation,
)
from harness_exit_gate.evals._match import (
    ABSENT,
    EventInvariant,
    InvariantValue,
    event_document,
    mismatch,
    request_failures,
    show,
)
from harness_exit_gate.evals._scenario import (
    GoldenRun,
    RunExpectation,
    Scenario,
    ScenarioExpectation,
    ScenarioOutcome,
    ScenarioRuntimeError,
    scripted_turn,
)
from harness_exit_gate.evals._workspace import build_tools, build_workspace, file_failures
from harness_exit_gate.manifest import TaskManifest, manifest_permissions
from harness_kernel import Budget, RunOptions, run_agent
from harness_kernel.events import (
    AgentStoppedData,
    ContextCompactedData,
    Event,
    EventUsage,
    ModelResponseData,
    format_timestamp,
)
from harness_kernel.models import (
    CompletionRequest,
    CompletionResponse,
    FakeModel,
    ModelAdapter,
    ModelRequest,
    ResponseCompletedFrame,
)
from harness_kernel.policy import RulePermissionController
from harness_kernel.runtime import RuntimeBudget
from harness_workspace import MemoryWorkspace

__all__ = ["execute_scenario", "stream_satisfies"]

_CLOCK_START: Final = datetime(2026, 1, 1, tzinfo=UTC)


# ------------------------------------------------------------------ invariants


def stream_satisfies(events: Sequence[Event], invariants: Sequence[EventInvariant]) -> list[str]:
    """Match ``invariants`` as an ordered subsequence of ``events``; return the failures.

    Fields compare by JSON equality on wire keys. A failure names the unmatched invariant
    and, when an event of its type follows, the first field that differed there.
    """
    documents = [(event.type, event_document(event)) for event in events]
    failures: list[str] = []
    position = 0
    for index, invariant in enumerate(invariants):
        nearest: tuple[str, object, InvariantValue] | None = None
        for offset in range(position, len(documents)):
            event_type, document = documents[offset]
            if event_type != invariant.type:
                continue
            differs = mismatch(document, invariant.fields)
            if differs is None:
                position = offset + 1
                break
            nearest = nearest or differs
        else:
            label = f"events.{index} ({invariant.type})"
            if nearest is None:
                failures.append(f"{label}: no such event in order")
            else:
                key, seen, wanted = nearest
                failures.append(f"{label}: {key}: wanted {show(wanted)}, saw {show(seen)}")
    return failures


# ------------------------------------------------------------------ execution


def _deterministic_clock() -> tuple[Callable[[], str], Callable[[str], str]]:
    ticks = 0
    counter = 0

    def now() -> str:
        nonlocal ticks
        moment = _CLOCK_START + timedelta(milliseconds=ticks)
        ticks += 1
        return format_timestamp(moment)

    def new_id(prefix: str) -> str:
        nonlocal counter
        counter += 1
        return f"{prefix}-golden-{counter}"

    return now, new_id


def _check(failures: list[str], name: str, wanted: object, seen: object) -> None:
    if wanted is not None and wanted != seen:
        failures.append(f"{name}: wanted {show(wanted)}, saw {show(seen)}")


class _CollectedModel:
    """The legacy one-shot ``Model`` port over a streaming ``ModelAdapter`` (a real provider)."""

    def __init__(self, adapter: ModelAdapter, name: str) -> None:
        self._adapter = adapter
        self.name = name

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        streamed = ModelRequest(
            messages=request.messages,
            tools=request.tools,
            model=request.model,
            max_tokens=request.max_tokens,
            system=request.system,
            provider_options=request.provider_options,
            signal=request.signal,
        )
        frames = self._adapter.stream(streamed)
        try:
            async for frame in frames:
                if type(frame) is ResponseCompletedFrame:
                    return frame.response
        finally:
            aclose = getattr(frames, "aclose", None)
            if aclose is not None:
                await aclose()
        raise ScenarioRuntimeError("the model's stream ended without a completion")


@dataclass(frozen=True, kw_only=True, slots=True)
class _Setup:
    """What either runner needs: the task, the scripted or real model, the tools and the rules."""

    manifest: TaskManifest
    scenario: Scenario
    scripted: FakeModel
    model: tuple[str, ModelAdapter] | None
    workspace: MemoryWorkspace | None
    permission: RulePermissionController | None
    now: Callable[[], str]
    new_id: Callable[[str], str]

    @property
    def session_id(self) -> str:
        return f"sess-scenario-{self.manifest.id}"


async def _run_legacy(setup: _Setup) -> tuple[Sequence[Event], str, tuple[str, ...]]:
    """Run the task once with ``run_agent``: its events and final text (no steering failures)."""
    limits = setup.manifest.budget
    model = setup.model
    events: list[Event] = []

    async def record(event: Event) -> None:
        events.append(event)

    options = RunOptions(
        goal=setup.manifest.goal,
        model=setup.scripted if model is None else _CollectedModel(model[1], model[0]),
        tools=build_tools(setup.scenario.tools),
        workspace_capability=setup.workspace,
        permission=setup.permission,
        budget=None
        if limits is None
        else Budget(max_model_tokens=limits.max_model_tokens, max_tool_calls=limits.max_tool_calls),
        task_id=setup.manifest.id,
        session_id=setup.session_id,
        on_event=record,
        now=setup.now,
        new_id=setup.new_id,
    )
    try:
        return events, (await run_agent(options)).text, ()
    except Exception as error:
        if not any(event.type == "agent.stopped" for event in events):
            raise ScenarioRuntimeError(f"scenario run failed before its end: {error}") from error
    return events, "", ()


async def _run_turns(
    setup: _Setup, conversation: ScenarioConversation
) -> tuple[Sequence[Event], str, tuple[str, ...]]:
    """Run the conversation's turns on the streaming runtime: events, last answer, steer failures."""
    limits = setup.manifest.budget
    model = setup.model
    try:
        run = await run_conversation(
            conversation,
            goal=setup.manifest.goal,
            model=setup.scripted.name if model is None else model[0],
            adapter=setup.scripted if model is None else model[1],
            tools=build_tools(setup.scenario.tools),
            workspace=setup.workspace,
            permission=setup.permission,
            budget=RuntimeBudget(
                max_model_tokens=None if limits is None else limits.max_model_tokens,
                max_tool_calls=None if limits is None else limits.max_tool_calls,
            ),
            task_id=setup.manifest.id,
            session_id=setup.session_id,
            now=setup.now,
            new_id=setup.new_id,
        )
    except ConversationFailedError as error:
        raise ScenarioRuntimeError(f"scenario run failed before its end: {error}") from error
    return run.events, run.text, run.failures


def _golden_run(task_id: str, events: Sequence[Event]) -> GoldenRun:
    """What the events say the run (every turn of it) did.

    Raises:
        ScenarioRuntimeError: there is no ``agent.stopped`` event.
    """
    stopped = [event.data for event in events if type(event.data) is AgentStoppedData]
    if not stopped:
        raise ScenarioRuntimeError("scenario run emitted no agent.stopped event")
    total_tokens = 0
    for event in events:
        data = event.data
        if type(data) is ModelResponseData:
            total_tokens += data.usage.total_tokens
        elif type(data) is ContextCompactedData and type(data.usage) is EventUsage:
            # A compaction's summary is a model request too; its usage counts.
            total_tokens += data.usage.total_tokens
    return GoldenRun(
        task_id=task_id,
        status=stopped[-1].status,
        steps=sum(data.steps for data in stopped),
        tool_calls=sum(data.tool_calls for data in stopped),
        total_tokens=total_tokens,
        event_count=len(events),
    )


async def execute_scenario(
    scenario: Scenario,
    manifests: Mapping[str, TaskManifest],
    *,
    report: Mapping[str, object] | None = None,
    model: tuple[str, ModelAdapter] | None = None,
    attest_workspace: Callable[[MemoryWorkspace], object] | None = None,
) -> ScenarioOutcome:
    """Run ``scenario`` (the legacy loop, or its conversation's turns) and check every expectation.

    Args:
        scenario: A decoded scenario.
        manifests: Task id → decoded manifest; the scenario's one task supplies the goal,
            the id and the budget.
        report: An already read and validated run report (a JSON object), or ``None``.
        model: ``(name, adapter)`` of a real model to run the task with instead of the
            scenario's script. Its answers are its own, so only ``run.status`` and
            ``files`` are checked then; the scripted run's exact events, requests, steps,
            tool calls, text and steering are not.
        attest_workspace: Called with the scenario's memory workspace before the run. Its
            scripted commands are answered by a handler, and a workspace with handlers is
            not declared isolated by itself, so file-writing and command tools are refused
            on it unless the host that runs the scenario declares it here
            (``lambda workspace: declare_isolation(workspace, "in-memory")``).

    Raises:
        ScenarioRuntimeError: the scenario does not use exactly one task, its manifest is
            missing, or the run (a turn) ended without an ``agent.stopped`` event.
    """
    if type(scenario) is not Scenario:
        raise ScenarioRuntimeError("scenario must be a decoded Scenario")
    if len(scenario.uses_tasks) != 1:
        raise ScenarioRuntimeError(f"scenario must use exactly one task, got {len(scenario.uses_tasks)}")
    task_id = scenario.uses_tasks[0]
    manifest = manifests.get(task_id)
    if type(manifest) is not TaskManifest or manifest.id != task_id:
        raise ScenarioRuntimeError(f"no decoded manifest for task {task_id}")
    now, new_id = _deterministic_clock()
    workspace = None if scenario.workspace is None else build_workspace(scenario.workspace)
    if workspace is not None and attest_workspace is not None:
        attest_workspace(workspace)
    permission = None
    if scenario.workspace is not None or scenario.tools is not None:
        # The task's own rules decide every call, as in a session of that task. A scenario
        # in the older form (echo alone, no workspace) keeps running without a controller.
        permission = RulePermissionController(manifest_permissions(manifest))
    setup = _Setup(
        manifest=manifest,
        scenario=scenario,
        scripted=FakeModel([scripted_turn(turn) for turn in scenario.script]),
        model=model,
        workspace=workspace,
        permission=permission,
        now=now,
        new_id=new_id,
    )
    started = trio.current_time()
    if scenario.conversation is None:
        events, text, steering = await _run_legacy(setup)
    else:
        events, text, steering = await _run_turns(setup, scenario.conversation)
    duration_ms = round((trio.current_time() - started) * 1000, 3)
    golden = _golden_run(task_id, events)
    expect = scenario.expect
    if model is not None:
        run = expect.run
        status_only = None if run is None else RunExpectation(status=run.status)
        expect = ScenarioExpectation(run=status_only, files=expect.files)
        steering = ()
    failures = [*steering, *_expectation_failures(expect, golden, text, events, report)]
    if expect.requests is not None:
        failures.extend(request_failures(setup.scripted.requests, expect.requests))
    if scenario.expect.files is not None and workspace is not None:
        failures.extend(file_failures(scenario.expect.files, workspace.files, show))
    return ScenarioOutcome(
        id=scenario.id,
        ok=not failures,
        failures=tuple(failures),
        tasks=scenario.uses_tasks,
        duration_ms=duration_ms,
        golden_run=golden,
    )


def _expectation_failures(
    expect: ScenarioExpectation,
    golden: GoldenRun,
    text: str,
    events: Sequence[Event],
    report: Mapping[str, object] | None,
) -> list[str]:
    failures: list[str] = []
    run = expect.run
    if run is not None:
        _check(failures, "run.status", run.status, golden.status)
        _check(failures, "run.steps", run.steps, golden.steps)
        _check(failures, "run.toolCalls", run.tool_calls, golden.tool_calls)
        if run.text_contains is not None and run.text_contains not in text:
            failures.append(f"run.textContains: wanted {show(run.text_contains)}, saw {show(text)}")
        warned = any(event.type == "budget.warning" for event in events)
        _check(failures, "run.emittedBudgetWarning", run.emitted_budget_warning, warned)
    if expect.events is not None:
        failures.extend(stream_satisfies(events, expect.events))
    if expect.report is not None and report is not None:
        status: object = ABSENT
        if type(report) is dict:
            status = cast("dict[str, object]", report).get("status", ABSENT)
        if not (type(status) is str and status == expect.report.status):
            failures.append(f"report.status: wanted {show(expect.report.status)}, saw {show(status)}")
    return failures
