"""The permission port: its records, the controller protocol and RulePermissionController (kernel.md §5.2)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
import pytest

from harness_kernel.policy import (
    InvalidPermissionRulesError,
    InvalidPolicyInputError,
    PermissionController,
    PermissionDecision,
    PermissionMap,
    PermissionRequest,
    PermissionResolution,
    RulePermissionController,
    ToolPermissionIntent,
    compile_rules,
)
from harness_tools import ToolPermissionIntent as ToolsIntent
from harness_workspace import AbortController, AbortSignal

RULES: PermissionMap = {
    "fs.read": "allow",
    "fs.write": "ask",
    "tool.call": {"echo": "allow", "read_*": "ask", "*": "deny"},
}


def loose(value: object) -> Any:
    """Hand a deliberately ill-typed value to the API under test."""
    return value


# ------------------------------------------------------------------ records


def test_permission_decision_keeps_its_fields_and_defaults_rule_id_to_none() -> None:
    decision = PermissionDecision("allow", "flat rule")

    assert (decision.effect, decision.reason, decision.rule_id) == ("allow", "flat rule", None)
    assert PermissionDecision("deny", "", "manifest.process_exec").rule_id == "manifest.process_exec"
    assert PermissionDecision("ask", "r" * 4096, "i" * 256).reason == "r" * 4096


@pytest.mark.parametrize(
    "fields",
    [
        {"effect": "permit", "reason": "r"},
        {"effect": None, "reason": "r"},
        {"effect": "allow", "reason": None},
        {"effect": "allow", "reason": "r" * 4097},
        {"effect": "allow", "reason": "r", "rule_id": ""},
        {"effect": "allow", "reason": "r", "rule_id": "   "},
        {"effect": "allow", "reason": "r", "rule_id": "i" * 257},
        {"effect": "allow", "reason": "r", "rule_id": 7},
    ],
)
def test_permission_decision_refuses_out_of_contract_fields(fields: dict[str, object]) -> None:
    with pytest.raises(InvalidPolicyInputError) as caught:
        PermissionDecision(**loose(fields))
    assert caught.value.code == "POLICY_INVALID_INPUT"


def test_decoding_a_permission_decision_checks_the_same_rules() -> None:
    raw = msgspec.json.encode({"effect": "allow", "reason": "ok", "rule_id": "x"})
    assert msgspec.json.decode(raw, type=PermissionDecision) == PermissionDecision("allow", "ok", "x")

    with pytest.raises(InvalidPolicyInputError):
        msgspec.json.decode(b'{"effect":"allow","reason":"ok","rule_id":""}', type=PermissionDecision)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"effect":"allow","reason":"ok","extra":1}', type=PermissionDecision)


def test_permission_request_keeps_its_fields_in_contract_order() -> None:
    request = PermissionRequest(
        "perm-1", "sess-1", "call-1", "fs.write", "a.txt", "run", "asked", "run-1", "turn-1"
    )

    assert msgspec.structs.astuple(request) == (
        "perm-1",
        "sess-1",
        "call-1",
        "fs.write",
        "a.txt",
        "run",
        "asked",
        "run-1",
        "turn-1",
    )
    minimal = PermissionRequest("perm-1", "sess-1", "call-1", "fs.write")
    assert (minimal.subject, minimal.scope, minimal.reason, minimal.run_id, minimal.turn_id) == (
        None,
        "once",
        "",
        None,
        None,
    )


@pytest.mark.parametrize(
    "change",
    [
        {"permission_id": ""},
        {"session_id": " "},
        {"call_id": None},
        {"action": "a" * 257},
        {"subject": "s" * 4097},
        {"subject": 3},
        {"scope": "forever"},
        {"reason": "r" * 4097},
        {"run_id": ""},
        {"turn_id": "t" * 257},
    ],
)
def test_permission_request_refuses_out_of_contract_fields(change: dict[str, object]) -> None:
    fields: dict[str, object] = {
        "permission_id": "perm-1",
        "session_id": "sess-1",
        "call_id": "call-1",
        "action": "fs.write",
    }
    fields.update(change)

    with pytest.raises(InvalidPolicyInputError):
        PermissionRequest(**loose(fields))


@pytest.mark.parametrize("decision", ["allow", "deny"])
def test_permission_resolution_accepts_allow_and_deny(decision: Literal["allow", "deny"]) -> None:
    assert PermissionResolution(decision).note is None
    assert PermissionResolution(decision, "n" * 4096).note == "n" * 4096


@pytest.mark.parametrize(
    ("decision", "note"), [("ask", None), ("ALLOW", None), ("allow", "n" * 4097), ("deny", 1)]
)
def test_permission_resolution_refuses_other_answers_and_long_notes(decision: object, note: object) -> None:
    with pytest.raises(InvalidPolicyInputError):
        PermissionResolution(loose(decision), loose(note))


# ------------------------------------------------------------------ the rule-backed controller


def test_tool_permission_intent_is_the_very_type_of_harness_tools() -> None:
    assert ToolPermissionIntent is ToolsIntent


@pytest.mark.parametrize(
    ("action", "subject"),
    [
        ("fs.read", "a.txt"),
        ("fs.write", None),
        ("tool.call", "echo"),
        ("tool.call", "read_file"),
        ("tool.call", "rm"),
        ("tool.call", None),
        ("network", None),
    ],
)
def test_rule_controller_answers_the_compiled_rules_effect_and_reason_without_rule_id(
    action: str, subject: str | None
) -> None:
    controller = RulePermissionController(RULES)
    expected = compile_rules(RULES).decide(action, subject)

    decision = controller.decide(ToolPermissionIntent(action=action, subject=subject))

    assert decision == PermissionDecision(expected.effect, expected.reason)
    assert type(decision) is PermissionDecision
    assert decision.rule_id is None


def test_rule_controller_cuts_long_reasons_to_the_record_limit() -> None:
    action = "a" * 5000
    decision = RulePermissionController({}).decide(ToolPermissionIntent(action=action))

    assert decision.effect == "ask"
    assert decision.reason == f'no rule for action "{action}"; safe default is ask'[:4096]


def test_rule_controller_copies_the_map_when_built() -> None:
    rules: dict[str, Literal["allow", "ask", "deny"]] = {"fs.read": "allow"}
    controller = RulePermissionController(rules)
    rules["fs.read"] = "deny"

    assert controller.decide(ToolPermissionIntent(action="fs.read")).effect == "allow"


@pytest.mark.parametrize(
    "intent",
    [
        None,
        {"action": "fs.read"},
        ToolPermissionIntent(action=loose(1)),
        ToolPermissionIntent(action="fs.read", subject=loose(b"x")),
    ],
)
def test_rule_controller_refuses_anything_but_a_well_typed_intent(intent: object) -> None:
    with pytest.raises(InvalidPolicyInputError):
        RulePermissionController(RULES).decide(loose(intent))


def test_rule_controller_refuses_a_malformed_map_or_resolver_when_built() -> None:
    with pytest.raises(InvalidPermissionRulesError):
        RulePermissionController(loose({"fs.read": "yes"}))
    with pytest.raises(InvalidPolicyInputError):
        RulePermissionController(RULES, resolve=loose("allow"))


def test_rule_controller_without_resolver_has_none() -> None:
    assert RulePermissionController(RULES).resolve is None


async def test_rule_controller_exposes_the_given_resolver_as_its_resolve() -> None:
    seen: list[tuple[PermissionRequest, AbortSignal]] = []

    async def resolve(request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
        seen.append((request, signal))
        return PermissionResolution("deny", "not today")

    controller = RulePermissionController(RULES, resolve=resolve)
    request = PermissionRequest("perm-1", "sess-1", "call-1", "fs.write", "a.txt", "once", "ask")
    signal = AbortController().signal

    resolver = controller.resolve
    assert resolver is not None
    assert resolver is resolve
    assert await resolver(request, signal) == PermissionResolution("deny", "not today")
    assert seen == [(request, signal)]


def test_a_rule_controller_satisfies_the_permission_controller_protocol() -> None:
    controller: PermissionController = RulePermissionController(RULES)

    assert controller.decide(ToolPermissionIntent(action="fs.read")).effect == "allow"
