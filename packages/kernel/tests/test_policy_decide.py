"""The rule engine's five steps, their exact reasons, and its input checks (kernel.md §5.1)."""

from __future__ import annotations

from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import msgspec
import pytest

from harness_kernel import HarnessError
from harness_kernel.policy import (
    Decision,
    Effect,
    InvalidPermissionRulesError,
    InvalidPolicyInputError,
    PermissionMap,
    Rule,
    compile_rules,
    decide,
)
from harness_kernel.policy._rules import RANK


def loose(value: object) -> Any:
    """Hand a deliberately ill-typed value to the API under test."""
    return value


EXEC: dict[str, Effect] = {"git status*": "allow", "git push*": "deny", "*": "deny"}


# ------------------------------------------------------------------ step 1: no rule


@pytest.mark.parametrize("permissions", [None, {}, {"fs.read": "allow"}])
def test_an_action_without_a_rule_asks_with_the_safe_default_reason(
    permissions: PermissionMap | None,
) -> None:
    decision = decide(permissions, "process.exec", "ls")

    assert decision == Decision(
        "process.exec", "ls", "ask", 'no rule for action "process.exec"; safe default is ask', None
    )


# ------------------------------------------------------------------ step 2: flat rules


@pytest.mark.parametrize("effect", ["allow", "ask", "deny"])
@pytest.mark.parametrize("subject", [None, "anything/at all"])
def test_a_flat_rule_decides_with_its_effect_whatever_the_subject(
    effect: Effect, subject: str | None
) -> None:
    decision = decide({"fs.read": effect}, "fs.read", subject)

    assert (decision.effect, decision.reason, decision.rule) == (effect, 'flat rule for "fs.read"', effect)
    assert (decision.action, decision.subject) == ("fs.read", subject)


# ------------------------------------------------------------------ step 3: subject patterns


def test_a_matching_subject_pattern_decides_and_the_rule_is_the_subject_map() -> None:
    decision = decide({"process.exec": EXEC}, "process.exec", "git status --short")

    assert decision.effect == "allow"
    assert decision.reason == 'subject matched pattern "git status*"'
    assert decision.rule == EXEC


def test_the_longest_matching_pattern_wins_over_shorter_ones() -> None:
    rules: PermissionMap = {"tool.call": {"read*": "deny", "read_file": "allow", "r*": "ask"}}

    decision = decide(rules, "tool.call", "read_file")

    assert (decision.effect, decision.reason) == ("allow", 'subject matched pattern "read_file"')


@pytest.mark.parametrize(
    ("patterns", "effect", "pattern"),
    [
        ({"a?c": "allow", "ab*": "ask", "*bc": "deny"}, "deny", "*bc"),
        ({"*bc": "deny", "ab*": "ask", "a?c": "allow"}, "deny", "*bc"),
        ({"a?c": "allow", "ab*": "ask"}, "ask", "ab*"),
        ({"ab*": "ask", "a?c": "allow"}, "ask", "ab*"),
    ],
)
def test_equally_long_matches_tie_break_deny_over_ask_over_allow(
    patterns: dict[str, Effect], effect: Effect, pattern: str
) -> None:
    decision = decide({"x": patterns}, "x", "abc")

    assert (decision.effect, decision.reason) == (effect, f'subject matched pattern "{pattern}"')


def test_a_full_tie_names_the_first_pattern_in_map_order() -> None:
    decision = decide({"x": {"a?c": "allow", "ab?": "allow"}}, "x", "abc")

    assert decision.reason == 'subject matched pattern "a?c"'


def test_the_literal_star_key_never_competes_as_a_pattern() -> None:
    # "*" is longer than nothing but is only ever the fallback; "x*" decides.
    decision = decide({"x": {"*": "allow", "y*": "deny"}}, "x", "yes")

    assert (decision.effect, decision.reason) == ("deny", 'subject matched pattern "y*"')


def test_a_double_star_pattern_is_an_ordinary_pattern_not_the_fallback() -> None:
    decision = decide({"x": {"**": "allow"}}, "x", "a/b/c")

    assert (decision.effect, decision.reason) == ("allow", 'subject matched pattern "**"')


def test_an_empty_subject_is_still_a_subject() -> None:
    decision = decide({"x": {"": "allow"}}, "x", "")

    assert (decision.effect, decision.reason) == ("allow", 'subject matched pattern ""')


# ------------------------------------------------------------------ step 4: the fallback


def test_the_fallback_decides_when_no_pattern_matches() -> None:
    decision = decide({"process.exec": EXEC}, "process.exec", "rm -rf /")

    assert (decision.effect, decision.reason) == ("deny", 'no pattern matched; fallback "*"')
    assert decision.rule == EXEC


def test_the_fallback_decides_when_there_is_no_subject() -> None:
    decision = decide({"process.exec": {"git*": "deny", "*": "allow"}}, "process.exec")

    assert (decision.effect, decision.reason) == ("allow", 'fallback "*" (no subject to match)')


# ------------------------------------------------------------------ step 5: closed by default


def test_an_unmatched_subject_without_fallback_is_denied_closed_by_default() -> None:
    decision = decide({"tool.call": {"echo": "allow"}}, "tool.call", "read_file")

    assert decision == Decision(
        "tool.call",
        "read_file",
        "deny",
        "no pattern matched and no fallback rule; closed by default",
        {"echo": "allow"},
    )


def test_no_subject_and_no_fallback_asks() -> None:
    decision = decide({"tool.call": {"echo": "allow"}}, "tool.call")

    assert decision.effect == "ask"
    assert decision.reason == "no flat rule and no subject to match patterns against; safe default is ask"
    assert decision.rule == {"echo": "allow"}


def test_an_empty_subject_map_denies_subjects_and_asks_without_one() -> None:
    assert decide({"x": {}}, "x", "a").effect == "deny"
    assert decide({"x": {}}, "x").effect == "ask"


# ------------------------------------------------------------------ records and immutability


def test_rank_orders_effects_and_cannot_be_changed() -> None:
    assert dict(RANK) == {"allow": 0, "ask": 1, "deny": 2}
    with pytest.raises(TypeError):
        loose(RANK)["allow"] = 3


def test_a_decision_is_frozen_and_its_subject_map_is_a_read_only_copy() -> None:
    rules: dict[str, dict[str, Effect]] = {"x": {"a": "allow"}}
    decision = decide(rules, "x", "a")
    rules["x"]["a"] = "deny"

    assert decision.rule == {"a": "allow"}
    with pytest.raises(TypeError):
        loose(decision.rule)["a"] = "deny"
    with pytest.raises(AttributeError):
        loose(decision).effect = "deny"


def test_read_only_mappings_are_accepted_at_both_levels() -> None:
    subjects: MappingProxyType[str, Effect] = MappingProxyType({"a*": "allow"})
    rules: PermissionMap = MappingProxyType({"x": subjects})

    assert decide(rules, "x", "ab").effect == "allow"
    assert compile_rules(rules).decide("x", "ab").effect == "allow"


def test_compiled_rules_copy_the_map_and_list_actions_in_map_order() -> None:
    rules: dict[str, Rule] = {"b": "allow", "a": {"x": "deny"}}
    compiled = compile_rules(rules)
    rules["b"] = "deny"

    assert compiled.actions() == ("b", "a")
    assert compiled.decide("b").effect == "allow"
    assert compile_rules(None).actions() == ()
    assert compile_rules(None).decide("b") == decide(None, "b")


def test_decisions_with_flat_rules_are_msgspec_encodable_records() -> None:
    decision = decide({"fs.read": "allow"}, "fs.read", "a")

    assert msgspec.json.decode(msgspec.json.encode(decision)) == {
        "action": "fs.read",
        "subject": "a",
        "effect": "allow",
        "reason": 'flat rule for "fs.read"',
        "rule": "allow",
    }


# ------------------------------------------------------------------ input checks


class _MappingLookalike(OrderedDict[str, str]):
    pass


@pytest.mark.parametrize(
    "permissions",
    [
        ["fs.read"],
        "fs.read",
        _MappingLookalike(x="allow"),
        {1: "allow"},
        {"x": "Allow"},
        {"x": "permit"},
        {"x": True},
        {"x": None},
        {"x": ["allow"]},
        {"x": {1: "allow"}},
        {"x": {"a": "nope"}},
        {"x": {"a": {"b": "allow"}}},
        {"x": _MappingLookalike(a="allow")},
    ],
)
def test_malformed_permission_maps_raise_a_typed_error(permissions: object) -> None:
    for attempt in (lambda: decide(loose(permissions), "x", "a"), lambda: compile_rules(loose(permissions))):
        with pytest.raises(InvalidPermissionRulesError) as caught:
            attempt()
        assert caught.value.code == "POLICY_INVALID_RULES"
        assert isinstance(caught.value, HarnessError)


def test_a_malformed_rule_for_another_action_still_fails_decide() -> None:
    with pytest.raises(InvalidPermissionRulesError):
        decide(loose({"x": "allow", "y": "maybe"}), "x")


@pytest.mark.parametrize(("action", "subject"), [(None, "a"), (1, None), ("x", 1), ("x", b"a")])
def test_non_string_actions_and_subjects_raise_a_typed_error(action: object, subject: object) -> None:
    with pytest.raises(InvalidPolicyInputError) as caught:
        decide({"x": "allow"}, loose(action), loose(subject))
    assert caught.value.code == "POLICY_INVALID_INPUT"
    with pytest.raises(InvalidPolicyInputError):
        compile_rules({"x": "allow"}).decide(loose(action), loose(subject))
