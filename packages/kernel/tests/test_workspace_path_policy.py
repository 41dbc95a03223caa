"""Issue #15, finding 2: the path policy judges is the path the workspace opens.

Through the real runtimes (the legacy ``run_agent``, which the agent server uses, and
``MinimalAgentRuntime``), with a task-manifest-style permission map, the real ``read_file``
tool, the scripted ``FakeModel`` and a real ``LocalWorkspace`` on a temporary folder that
holds a secret, an in-tree symlink to it, and an ordinary file.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from runtime_helpers import Ids, drain, make_input

from harness_kernel.events import Event, serialize_event
from harness_kernel.legacy import RunOptions, run_agent
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.policy import PermissionMap, RulePermissionController
from harness_kernel.runtime import MinimalAgentRuntime
from harness_kernel.store import MemoryEventStore
from harness_tools import InvalidWorkspacePathError, ToolRegistry, check_workspace_path, create_read_file_tool
from harness_workspace import MemoryWorkspace, Workspace
from harness_workspace.local import LocalWorkspace

SECRET: Final = "SECRET-KEY-MATERIAL"
ORDINARY: Final = "an ordinary file\n"
DENY_SECRETS: Final[PermissionMap] = {"fs.read": {"secrets/**": "deny", "*": "allow"}}
ALLOW_SRC_ONLY: Final[PermissionMap] = {"fs.read": {"src/**": "allow"}}
ALLOW_ALL: Final[PermissionMap] = {"fs.read": "allow"}

Runner = Callable[[Workspace, PermissionMap, str], Awaitable[list[dict[str, Any]]]]


def build_workspace(root: Path) -> Path:
    """``secrets/key`` (the secret), ``src/ok.txt``, and ``src/notes.txt`` → ``../secrets/key``."""
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "key").write_text(SECRET)
    (root / "src").mkdir()
    (root / "src" / "ok.txt").write_text(ORDINARY)
    (root / "src" / "notes.txt").symlink_to("../secrets/key")
    return root


def wire(events: list[Event] | tuple[Event, ...]) -> list[dict[str, Any]]:
    """Every event as its JSON document, exactly as it would be stored or sent."""
    return [msgspec.json.decode(serialize_event(event)) for event in events]


def script(path: str) -> list[ScriptedTurn]:
    call = ToolCall(id="model-call-1", name="read_file", arguments={"path": path})
    return [ScriptedTurn(tool_calls=[call]), ScriptedTurn(content="done")]


async def with_legacy_loop(
    workspace: Workspace, permissions: PermissionMap, path: str
) -> list[dict[str, Any]]:
    ids = Ids()
    result = await run_agent(
        RunOptions(
            goal="read it",
            model=FakeModel(script(path)),
            tools=ToolRegistry([create_read_file_tool("/workspace")]),
            session_id="sess-1",
            workspace_capability=workspace,
            permission=RulePermissionController(permissions),
            now=ids.now,
            new_id=ids.new_id,
        )
    )
    return wire(result.events)


async def with_minimal_runtime(
    workspace: Workspace, permissions: PermissionMap, path: str
) -> list[dict[str, Any]]:
    stream = MinimalAgentRuntime().run(
        make_input(
            FakeModel(script(path)),
            MemoryEventStore(),
            tools=ToolRegistry([create_read_file_tool("/workspace")]),
            workspace=workspace,
            permission=RulePermissionController(permissions),
        )
    )
    events, error = await drain(stream)
    assert error is None
    return wire(events)


RUNTIMES = [
    pytest.param(with_legacy_loop, id="run_agent"),
    pytest.param(with_minimal_runtime, id="MinimalAgentRuntime"),
]


def of_type(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [document["data"] for document in documents if document["type"] == kind]


def only(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = of_type(documents, kind)
    assert len(found) == 1, (kind, found)
    return found[0]


async def read_through(
    runtime: Runner, root: Path, permissions: PermissionMap, path: str
) -> list[dict[str, Any]]:
    workspace = LocalWorkspace(root)
    try:
        return await runtime(workspace, permissions, path)
    finally:
        await workspace.dispose()


def assert_refused_before_policy(documents: list[dict[str, Any]], path: str) -> str:
    """Check the call was refused as bad input with no policy step; return the message."""
    assert only(documents, "tool.call")["input"] == {"path": path}
    result = only(documents, "tool.result")
    assert result["ok"] is False
    assert result["error"]["code"] == "TOOL_BAD_INPUT"
    assert of_type(documents, "policy.decision") == []
    assert of_type(documents, "permission.requested") == []
    return result["error"]["message"]


# ------------------------------------------------------------------ the reported bypasses

NON_CANONICAL_SPELLINGS_OF_THE_SECRET = [
    "./secrets/key",
    "x/../secrets/key",
    "src/../secrets/key",
    "secrets//key",
    "secrets/key/",
    "secrets\\key",
    "secrets/./key",
    "/secrets/key",
]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("path", NON_CANONICAL_SPELLINGS_OF_THE_SECRET)
async def test_a_non_canonical_spelling_of_a_denied_path_is_refused_before_policy(
    tmp_path: Path, runtime: Runner, path: str
) -> None:
    root = build_workspace(tmp_path / "root")

    documents = await read_through(runtime, root, DENY_SECRETS, path)

    assert SECRET not in msgspec.json.encode(documents).decode()
    assert "is not canonical" in assert_refused_before_policy(documents, path)


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_an_in_tree_symlink_to_a_denied_file_is_judged_by_its_own_path_and_refused(
    tmp_path: Path, runtime: Runner
) -> None:
    root = build_workspace(tmp_path / "root")

    documents = await read_through(runtime, root, DENY_SECRETS, "src/notes.txt")

    assert SECRET not in msgspec.json.encode(documents).decode()
    decision = only(documents, "policy.decision")
    assert (decision["subject"], decision["effect"]) == ("src/notes.txt", "allow")
    result = only(documents, "tool.result")
    assert result["ok"] is False
    assert result["error"]["code"] == "WORKSPACE_SYMLINK_REFUSED"
    assert "'src/notes.txt' is a symlink" in result["error"]["message"]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize(
    ("path", "code"),
    [
        pytest.param("src/../secrets/key", "TOOL_BAD_INPUT", id="dot-dot"),
        pytest.param("src/notes.txt", "WORKSPACE_SYMLINK_REFUSED", id="symlink"),
    ],
)
async def test_an_allow_list_does_not_fall_to_dot_dot_or_a_symlink(
    tmp_path: Path, runtime: Runner, path: str, code: str
) -> None:
    root = build_workspace(tmp_path / "root")

    documents = await read_through(runtime, root, ALLOW_SRC_ONLY, path)

    assert SECRET not in msgspec.json.encode(documents).decode()
    assert only(documents, "tool.result")["error"]["code"] == code


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize(
    ("permissions", "path", "expected"),
    [
        pytest.param(DENY_SECRETS, "src/ok.txt", ORDINARY, id="deny-list-allows-an-ordinary-file"),
        pytest.param(ALLOW_SRC_ONLY, "src/ok.txt", ORDINARY, id="allow-list-allows-its-file"),
        pytest.param(DENY_SECRETS, "secrets/key", "TOOL_POLICY_DENIED", id="deny-list-denies-the-secret"),
        pytest.param(ALLOW_SRC_ONLY, "secrets/key", "TOOL_POLICY_DENIED", id="allow-list-denies-the-rest"),
    ],
)
async def test_controls_canonical_paths_are_read_or_denied_by_policy_as_written(
    tmp_path: Path, runtime: Runner, permissions: PermissionMap, path: str, expected: str
) -> None:
    # Without these the tests above could pass because nothing can be read at all.
    root = build_workspace(tmp_path / "root")

    documents = await read_through(runtime, root, permissions, path)

    assert only(documents, "policy.decision")["subject"] == path
    result = only(documents, "tool.result")
    if result["ok"]:
        assert result["output"] == {"path": path, "content": expected, "size": len(expected)}
    else:
        assert result["error"]["code"] == expected
        assert SECRET not in msgspec.json.encode(documents).decode()


# ------------------------------------------------------------------ the property

PIECES: Final = [
    "src",
    "secrets",
    "key",
    "ok.txt",
    "notes.txt",
    "x",
    ".",
    "..",
    "",
    "\\",
    "/",
    "\x00",
    "e\u0301",
]
DIRECTORIES: Final = ["src", "secrets", "x"]
NAMES: Final = ["key", "ok.txt", "notes.txt", "x"]
model_paths = st.one_of(
    st.sampled_from(["src/ok.txt", "secrets/key", "src/notes.txt", "src", "src/ok.txt/x", "caf\u00e9"]),
    # Canonical paths over the tree's names: every regular file and link of the tree.
    st.tuples(
        st.sampled_from(["src", "secrets", "x"]), st.sampled_from(["key", "ok.txt", "notes.txt", "x"])
    ).map("/".join),
    st.lists(st.sampled_from(PIECES[:6]), min_size=1, max_size=3).map("/".join),
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("/".join),
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("".join),
    st.text(min_size=1, max_size=20),
)
PROPERTY: Final = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def build_property_workspace(root: Path) -> Path:
    """The regression tree, plus a regular file at most "<dir>/<name>" the pieces can spell,
    a symlink to a directory and an NFC-named file, so that generated paths often read."""
    build_workspace(root)
    (root / "x").mkdir()
    for directory in ("src", "secrets", "x"):
        for name in ("key", "ok.txt", "x"):
            if not (root / directory / name).exists():
                (root / directory / name).write_text(f"{directory}/{name}\n")
    (root / "x" / "notes.txt").symlink_to("../secrets")
    (root / "caf\u00e9").write_text("NFC\n")
    return root


def judged_and_opened(documents: list[dict[str, Any]]) -> tuple[str | None, dict[str, Any]]:
    decisions = of_type(documents, "policy.decision")
    assert len(decisions) <= 1
    return (decisions[0].get("subject") if decisions else None), only(documents, "tool.result")


@pytest.mark.parametrize("runtime", RUNTIMES)
@PROPERTY
@given(path=model_paths)
def test_any_path_is_refused_before_policy_or_judged_and_opened_as_one_string(
    runtime: Runner, path: str
) -> None:
    workspace = MemoryWorkspace({"src/ok.txt": ORDINARY, path: "same string"})

    documents = trio.run(runtime, workspace, ALLOW_ALL, path)

    subject, result = judged_and_opened(documents)
    if subject is None:
        event("refused before policy")
        assert_refused_before_policy(documents, path)
        assert workspace.calls == []
        with pytest.raises(InvalidWorkspacePathError):
            check_workspace_path(path)
        return
    event("judged")
    assert subject == path
    assert workspace.calls == [("read_file", (path,))]
    assert result["output"] == {"path": path, "content": "same string", "size": len("same string")}


@pytest.mark.slow
@pytest.mark.parametrize("runtime", RUNTIMES)
@PROPERTY
@given(path=model_paths)
def test_with_local_workspace_only_the_regular_file_at_the_judged_path_is_returned(
    tmp_path_factory: pytest.TempPathFactory, runtime: Runner, path: str
) -> None:
    root = build_property_workspace(tmp_path_factory.mktemp("property") / "root")

    documents = trio.run(read_through, runtime, root, ALLOW_ALL, path)

    subject, result = judged_and_opened(documents)
    if subject is None:
        event("refused before policy")
        assert_refused_before_policy(documents, path)
        return
    assert subject == path
    if not result["ok"]:
        event(f"judged, then refused: {result['error']['code']}")
        assert SECRET not in msgspec.json.encode(documents).decode()
        return
    event("judged and read")
    # The bytes are those of the regular file at exactly the judged path, reached through
    # no symlink: reading "secrets/key" itself is the only way to the secret.
    parts = path.split("/")
    for depth in range(1, len(parts) + 1):
        assert not os.path.islink(root / posixpath.join(*parts[:depth]))
    assert stat.S_ISREG(os.lstat(root / path).st_mode)
    assert result["output"]["content"] == (root / path).read_text()
