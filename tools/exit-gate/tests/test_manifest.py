"""The task-manifest model: schema, defaults and every issue at once (exit-gate.md §2 and §3)."""

from __future__ import annotations

import copy
import pickle

import msgspec
import pytest
import yaml
from exit_gate_manifest_examples import (
    EXAMPLE,
    base,
    issues_of,
    loose,
)

from harness_exit_gate.manifest import (
    Delivery,
    ManifestIssue,
    ManifestParseError,
    TaskBudget,
    decode_task_manifest,
    load_task_manifest,
    manifest_permissions,
)
from harness_kernel import HarnessError
from harness_kernel.policy import RulePermissionController, ToolPermissionIntent, decide

# ------------------------------------------------------------------ the example


def test_the_spec_example_loads_with_every_field() -> None:
    manifest = load_task_manifest(EXAMPLE)

    assert manifest.id == "m8-workspace-capability-boundary"
    assert manifest.title == "Enforce the workspace capability boundary"
    assert manifest.goal.startswith("Move filesystem and process authority")
    assert manifest.goal.endswith("no operational adapter.\n")
    assert len(manifest.acceptance) == 6
    assert manifest.allowed_paths[0] == "packages/workspace/**"
    assert manifest.permissions["fs.write"] == "ask"
    exec_rules = manifest.permissions["process.exec"]
    assert not isinstance(exec_rules, str)
    assert exec_rules["*"] == "deny"
    assert len(exec_rules) == 19
    assert manifest.budget == TaskBudget(max_model_tokens=100000, max_tool_calls=200)
    assert manifest.delivery == Delivery(type="pull_request")


def test_the_example_loads_from_utf8_bytes_too() -> None:
    assert load_task_manifest(EXAMPLE.encode()) == load_task_manifest(EXAMPLE)
    assert load_task_manifest(b"\xef\xbb\xbf" + EXAMPLE.encode()) == load_task_manifest(EXAMPLE)


def test_the_example_decodes_identically_from_plain_objects() -> None:
    assert decode_task_manifest(yaml.safe_load(EXAMPLE)) == load_task_manifest(EXAMPLE)


def test_the_example_permissions_drive_the_gate_decision() -> None:
    permissions = manifest_permissions(load_task_manifest(EXAMPLE))

    assert decide(permissions, "process.exec", "uv run --frozen pytest").effect == "allow"
    assert decide(permissions, "process.exec", "git status --porcelain").effect == "allow"
    assert decide(permissions, "process.exec", "curl example.com").effect == "deny"


def test_manifest_permissions_plug_into_the_rule_controller() -> None:
    controller = RulePermissionController(manifest_permissions(load_task_manifest(EXAMPLE)))

    assert controller.decide(ToolPermissionIntent(action="fs.read", subject="a.py")).effect == "allow"
    assert controller.decide(ToolPermissionIntent(action="fs.write", subject="a.py")).effect == "ask"
    assert controller.decide(ToolPermissionIntent(action="process.exec", subject="rm -rf /")).effect == "deny"
    assert controller.decide(ToolPermissionIntent(action="tool.call", subject="echo")).effect == "ask"


def test_manifest_permissions_refuses_other_objects() -> None:
    with pytest.raises(TypeError):
        manifest_permissions(loose(base()))


# ------------------------------------------------------------------ immutability


def test_a_manifest_is_deeply_immutable() -> None:
    manifest = load_task_manifest(EXAMPLE)

    assert type(manifest.acceptance) is tuple
    assert type(manifest.allowed_paths) is tuple
    with pytest.raises(AttributeError):
        loose(manifest).title = "changed"
    with pytest.raises(AttributeError):
        loose(manifest.delivery).type = "merge"
    with pytest.raises(AttributeError):
        loose(manifest.budget).max_tool_calls = 1
    with pytest.raises(TypeError):
        loose(manifest.permissions)["network"] = "allow"
    with pytest.raises(TypeError):
        loose(manifest.permissions["process.exec"])["rm*"] = "allow"


def test_a_decoded_manifest_does_not_share_the_callers_objects() -> None:
    document = base()
    manifest = decode_task_manifest(document)
    document["permissions"]["fs.read"] = "deny"
    document["permissions"]["process.exec"]["rm*"] = "allow"
    document["acceptance"].append("more")

    assert manifest.permissions["fs.read"] == "allow"
    assert "rm*" not in manifest.permissions["process.exec"]
    assert manifest.acceptance == ("round-trips",)


# ------------------------------------------------------------------ optional parts and defaults


def test_budget_is_optional_and_delivery_type_defaults_to_pull_request() -> None:
    document = base()
    document["delivery"] = {}

    manifest = decode_task_manifest(document)

    assert manifest.budget is None
    assert manifest.delivery.type == "pull_request"


@pytest.mark.parametrize("delivery", ["pull_request", "merge", "artifact", "none"])
def test_every_delivery_type_is_accepted(delivery: str) -> None:
    document = base()
    document["delivery"] = {"type": delivery}

    assert decode_task_manifest(document).delivery.type == delivery


def test_an_empty_budget_and_empty_permissions_are_valid() -> None:
    document = base()
    document["budget"] = {}
    document["permissions"] = {}

    manifest = decode_task_manifest(document)

    assert manifest.budget == TaskBudget()
    assert dict(manifest.permissions) == {}


def test_lists_may_be_tuples_in_decoded_documents() -> None:
    document = base()
    document["acceptance"] = ("a", "b")

    assert decode_task_manifest(document).acceptance == ("a", "b")


# ------------------------------------------------------------------ one rule at a time

CASES: list[tuple[str, object, tuple[str, str]]] = [
    ("id", "Kernel-0001", ("id", "id must be a kebab-case identifier")),
    ("id", "kernel--0001", ("id", "id must be a kebab-case identifier")),
    ("id", "-kernel", ("id", "id must be a kebab-case identifier")),
    ("id", "kernel_0001", ("id", "id must be a kebab-case identifier")),
    ("id", "", ("id", "id must be a kebab-case identifier")),
    ("id", "a" * 129, ("id", "must be at most 128 characters")),
    ("id", 7, ("id", "expected a string, got int")),
    ("title", "", ("title", "must be a non-empty string")),
    ("title", None, ("title", "expected a string, got null")),
    ("title", ["t"], ("title", "expected a string, got sequence")),
    ("goal", True, ("goal", "expected a string, got bool")),
    ("goal", "\ud800", ("goal", "must not contain lone surrogates")),
    ("acceptance", [], ("acceptance", "must contain at least one item")),
    ("acceptance", "one", ("acceptance", "expected a list, got string")),
    ("acceptance", ["ok", ""], ("acceptance.1", "must be a non-empty string")),
    ("acceptance", ["ok", 3], ("acceptance.1", "expected a string, got int")),
    ("allowed_paths", [], ("allowed_paths", "must contain at least one item")),
    ("allowed_paths", ["ok/**", "/etc/**"], ("allowed_paths.1", "must be repo-relative (no leading /)")),
    ("allowed_paths", ["a/../b"], ("allowed_paths.0", "must not contain a .. segment")),
    ("allowed_paths", [".."], ("allowed_paths.0", "must not contain a .. segment")),
    ("allowed_paths", ["a\\b"], ("allowed_paths.0", "must not contain a backslash")),
    ("allowed_paths", ["a\0b"], ("allowed_paths.0", "must not contain NUL")),
    ("allowed_paths", [""], ("allowed_paths.0", "must be a non-empty string")),
    ("permissions", ["fs.read"], ("permissions", "expected a mapping, got sequence")),
    (
        "permissions",
        {"Fs.read": "allow"},
        ("permissions.Fs.read", r"action must match ^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"),
    ),
    (
        "permissions",
        {"fs..read": "allow"},
        ("permissions.fs..read", r"action must match ^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"),
    ),
    (
        "permissions",
        {"fs.": "allow"},
        ("permissions.fs.", r"action must match ^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"),
    ),
    (
        "permissions",
        {"fs.1read": "allow"},
        ("permissions.fs.1read", r"action must match ^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"),
    ),
    (
        "permissions",
        {"a" * 129: "allow"},
        ("permissions." + "a" * 129, "action must be at most 128 characters"),
    ),
    (
        "permissions",
        {"git.branch": "allow"},
        ("permissions.git.branch", 'action "git.branch" is reserved for the exit gate'),
    ),
    (
        "permissions",
        {"workspace.path_scope": {"*": "deny"}},
        ("permissions.workspace.path_scope", 'action "workspace.path_scope" is reserved for the exit gate'),
    ),
    (
        "permissions",
        {"fs.read": "maybe"},
        ("permissions.fs.read", 'effect must be one of allow, ask, deny, got "maybe"'),
    ),
    (
        "permissions",
        {"fs.read": 1},
        (
            "permissions.fs.read",
            "expected one of allow, ask, deny or a mapping of subject patterns to effects, got int",
        ),
    ),
    (
        "permissions",
        {"process.exec": {"": "allow"}},
        ("permissions.process.exec", "subject patterns must be non-empty"),
    ),
    (
        "permissions",
        {"process.exec": {"x" * 4097: "allow"}},
        ("permissions.process.exec", "subject patterns must be at most 4096 characters"),
    ),
    (
        "permissions",
        {"process.exec": {"git *": "nope"}},
        ("permissions.process.exec.git *", 'effect must be one of allow, ask, deny, got "nope"'),
    ),
    (
        "permissions",
        {"process.exec": {"git *": {"a": "allow"}}},
        ("permissions.process.exec.git *", "effect must be one of allow, ask, deny, got mapping"),
    ),
    ("permissions", {1: "allow"}, ("permissions", "keys must be strings, got int")),
    ("budget", None, ("budget", "expected a mapping, got null")),
    ("budget", {"max_tool_calls": 0}, ("budget.max_tool_calls", "must be a positive integer")),
    ("budget", {"max_model_tokens": -5}, ("budget.max_model_tokens", "must be a positive integer")),
    (
        "budget",
        {"max_model_tokens": 1.5},
        ("budget.max_model_tokens", "expected a positive integer, got float"),
    ),
    ("budget", {"max_tool_calls": True}, ("budget.max_tool_calls", "expected a positive integer, got bool")),
    ("budget", {"max_tool_calls": "5"}, ("budget.max_tool_calls", "expected a positive integer, got string")),
    ("budget", {"max_tool_calls": 2**53}, ("budget.max_tool_calls", "must be at most 9007199254740991")),
    ("budget", {"max_steps": 3}, ("budget.max_steps", "unknown field")),
    (
        "delivery",
        {"type": "email"},
        ("delivery.type", 'must be one of pull_request, merge, artifact, none, got "email"'),
    ),
    (
        "delivery",
        {"type": None},
        ("delivery.type", "must be one of pull_request, merge, artifact, none, got null"),
    ),
    ("delivery", {"type": "merge", "to": "main"}, ("delivery.to", "unknown field")),
    ("delivery", "pull_request", ("delivery", "expected a mapping, got string")),
    ("owner", "me", ("owner", "unknown field")),
]


@pytest.mark.parametrize(("field", "value", "expected"), CASES)
def test_each_rule_violation_is_reported_at_its_path_when_decoding(
    field: str, value: object, expected: tuple[str, str]
) -> None:
    document = base()
    document[field] = value

    assert issues_of(document) == [expected]


@pytest.mark.parametrize(("field", "value", "expected"), [case for case in CASES if case[0] != "goal"])
def test_each_rule_violation_is_reported_at_its_path_when_loading_yaml(
    field: str, value: object, expected: tuple[str, str]
) -> None:
    document = base()
    document[field] = value
    text = msgspec.yaml.encode(document).decode()

    assert issues_of(text) == [expected]


@pytest.mark.parametrize(
    "field", ["id", "title", "goal", "acceptance", "allowed_paths", "permissions", "delivery"]
)
def test_each_missing_required_field_is_reported(field: str) -> None:
    document = base()
    del document[field]

    assert issues_of(document) == [("<root>", f'missing required field "{field}"')]


def test_every_issue_is_collected_and_listed_in_the_message() -> None:
    text = """\
id: Bad Id
title: yes
acceptance: []
allowed_paths: [/abs, ok/**, "a\\\\b"]
permissions: {git.push: perhaps}
budget: {max_tool_calls: 0}
extra: 1
"""
    with pytest.raises(ManifestParseError) as caught:
        load_task_manifest(text)

    expected = [
        ManifestIssue("id", "id must be a kebab-case identifier"),
        ManifestIssue("title", "expected a string, got bool"),
        ManifestIssue("acceptance", "must contain at least one item"),
        ManifestIssue("allowed_paths.0", "must be repo-relative (no leading /)"),
        ManifestIssue("allowed_paths.2", "must not contain a backslash"),
        ManifestIssue("permissions.git.push", 'effect must be one of allow, ask, deny, got "perhaps"'),
        ManifestIssue("budget.max_tool_calls", "must be a positive integer"),
        ManifestIssue("extra", "unknown field"),
        ManifestIssue("<root>", 'missing required field "goal"'),
        ManifestIssue("<root>", 'missing required field "delivery"'),
    ]
    assert caught.value.issues == expected
    assert str(caught.value) == "invalid task manifest: " + "; ".join(
        f"{issue.path} {issue.message}" for issue in expected
    )


def test_an_empty_mapping_lists_every_missing_required_field() -> None:
    with pytest.raises(ManifestParseError) as caught:
        decode_task_manifest({})

    assert str(caught.value) == (
        'invalid task manifest: <root> missing required field "id"; <root> missing required field "title"; '
        '<root> missing required field "goal"; <root> missing required field "acceptance"; '
        '<root> missing required field "allowed_paths"; <root> missing required field "permissions"; '
        '<root> missing required field "delivery"'
    )


def test_the_parse_error_is_a_typed_kernel_error_that_survives_pickling() -> None:
    with pytest.raises(ManifestParseError) as caught:
        load_task_manifest("id: x\n")
    error = caught.value

    assert isinstance(error, HarnessError)
    assert error.code == "MANIFEST_INVALID"
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(clone) is ManifestParseError
        assert (clone.code, clone.issues, str(clone)) == (error.code, error.issues, str(error))


# ------------------------------------------------------------------ decoded documents


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (None, [("<root>", "expected a mapping, got null")]),
        ([], [("<root>", "expected a mapping, got sequence")]),
        ("id: x", [("<root>", "manifest must contain exactly one YAML document, found none")]),
    ],
)
def test_a_non_mapping_document_is_refused_at_the_root(
    document: object, expected: list[tuple[str, str]]
) -> None:
    if isinstance(document, str):
        # A str given to decode_task_manifest is a decoded value, not YAML text.
        with pytest.raises(ManifestParseError) as caught:
            decode_task_manifest(document)
        assert [(i.path, i.message) for i in caught.value.issues] == [
            ("<root>", "expected a mapping, got string")
        ]
        return
    assert issues_of(document) == expected


class _Dict(dict[str, object]):
    pass


def test_mapping_subclasses_are_refused_without_being_read() -> None:
    document = _Dict(base())

    assert issues_of(document) == [("<root>", "expected a mapping, got object of type _Dict")]


def test_non_string_keys_are_reported_at_their_mapping() -> None:
    document: dict[object, object] = {}
    document.update(base())
    document[3] = "x"

    assert issues_of(document) == [("<root>", "keys must be strings, got int")]
