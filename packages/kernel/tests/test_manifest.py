"""The task-manifest model: schema, strict YAML, every issue at once (exit-gate.md §2 and §3)."""

# The example manifest is quoted verbatim from the spec, long lines included.
# ruff: noqa: E501

from __future__ import annotations

import copy
import pickle
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel import HarnessError
from harness_kernel.manifest import (
    Delivery,
    ManifestIssue,
    ManifestParseError,
    TaskBudget,
    TaskManifest,
    decode_task_manifest,
    load_task_manifest,
    manifest_permissions,
)
from harness_kernel.policy import RulePermissionController, ToolPermissionIntent, decide

PROPERTIES = settings(max_examples=150, deadline=None, database=None)

# exit-gate.md §3, verbatim.
EXAMPLE = """\
id: m8-workspace-capability-boundary
title: Enforce the workspace capability boundary
goal: >
  Move filesystem and process authority behind one injected Workspace contract, give model-facing
  tools only reviewed one-operation views, keep kernel and tool sources free of direct host imports,
  and make the agent server refuse workspace-bound tools while it has no operational adapter.
acceptance:
  - harness_workspace owns the Workspace protocol, strict dispatch, bind_workspace and restrict_workspace with typed errors
  - both kernel paths use only an injected, snapshotted capability and hand tools a one-operation view
  - read_file reads only through the injected Workspace and keeps its 131072-byte result limit
  - harness-import-boundary reports no findings for packages/kernel/src and packages/tools/src
  - agent-server rejects workspace-bound tools at session/new with -32602 and runs nothing
  - no LocalWorkspace, DockerWorkspace or new development tools are added
allowed_paths:
  - packages/workspace/**
  - packages/tools/**
  - packages/kernel/**
  - services/agent-server/src/agent_server/admission.py
  - services/agent-server/tests/test_admission.py
  - uv.lock
  - ARCHITECTURE.md
  - ROADMAP.md
  - README.md
  - tasks/m8-workspace-capability-boundary.yaml
permissions:
  fs.read: allow
  fs.write: ask
  network: deny
  git.push: deny
  process.exec:
    "uv sync --frozen --offline": allow
    "uv lock --check": allow
    "uv run --frozen ruff check": allow
    "uv run --frozen ruff format --check": allow
    "uv run --frozen pytest": allow
    "uv run --frozen pytest packages/workspace/tests": allow
    "uv run --frozen pytest packages/tools/tests": allow
    "uv run --frozen pytest packages/kernel/tests": allow
    "uv run --frozen pytest services/agent-server/tests": allow
    "uv run --frozen pyright": allow
    "uv run --frozen harness-eval": allow
    "uv run --frozen harness-import-boundary check": allow
    "uv run --frozen harness-exit-gate validate tasks/m8-workspace-capability-boundary.yaml": allow
    "uv run --frozen harness-exit-gate run tasks/m8-workspace-capability-boundary.yaml": allow
    "git status*": allow
    "git diff*": allow
    "git log*": allow
    "git rev-parse*": allow
    "*": deny
budget:
  max_model_tokens: 100000
  max_tool_calls: 200
delivery:
  type: pull_request
"""

MINIMAL = """\
id: kernel-0001
title: Kernel events
goal: Events round-trip.
acceptance: [round-trips]
allowed_paths: [packages/kernel/**]
permissions: {fs.read: allow}
delivery: {type: pull_request}
"""


def base() -> dict[str, Any]:
    """A valid decoded manifest, fresh for every use."""
    return {
        "id": "kernel-0001",
        "title": "Kernel events",
        "goal": "Events round-trip.",
        "acceptance": ["round-trips"],
        "allowed_paths": ["packages/kernel/**"],
        "permissions": {"fs.read": "allow", "process.exec": {"git status*": "allow", "*": "deny"}},
        "delivery": {"type": "pull_request"},
    }


def outcome(source: object) -> TaskManifest | ManifestParseError:
    """Load text or decode an object; return the manifest or the parse error."""
    try:
        if isinstance(source, str | bytes):
            return load_task_manifest(source)
        return decode_task_manifest(source)
    except ManifestParseError as error:
        return error


def issues_of(source: object) -> list[tuple[str, str]]:
    """The (path, message) pairs a manifest is refused with; text is loaded, objects decoded."""
    result = outcome(source)
    assert isinstance(result, ManifestParseError), f"expected a parse error, got {result!r}"
    return [(issue.path, issue.message) for issue in result.issues]


def assert_manifest_or_error(result: TaskManifest | ManifestParseError) -> None:
    """Either outcome is fine, as long as it is one of the two and well formed."""
    if isinstance(result, ManifestParseError):
        assert result.issues
        assert str(result).startswith("invalid task manifest: ")
    else:
        assert type(result) is TaskManifest


def loose(value: object) -> Any:
    """Hand a deliberately ill-typed value to the API under test."""
    return value


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


# ------------------------------------------------------------------ strict YAML


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("2026-01-01", "timestamp"),
        ("2026-01-01T10:00:00Z", "timestamp"),
        ("yes", "bool"),
        ("off", "bool"),
        ("12", "int"),
        ("0x1F", "int"),
        ("1_000", "int"),
        ("1.5", "float"),
        (".nan", "float"),
        ("~", "null"),
        ("null", "null"),
        ("", "null"),
        ("=", "value"),
    ],
)
def test_implicitly_typed_scalars_are_never_coerced_back_to_strings(value: str, kind: str) -> None:
    text = MINIMAL.replace("title: Kernel events", f"title: {value}")

    assert issues_of(text) == [("title", f"expected a string, got {kind}")]


@pytest.mark.parametrize("value", ['"2026-01-01"', "'yes'", '"12"', "'~'"])
def test_quoted_scalars_are_strings(value: str) -> None:
    text = MINIMAL.replace("title: Kernel events", f"title: {value}")

    assert load_task_manifest(text).title == value[1:-1]


def test_a_folded_goal_keeps_its_trailing_newline_and_a_literal_one_its_lines() -> None:
    folded = MINIMAL.replace("goal: Events round-trip.", "goal: >\n  one\n  two\n")
    literal = MINIMAL.replace("goal: Events round-trip.", "goal: |\n  one\n  two\n")

    assert load_task_manifest(folded).goal == "one two\n"
    assert load_task_manifest(literal).goal == "one\ntwo\n"


def test_a_malformed_yaml_int_is_a_type_error_not_a_crash() -> None:
    text = MINIMAL + "budget: {max_tool_calls: 0b_}\n"

    assert issues_of(text) == [("budget.max_tool_calls", "expected a positive integer, got malformed int")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MINIMAL + "title: again\n", [("title", "duplicate key")]),
        (
            MINIMAL.replace("{fs.read: allow}", "{fs.read: allow, fs.read: deny}"),
            [("permissions.fs.read", "duplicate key")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", '{process.exec: {"git *": allow, "git *": deny}}'),
            [("permissions.process.exec.git *", "duplicate key")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", '{process.exec: {"git *": allow, git *: deny}}'),
            [("permissions.process.exec.git *", "duplicate key")],
        ),
        (MINIMAL + "extra: {a: 1, a: 2}\n", [("extra.a", "duplicate key"), ("extra", "unknown field")]),
        (
            MINIMAL.replace("title: Kernel events", "title: &t Kernel events"),
            [("title", "anchors are not allowed (&t)")],
        ),
        (
            MINIMAL.replace("title: Kernel events", "title: &t Kernel events") + "x: *t\n",
            [
                ("title", "anchors are not allowed (&t)"),
                ("x", "aliases are not allowed (*t)"),
                ("x", "unknown field"),
            ],
        ),
        (
            MINIMAL.replace("delivery: {type: pull_request}", "delivery: {<<: {type: merge}}"),
            [("delivery.<<", "merge keys are not allowed")],
        ),
        (
            MINIMAL.replace("title: Kernel events", "title: !!str 2026-01-01"),
            [("title", "explicit tags are not allowed (!!str)")],
        ),
        (
            MINIMAL.replace("title: Kernel events", "title: ! 12"),
            [("title", "explicit tags are not allowed (!)")],
        ),
        (
            MINIMAL.replace("title: Kernel events", "title: !custom x"),
            [("title", "explicit tags are not allowed (!custom)")],
        ),
        (
            MINIMAL.replace("acceptance: [round-trips]", "acceptance: !!seq [round-trips]"),
            [("acceptance", "explicit tags are not allowed (!!seq)")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", "{fs.read: allow, !!str fs.write: ask}"),
            [("permissions.fs.write", "explicit tags are not allowed (!!str)")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", "{fs.read: allow, yes: ask}"),
            [("permissions", "keys must be strings, got bool")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", "{fs.read: allow, [a]: ask}"),
            [("permissions", "keys must be strings, got a collection")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", "{fs.read: &e allow, network: *e}"),
            [
                ("permissions.fs.read", "anchors are not allowed (&e)"),
                ("permissions.network", "aliases are not allowed (*e)"),
            ],
        ),
    ],
)
def test_duplicate_keys_anchors_aliases_merge_keys_and_tags_are_refused_at_any_depth(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert issues_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", [("<root>", "manifest must contain exactly one YAML document, found none")]),
        ("# only a comment\n", [("<root>", "manifest must contain exactly one YAML document, found none")]),
        (
            MINIMAL + "---\n" + MINIMAL,
            [("<root>", "manifest must contain exactly one YAML document, found several")],
        ),
        ("---\n", [("<root>", "expected a mapping, got null")]),
        ("- a\n- b\n", [("<root>", "expected a mapping, got sequence")]),
        ("just text\n", [("<root>", "expected a mapping, got string")]),
    ],
)
def test_the_text_must_hold_exactly_one_mapping_document(text: str, expected: list[tuple[str, str]]) -> None:
    assert issues_of(text) == expected


def test_an_explicit_document_with_end_marker_is_one_document() -> None:
    assert load_task_manifest("---\n" + MINIMAL + "...\n").id == "kernel-0001"


@pytest.mark.parametrize(
    "text", ["id: [unclosed\n", "a: b: c\n", "id: x\n- y\n", "title: 'x\n", "\tid: x\n", "key: \x00\n"]
)
def test_syntax_errors_are_reported_at_the_yaml_path(text: str) -> None:
    issues = issues_of(text)

    assert len(issues) == 1
    assert issues[0][0] == "<yaml>"
    assert issues[0][1].startswith("invalid YAML: ")
    assert "\n" not in issues[0][1]


def test_a_nul_escape_reaches_the_allowed_paths_check() -> None:
    text = MINIMAL.replace("[packages/kernel/**]", '["packages/\\0kernel"]')

    assert issues_of(text) == [("allowed_paths.0", "must not contain NUL")]


# ------------------------------------------------------------------ size and encoding


def test_the_size_limit_counts_utf8_bytes() -> None:
    filler = "é" * ((256 * 1024 - len(MINIMAL.encode())) // 2 + 1)
    text = MINIMAL + f"# {filler}\n"
    assert len(text) < 256 * 1024 < len(text.encode())

    expected = [("<root>", "manifest exceeds 262144 bytes of UTF-8")]
    assert issues_of(text) == expected
    assert issues_of(text.encode()) == expected


def test_a_manifest_of_exactly_the_limit_loads() -> None:
    padding = 256 * 1024 - len(MINIMAL.encode()) - len("# \n")
    text = MINIMAL + "# " + "x" * padding + "\n"
    assert len(text.encode()) == 256 * 1024

    assert load_task_manifest(text).id == "kernel-0001"


def test_bytes_that_are_not_utf8_are_refused() -> None:
    issues = issues_of(MINIMAL.encode() + b"# \xff\xfe\n")

    assert len(issues) == 1
    assert issues[0][0] == "<yaml>"
    assert issues[0][1].startswith("invalid YAML: not UTF-8")
    assert issues_of(MINIMAL.encode("utf-16"))[0][0] == "<yaml>"


def test_text_with_a_lone_surrogate_is_refused() -> None:
    assert issues_of(MINIMAL + "# \ud800\n") == [("<yaml>", "invalid YAML: not UTF-8 (lone surrogate)")]


@pytest.mark.parametrize("value", [None, 1, bytearray(b"id: x"), ["id: x"]])
def test_load_refuses_anything_but_text(value: object) -> None:
    with pytest.raises(ManifestParseError) as caught:
        load_task_manifest(loose(value))
    assert caught.value.issues[0].path == "<root>"


# ------------------------------------------------------------------ depth


def test_nesting_up_to_64_levels_is_read_and_checked_by_type() -> None:
    text = MINIMAL.replace("title: Kernel events", "title: " + "[" * 63 + "]" * 63)

    assert issues_of(text) == [("title", "expected a string, got sequence")]


def test_deeper_nesting_stops_reading_quickly_without_recursion() -> None:
    depth = 100_000
    text = MINIMAL.replace("title: Kernel events", "title: " + "[" * depth + "]" * depth)

    assert issues_of(text) == [("title" + ".0" * 63, "nesting deeper than 64 levels is not allowed")]
    block = MINIMAL + "".join(" " * level + f"k{level}:\n" for level in range(80))
    assert issues_of(block)[-1][1] == "nesting deeper than 64 levels is not allowed"


def test_deeply_nested_decoded_values_are_not_walked() -> None:
    nested: list[object] = []
    for _ in range(100_000):
        nested = [nested]
    document = base()
    document["goal"] = nested

    assert issues_of(document) == [("goal", "expected a string, got sequence")]


# ------------------------------------------------------------------ properties

yaml_fragments = st.sampled_from(
    [
        "id: ",
        "title: ",
        "goal: ",
        "acceptance:",
        "allowed_paths:",
        "permissions:",
        "budget:",
        "delivery:",
        "type: ",
        "max_tool_calls: ",
        "fs.read: ",
        "allow",
        "deny",
        "- ",
        "  ",
        "\n",
        ": ",
        "[",
        "]",
        "{",
        "}",
        ",",
        "&a ",
        "*a",
        "<<: ",
        "!!str ",
        "! ",
        "? ",
        "---\n",
        "...\n",
        "'",
        '"',
        "\\",
        "#",
        "|",
        ">",
        "0b_",
        "2026-01-01",
        "yes",
        "~",
        "1",
        "%YAML 1.1\n",
        "%TAG ! tag:x,2000:\n",
        "\t",
        "é",
    ]
)


@PROPERTIES
@given(fragments=st.lists(yaml_fragments, max_size=40))
def test_arbitrary_yamlish_text_gives_a_manifest_or_a_parse_error(fragments: list[str]) -> None:
    assert_manifest_or_error(outcome("".join(fragments)))


@PROPERTIES
@given(data=st.data())
def test_mutations_of_the_example_give_a_manifest_or_a_parse_error(data: st.DataObject) -> None:
    text = EXAMPLE
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(position, min(len(text), position + 8)))
        text = text[:position] + data.draw(yaml_fragments) + text[end:]
    result = outcome(text)
    assert_manifest_or_error(result)
    if isinstance(result, TaskManifest):
        assert decode_task_manifest(yaml.safe_load(text)) == result


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)


@PROPERTIES
@given(
    overrides=st.dictionaries(
        st.sampled_from(
            ["id", "title", "goal", "acceptance", "allowed_paths", "permissions", "budget", "delivery", "x"]
        ),
        json_values,
        max_size=4,
    )
)
def test_arbitrary_decoded_documents_give_a_manifest_or_a_parse_error(overrides: dict[str, object]) -> None:
    document = base()
    document.update(overrides)
    assert_manifest_or_error(outcome(document))
