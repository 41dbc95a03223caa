"""One tool gate and one admission table for every call.

The runtime asks the gate (``harness_kernel._gate``) every question about a call, and the
table (``harness_tools.call_rule``); ``run_agent`` runs on the runtime, so it asks them too, and
its facade only words the answers as its specification does (``kernel.`` rule ids, its event
shapes, M7's unreviewed tools run like pure ones).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from runtime_helpers import AskController, drain, make_input

from harness_kernel._gate import (
    ToolGate,
    ToolInputError,
    convert_arguments,
    permission_intent,
    resolution_of,
)
from harness_kernel._json import has_lone_surrogate
from harness_kernel.events import Event, serialize_event
from harness_kernel.legacy import RunOptions, run_agent
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.policy import PermissionDecision, PermissionResolution, ToolPermissionIntent
from harness_kernel.runtime import MinimalAgentRuntime
from harness_tools import PureBoundary, SandboxBoundary, Tool, ToolRegistry, create_bounded_tool, create_tool


class _Text(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str


async def _shout(params: _Text, context: object = None) -> dict[str, object]:
    return {"text": params.text.upper()}


def _tool(authorization: Any = None) -> Tool[_Text]:
    return create_tool(
        name="shout", description="d", parameters=_Text, execute=_shout, authorization=authorization
    )


def _sandboxed() -> Tool[_Text]:
    return create_bounded_tool(_tool(), SandboxBoundary(root="/srv/box"))


def test_conversion_failures_name_the_tool_and_the_first_problem() -> None:
    with pytest.raises(ToolInputError) as bad:
        convert_arguments(_tool(), {"text": 3})
    assert str(bad.value).startswith("invalid input for shout: ")
    with pytest.raises(ToolInputError):
        convert_arguments(_tool(), {"text": "x", "extra": 1})
    assert convert_arguments(_tool(), {"text": "x"}) == _Text(text="x")


def _fixed(answer: object) -> Any:
    def authorize(params: _Text) -> object:
        if answer is ZeroDivisionError:
            raise ZeroDivisionError
        return answer

    return authorize


@pytest.mark.parametrize(
    "answer",
    [
        ToolPermissionIntent(action="", subject=None),
        ToolPermissionIntent(action="a" * 257),
        ToolPermissionIntent(action="fs.read", subject="x" * 4097),
        ToolPermissionIntent(action="fs.read", subject="\ud800"),
        {"action": "fs.read"},
        ZeroDivisionError,
    ],
)
def test_an_authorization_that_misbehaves_fails_closed(answer: object) -> None:
    assert permission_intent(_tool(_fixed(answer)), _Text(text="x")) is None


def test_an_async_authorization_fails_closed_and_is_closed_unawaited() -> None:
    async def later(params: _Text) -> ToolPermissionIntent:
        return ToolPermissionIntent(action="fs.read")

    assert permission_intent(_tool(later), _Text(text="x")) is None  # no "never awaited" warning


_RESOLUTIONS = st.builds(
    PermissionResolution, st.sampled_from(["allow", "deny"]), st.none() | st.text(max_size=4096)
)


@given(
    st.one_of(
        st.sampled_from(["allow", "deny", "ALLOW", "maybe", ""]), _RESOLUTIONS, st.integers(), st.none()
    )
)
def test_only_allow_or_deny_with_a_valid_note_is_an_answer(answer: object) -> None:
    resolution = resolution_of(answer)
    if type(answer) is str and answer in ("allow", "deny"):
        assert resolution == PermissionResolution(answer)
    elif type(answer) is PermissionResolution:
        assert isinstance(answer, PermissionResolution)
        note_ok = answer.note is None or not has_lone_surrogate(answer.note)
        assert resolution == (answer if note_ok else None)
    else:
        assert resolution is None


def test_a_controller_that_misbehaves_fails_closed_and_grants_are_per_run() -> None:
    def decide(intent: ToolPermissionIntent) -> object:
        return {"effect": "allow"}

    tool = create_bounded_tool(_tool(), SandboxBoundary(root="/srv/box"))
    intent = ToolPermissionIntent(action="tool.call", subject="shout", scope="run")
    gate = ToolGate(workspace=None, decide=decide)
    verdict = gate.judge(tool, intent)
    assert (verdict.effect, verdict.rule_id) == ("deny", "runtime.m8.reviewed_boundaries_only")
    pure = create_bounded_tool(_tool(), PureBoundary())
    failed = gate.judge(pure, intent)
    assert (failed.effect, failed.rule_id, failed.failed_closed) == ("deny", "runtime.policy.invalid", True)

    def ask(intent: ToolPermissionIntent) -> PermissionDecision:
        return PermissionDecision("ask", "ask me", "r-1")

    asking = ToolGate(workspace=None, decide=ask)
    asked = asking.judge(pure, intent)
    assert (asked.effect, asked.rule_id) == ("ask", "r-1")
    assert not asking.granted(intent)
    asking.grant(intent)
    assert asking.granted(intent)
    assert not gate.granted(intent)
    once = ToolPermissionIntent(action="tool.call", subject="other", scope="once")
    asking.grant(once)
    assert not asking.granted(once)


def _data(event: Event) -> dict[str, Any]:
    return json.loads(serialize_event(event))["data"]


def _decisions(events: list[Event]) -> list[tuple[str, str | None]]:
    return [(_data(e)["effect"], _data(e).get("ruleId")) for e in events if e.type == "policy.decision"]


def _errors(events: list[Event]) -> list[str]:
    results = [_data(e) for e in events if e.type == "tool.result"]
    return [result["error"]["code"] for result in results if not result["ok"]]


@pytest.mark.parametrize("controller", [False, True])
async def test_both_loops_refuse_a_sandbox_bound_tool_by_the_same_table(controller: bool) -> None:
    turns = [ScriptedTurn(tool_calls=[ToolCall("m1", "shout", {"text": "x"})]), ScriptedTurn(content="done")]
    permission = AskController(effect="allow") if controller else None
    events, _ = await drain(
        MinimalAgentRuntime().run(
            make_input(FakeModel(turns), tools=ToolRegistry([_sandboxed()]), permission=permission)
        )
    )
    assert _decisions(events) == [("deny", "runtime.m8.reviewed_boundaries_only")]
    assert _errors(events) == ["TOOL_NOT_PURE"]
    seen: list[Event] = []

    async def record(event: Event) -> None:
        seen.append(event)

    await run_agent(
        RunOptions(
            goal="g",
            model=FakeModel(turns),
            tools=ToolRegistry([_sandboxed()]),
            permission=permission,
            on_event=record,
        )
    )
    assert _decisions(seen) == [("deny", "kernel.m8.reviewed_boundaries_only")]
    assert _errors(seen) == ["TOOL_NOT_PURE"]
