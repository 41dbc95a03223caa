"""Golden scenarios (kernel.md §10): strict parsing, invariant matching and execution."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_exit_gate.evals import (
    EventInvariant,
    InvariantCheckError,
    ScenarioParseError,
    ScenarioRuntimeError,
    assert_known_event_types,
    decode_scenario,
    execute_scenario,
    load_scenario,
    load_script,
    stream_satisfies,
)
from harness_exit_gate.manifest import TaskManifest, load_task_manifest
from harness_kernel.events import create_event

REPOSITORY = Path(__file__).resolve().parents[3]

MANIFEST = """\
id: demo-task
title: Demo
goal: Say that the demo round-trips.
acceptance: [it works]
allowed_paths: [packages/kernel/**]
permissions: {fs.read: allow}
budget: {max_model_tokens: 1000, max_tool_calls: 5}
delivery: {type: none}
"""

SCENARIO = """\
id: demo-golden
uses_tasks: [demo-task]
script:
  - toolCalls: [{id: m1, name: echo, arguments: {a: 1}}]
  - content: "The demo round-trips."
expect:
  run: {status: completed, steps: 2, toolCalls: 1, textContains: round-trips, emittedBudgetWarning: false}
  events:
    - {type: session.created, data.sessionId: sess-scenario-demo-task}
    - {type: tool.result, data.ok: true, data.output.echo: ok}
    - {type: agent.stopped, data.status: completed}
"""


def manifests() -> dict[str, TaskManifest]:
    manifest = load_task_manifest(MANIFEST)
    return {manifest.id: manifest}


def test_load_scenario_decodes_keys_in_their_wire_spelling() -> None:
    scenario = load_scenario(SCENARIO)
    assert scenario.id == "demo-golden"
    assert scenario.uses_tasks == ("demo-task",)
    first = scenario.script[0].tool_calls
    assert first is not None
    assert first[0].name == "echo"
    assert scenario.expect.run is not None
    assert scenario.expect.run.tool_calls == 1
    assert scenario.expect.events is not None
    assert scenario.expect.events[1] == EventInvariant(
        type="tool.result", fields=(("data.ok", True), ("data.output.echo", "ok"))
    )


def test_unknown_keys_and_bad_values_are_all_reported() -> None:
    with pytest.raises(ScenarioParseError) as caught:
        decode_scenario(
            {
                "id": "Not Kebab",
                "uses_tasks": [],
                "script": [{"content": "x", "colour": "red"}],
                "expect": {"run": {"status": "done"}, "events": [{"type": "no.such", "meta": 1}]},
                "extra": True,
            }
        )
    paths = [path for path, _ in caught.value.issues]
    assert paths == [
        "extra",
        "id",
        "uses_tasks",
        "script.0.colour",
        "expect.run.status",
        "expect.events.0",
        "expect.events",
    ]
    assert caught.value.code == "SCENARIO_INVALID"
    assert str(caught.value).startswith("invalid scenario: extra unknown key; ")


def test_strict_yaml_refuses_duplicates_aliases_and_several_documents() -> None:
    with pytest.raises(ScenarioParseError) as caught:
        load_scenario("id: a\nid: b\n")
    assert ("id", "duplicate key") in caught.value.issues
    with pytest.raises(ScenarioParseError) as caught:
        load_scenario("id: &x a\nuses_tasks: [*x]\n")
    assert any("anchors are not allowed" in message for _, message in caught.value.issues)
    with pytest.raises(ScenarioParseError) as caught:
        load_scenario("a: 1\n---\nb: 2\n")
    assert caught.value.issues == [
        ("<root>", "scenario must contain exactly one YAML document, found several")
    ]


def test_expect_needs_at_least_one_section_and_events_at_least_one_item() -> None:
    base = {"id": "x", "uses_tasks": ["t"], "script": []}
    with pytest.raises(ScenarioParseError) as caught:
        decode_scenario({**base, "expect": {}})
    wanted = "must have at least one of run, events, report, files, requests"
    assert caught.value.issues == [("expect", wanted)]
    with pytest.raises(ScenarioParseError) as caught:
        decode_scenario({**base, "expect": {"events": []}})
    assert caught.value.issues == [("expect.events", "must have at least 1 item")]


def test_assert_known_event_types_names_each_unknown_type() -> None:
    assert assert_known_event_types([EventInvariant(type="error")]) == ["error"]
    with pytest.raises(InvariantCheckError) as caught:
        assert_known_event_types([EventInvariant(type="error"), EventInvariant(type="bogus")])
    assert caught.value.failures == ['events.1: unknown event type "bogus"']


def test_stream_satisfies_matches_an_ordered_subsequence_by_json_equality() -> None:
    events = [
        create_event("session.created", {"sessionId": "s"}),
        create_event("agent.stopped", {"agentId": "a", "status": "completed", "steps": 1, "toolCalls": 0}),
    ]
    ok = [
        EventInvariant(type="session.created"),
        EventInvariant(type="agent.stopped", fields=(("data.steps", 1.0),)),
    ]
    assert stream_satisfies(events, ok) == []
    out_of_order = [EventInvariant(type="agent.stopped"), EventInvariant(type="session.created")]
    assert stream_satisfies(events, out_of_order) == ["events.1 (session.created): no such event in order"]
    wrong = [EventInvariant(type="agent.stopped", fields=(("data.status", "failed"), ("data.steps", True)))]
    assert stream_satisfies(events, wrong) == [
        'events.0 (agent.stopped): data.status: wanted "failed", saw "completed"'
    ]
    missing = [EventInvariant(type="agent.stopped", fields=(("data.note", "x"),))]
    assert stream_satisfies(events, missing) == [
        'events.0 (agent.stopped): data.note: wanted "x", saw nothing'
    ]


async def test_execute_scenario_runs_the_legacy_loop_deterministically() -> None:
    outcome = await execute_scenario(load_scenario(SCENARIO), manifests())
    assert outcome.failures == ()
    assert outcome.ok
    assert outcome.tasks == ("demo-task",)
    run = outcome.golden_run
    assert (run.task_id, run.status, run.steps, run.tool_calls) == ("demo-task", "completed", 2, 1)
    assert run.event_count == 9
    assert run.total_tokens > 0
    again = await execute_scenario(load_scenario(SCENARIO), manifests())
    assert again.golden_run == run


async def test_failing_expectations_are_worded_with_wanted_and_saw() -> None:
    text = SCENARIO.replace("toolCalls: 1,", "toolCalls: 5,").replace(
        "status: completed, steps", "status: failed, steps"
    )
    text += "  report: {status: passed}\n"
    outcome = await execute_scenario(load_scenario(text), manifests(), report={"status": "failed"})
    assert not outcome.ok
    assert outcome.failures == (
        'run.status: wanted "failed", saw "completed"',
        "run.toolCalls: wanted 5, saw 1",
        'report.status: wanted "passed", saw "failed"',
    )


async def test_budget_exceeded_runs_are_checked_rather_than_raised() -> None:
    manifest = load_task_manifest(MANIFEST.replace("max_tool_calls: 5", "max_tool_calls: 1"))
    text = """\
id: over-budget
uses_tasks: [demo-task]
script:
  - toolCalls: [{id: m1, name: echo}, {id: m2, name: echo}]
expect:
  run: {status: budget_exceeded, toolCalls: 1, emittedBudgetWarning: true}
"""
    outcome = await execute_scenario(load_scenario(text), {manifest.id: manifest})
    assert outcome.failures == ()


async def test_execute_scenario_needs_exactly_one_known_task() -> None:
    scenario = load_scenario(SCENARIO)
    with pytest.raises(ScenarioRuntimeError, match="no decoded manifest for task demo-task"):
        await execute_scenario(scenario, {})
    two = load_scenario(SCENARIO.replace("[demo-task]", "[demo-task, other]"))
    with pytest.raises(ScenarioRuntimeError, match="exactly one task"):
        await execute_scenario(two, manifests())


async def test_the_repository_golden_scenario_passes() -> None:
    manifest = load_task_manifest((REPOSITORY / "tasks" / "kernel-0001.yaml").read_text(encoding="utf-8"))
    assert manifest.id == "kernel-0001"
    scenario_text = (REPOSITORY / "tasks" / "scenarios" / "kernel-0001-golden.yaml").read_text(
        encoding="utf-8"
    )
    scenario = load_scenario(scenario_text)
    outcome = await execute_scenario(scenario, {manifest.id: manifest}, report={"status": "passed"})
    assert outcome.failures == ()
    assert outcome.ok
    assert outcome.id == "kernel-0001-golden"
    assert outcome.golden_run.status == "completed"
    assert outcome.golden_run.event_count == 5


_SCRIPT_FORMS = {
    "JSON array": (
        '[{"content": "hello"}, {"toolCalls": [{"id": "c1", "name": "echo", "arguments": {"m": 1}}]}]'
    ),
    "YAML flow list": "[{content: hello}, {toolCalls: [{id: c1, name: echo, arguments: {m: 1}}]}]",
    "YAML block list": "- content: hello\n- toolCalls:\n    - {id: c1, name: echo, arguments: {m: 1}}\n",
    "scenario": (
        "id: s\nuses_tasks: [t]\nexpect: {run: {status: completed}}\nscript:\n"
        "  - content: hello\n  - toolCalls: [{id: c1, name: echo, arguments: {m: 1}}]\n"
    ),
}


@pytest.mark.parametrize("form", sorted(_SCRIPT_FORMS))
def test_load_script_reads_a_list_of_turns_in_any_style_or_a_scenario(form: str) -> None:
    script = load_script(_SCRIPT_FORMS[form])
    assert [turn.content for turn in script] == ["hello", None]
    calls = script[1].tool_calls
    assert calls is not None
    assert [(call.id, call.name, call.arguments) for call in calls] == [("c1", "echo", {"m": 1})]


@pytest.mark.parametrize(
    ("text", "issue"),
    [
        ("[{content: hi}, 3]", ("script.1", "expected a mapping, got int")),
        ('[{"content": "hi"}, {"toolCalls": [{"id": "c"}]}]', ("script.1.toolCalls.0.name", "is required")),
        ("- content: hi\n- bogus: 1\n", ("script.1.bogus", "unknown key")),
        ("{a: 1}", ("a", "unknown key")),
        ("just text", ("<root>", "expected a mapping, got string")),
    ],
)
def test_load_script_names_the_position_of_what_is_not_a_turn(text: str, issue: tuple[str, str]) -> None:
    with pytest.raises(ScenarioParseError) as refused:
        load_script(text)
    assert issue in refused.value.issues
