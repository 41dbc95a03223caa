"""The spec's example task manifest and the builders the manifest tests share (exit-gate.md §3)."""

# The example manifest is quoted verbatim from the spec, long lines included.
# ruff: noqa: E501

from __future__ import annotations

from typing import Any

from hypothesis import settings

from harness_exit_gate.manifest import (
    ManifestParseError,
    TaskManifest,
    decode_task_manifest,
    load_task_manifest,
)

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
