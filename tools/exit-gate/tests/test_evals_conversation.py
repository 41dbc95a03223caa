"""Scenarios as conversations on the streaming runtime (kernel.md §10, issue #23): turns and
follow-ups, steering sent while a turn runs, a context policy, and the requests the model got."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from harness_exit_gate.evals import (
    EventInvariant,
    RequestExpectation,
    ScenarioConversation,
    ScenarioConversationTurn,
    ScenarioParseError,
    ScenarioSteer,
    decode_scenario,
    execute_scenario,
    load_scenario,
)
from harness_exit_gate.manifest import TaskManifest, load_task_manifest
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.runtime import ContextPolicy, InvalidRunInputError, check_context_policy

REPOSITORY = Path(__file__).resolve().parents[3]
TASK = REPOSITORY / "tasks" / "conversation-0001.yaml"
STEERING = REPOSITORY / "tasks" / "scenarios" / "conversation-0001-steering-golden.yaml"
COMPACTION = REPOSITORY / "tasks" / "scenarios" / "conversation-0001-compaction-golden.yaml"

DEMO_MANIFEST = """\
id: demo-task
title: Demo
goal: Say that the demo round-trips.
acceptance: [it works]
allowed_paths: [packages/kernel/**]
permissions: {fs.read: allow}
budget: {max_model_tokens: 1000, max_tool_calls: 1}
delivery: {type: none}
"""


def manifests(text: str | None = None) -> dict[str, TaskManifest]:
    manifest = load_task_manifest(text if text is not None else TASK.read_text(encoding="utf-8"))
    return {manifest.id: manifest}


def document(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return cast("dict[str, Any]", loaded)


def base(**changes: object) -> dict[str, object]:
    return {"id": "x", "uses_tasks": ["conversation-0001"], "script": [], "expect": {"run": {}}, **changes}


def issues(scenario: object) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioParseError) as caught:
        decode_scenario(scenario)
    return caught.value.issues


# ------------------------------------------------------------------ the repository's scenarios


async def test_the_steering_scenario_steers_the_first_turn_and_follows_up_on_the_same_session() -> None:
    scenario = load_scenario(STEERING.read_text(encoding="utf-8"))
    outcome = await execute_scenario(scenario, manifests())
    assert outcome.failures == ()
    run = outcome.golden_run
    assert (run.status, run.steps, run.tool_calls, run.event_count) == ("completed", 4, 2, 34)
    again = await execute_scenario(scenario, manifests())
    assert again.golden_run == run


async def test_the_compaction_scenario_replaces_the_prefix_with_the_summary() -> None:
    scenario = load_scenario(COMPACTION.read_text(encoding="utf-8"))
    assert scenario.conversation == ScenarioConversation(
        context_policy=ContextPolicy(window_tokens=4000, threshold_tokens=700, tail_messages=2),
        checkpoints=True,
    )
    outcome = await execute_scenario(scenario, manifests())
    assert outcome.failures == ()
    # The summary's usage counts with the three requests' usage.
    assert outcome.golden_run.total_tokens == 325


async def test_without_compaction_the_compaction_scenario_fails_where_the_summary_was_expected() -> None:
    raised = document(COMPACTION)
    raised["conversation"]["contextPolicy"]["thresholdTokens"] = 3000
    outcome = await execute_scenario(decode_scenario(raised), manifests())
    assert not outcome.ok
    failures = "\n".join(outcome.failures)
    assert "events.5 (context.checkpoint): no such event in order" in failures
    # The model got the summary answer as its third request's reply, and no fourth request.
    assert "requests.2 (request 4): the model received 3 requests" in failures


async def test_a_steer_after_the_turn_stopped_is_refused_and_reported() -> None:
    late = document(STEERING)
    late["conversation"]["turns"][0]["steer"][0]["after"] = {"type": "turn.completed"}
    outcome = await execute_scenario(decode_scenario(late), manifests())
    assert outcome.failures[0].startswith("conversation.turns.0.steer.0: refused (RUNTIME_RUN_TERMINAL)")
    assert "events.2 (steering.queued): no such event in order" in outcome.failures


async def test_a_steer_whose_event_never_comes_is_reported() -> None:
    never = document(STEERING)
    never["conversation"]["turns"][0]["steer"][0]["after"] = {"type": "model.request", "data.step": 9}
    outcome = await execute_scenario(decode_scenario(never), manifests())
    assert outcome.failures[0] == "conversation.turns.0.steer.0: no event of the turn matched its after"


async def test_a_follow_up_inherits_what_the_first_turn_left_even_when_that_turn_failed() -> None:
    scenario = decode_scenario(
        {
            "id": "over-budget-then-follow-up",
            "uses_tasks": ["demo-task"],
            "conversation": {"turns": [{}, {"input": "and now?"}]},
            "script": [
                {"toolCalls": [{"id": "m1", "name": "echo"}, {"id": "m2", "name": "echo"}]},
                {"content": "Answered after the budget."},
            ],
            "expect": {
                "run": {"status": "completed", "steps": 2, "toolCalls": 2, "textContains": "after the"},
                "events": [
                    {"type": "turn.completed", "data.status": "budget_exceeded"},
                    {"type": "turn.started", "data.turnId": "turn-scenario-2"},
                    {"type": "turn.completed", "data.status": "completed"},
                ],
                "requests": [
                    {"request": 2, "messageCount": 5, "messages.0.content": "Say that the demo round-trips."},
                    # m2 never ran (the budget ended the turn): the follow-up answers it first.
                    {"request": 2, "messages.3.toolCallId": "m2", "messages.3.role": "tool"},
                    {"request": 2, "messages.4.content": "and now?"},
                ],
            },
        }
    )
    outcome = await execute_scenario(scenario, manifests(DEMO_MANIFEST))
    assert outcome.failures == ()


# ------------------------------------------------------------------ requests on either runner


async def test_request_expectations_check_the_legacy_runs_requests_too() -> None:
    scenario = {
        "id": "legacy-requests",
        "uses_tasks": ["demo-task"],
        "script": [{"toolCalls": [{"id": "m1", "name": "echo", "arguments": {"a": 1}}]}, {"content": "ok"}],
        "expect": {
            "requests": [
                {"request": 2, "messageCount": 3, "messages.1.toolCalls.0.arguments.a": 1, "maxTokens": None},
                {"request": 2, "messages.2.role": "assistant"},
                {"request": 3},
            ]
        },
    }
    outcome = await execute_scenario(decode_scenario(scenario), manifests(DEMO_MANIFEST))
    assert outcome.failures == (
        'requests.1 (request 2): messages.2.role: wanted "assistant", saw "tool"',
        "requests.2 (request 3): the model received 2 requests",
    )


def test_request_expectations_decode_strictly() -> None:
    expect = {
        "requests": [
            {"request": 0, "messages.0.role": "user"},
            {"messageCount": 1},
            {"request": 1, "prompt": "x", "messages": [1]},
            {"request": 2, "tools.0.name": "echo", "system": None},
        ]
    }
    assert issues(base(expect=expect)) == [
        ("expect.requests.0.request", "expected an integer >= 1, got int"),
        ("expect.requests.1.request", "is required"),
        (
            "expect.requests.2",
            "unknown key 'prompt': request keys are request and <path> under"
            " messageCount, messages, system, tools, maxTokens",
        ),
        ("expect.requests.2.messages", "expected a scalar, got sequence"),
    ]
    decoded = decode_scenario(base(expect={"requests": expect["requests"][3:]}))
    assert decoded.expect.requests == (
        RequestExpectation(request=2, fields=(("tools.0.name", "echo"), ("system", None))),
    )


# ------------------------------------------------------------------ decoding conversations


def test_a_conversation_decodes_its_turns_steering_policy_and_checkpoints() -> None:
    scenario = decode_scenario(
        base(
            conversation={
                "turns": [
                    {"steer": [{"after": {"type": "tool.call", "data.tool": "echo"}, "content": "stop"}]},
                    {"input": "next"},
                ],
                "contextPolicy": {"windowTokens": 100, "thresholdTokens": 90},
                "checkpoints": True,
            }
        )
    )
    after = EventInvariant(type="tool.call", fields=(("data.tool", "echo"),))
    assert scenario.conversation == ScenarioConversation(
        turns=(
            ScenarioConversationTurn(steer=(ScenarioSteer(after=after, content="stop"),)),
            ScenarioConversationTurn(input="next"),
        ),
        context_policy=ContextPolicy(window_tokens=100, threshold_tokens=90),
        checkpoints=True,
    )
    # An empty conversation is one turn on the goal, without a policy or checkpoints.
    assert decode_scenario(base(conversation={})).conversation == ScenarioConversation()


def test_a_conversation_is_decoded_strictly() -> None:
    conversation: dict[str, object] = {
        "turns": [
            {"input": "", "steer": []},
            {"steer": [{"after": {"type": "no.such"}, "content": "x", "when": 1}]},
            {"input": "ok", "steer": [{"after": {"type": "tool.call", "meta": 1}}]},
        ],
        "contextPolicy": {"windowTokens": -1, "tailMessages": 1.5},
        "checkpoints": "yes",
        "model": "other",
    }
    found = issues(base(conversation=conversation))
    assert found == [
        ("conversation.model", "unknown key"),
        ("conversation.turns.0.input", "must not be empty"),
        ("conversation.turns.0.steer", "must have at least 1 item"),
        ("conversation.turns.1.input", "is required after the first turn"),
        ("conversation.turns.1.steer.0.when", "unknown key"),
        ("conversation.turns.1.steer.0.after.type", "unknown event type"),
        ("conversation.turns.2.steer.0.after", "unknown key 'meta': invariant keys are type and data.<path>"),
        ("conversation.turns.2.steer.0.content", "is required"),
        ("conversation.contextPolicy.windowTokens", "expected an integer >= 0, got int"),
        ("conversation.contextPolicy.thresholdTokens", "is required"),
        ("conversation.contextPolicy.tailMessages", "expected an integer >= 0, got float"),
        ("conversation.checkpoints", "expected a bool, got string"),
    ]


@given(
    window=st.integers(0, 300),
    threshold=st.integers(0, 300),
    tail=st.integers(0, 10_001),
    reserve=st.integers(0, 300),
)
def test_a_context_policy_decodes_exactly_when_the_runtime_would_admit_it(
    window: int, threshold: int, tail: int, reserve: int
) -> None:
    policy = {"windowTokens": window, "thresholdTokens": threshold, "tailMessages": tail}
    scenario = base(conversation={"contextPolicy": {**policy, "reserveTokens": reserve}})
    fields = ContextPolicy(
        window_tokens=window, threshold_tokens=threshold, tail_messages=tail, reserve_tokens=reserve
    )
    refusal: str | None = None
    try:
        admitted = check_context_policy(fields)
    except InvalidRunInputError as refused:
        admitted, refusal = None, refused.message
    if refusal is not None:
        assert issues(scenario) == [("conversation.contextPolicy", refusal)]
    else:
        decoded = decode_scenario(scenario).conversation
        assert decoded is not None
        assert decoded.context_policy == admitted


# ------------------------------------------------------------------ a real model instead of the script


async def test_with_a_model_the_conversation_runs_on_it_and_only_the_status_is_checked() -> None:
    scenario = load_scenario(STEERING.read_text(encoding="utf-8"))
    # A "real" model: it answers at once, so the steer forces a second round, then the follow-up.
    model = FakeModel(
        [
            ScriptedTurn(tool_calls=[ToolCall("own-1", "echo", {"value": "gamma"})]),
            ScriptedTurn(content="Probed gamma, then took the correction."),
            ScriptedTurn(content="It answered ok."),
        ]
    )
    outcome = await execute_scenario(scenario, manifests(), model=("my-model", model))
    assert outcome.failures == ()
    assert outcome.golden_run.steps == 3  # not the script's 4, and not checked
    assert [len(request.messages) for request in model.requests] == [1, 4, 6]
    assert model.requests[1].messages[-1].content == "Use the value beta, not alpha."
