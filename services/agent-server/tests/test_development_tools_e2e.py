"""Issue #18 end to end: a scripted model fixes a real failing pytest test through agent-server.

A real temporary git repository, a real ``python3 -m pytest`` run by ``process.exec``: on a
``LocalWorkspace`` with the operator's ``--allow-host-effects``, and on a ``SandboxWorkspace``
with each engine without any opt-in. The script: ``fs.list`` → ``fs.read`` → ``process.exec``
(the test fails) → ``fs.write`` (the fix) → ``process.exec`` (it passes) → ``git.diff``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio
from sandbox_helpers import cached_default_image, engine_unavailable_reason, git_repository

from agent_server import ServerConfig
from agent_server._catalogue import catalogue_provider
from agent_server._cli import _parser as parser  # pyright: ignore[reportPrivateUsage]
from agent_server._cli import build_config
from agent_server.client import AcpClient, JsonObject
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_sandbox import BubblewrapEngine, DockerEngine, SandboxEngine

if TYPE_CHECKING:
    from conftest import ServerFactory

pytestmark = pytest.mark.slow

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
# -B and no cache provider: the run leaves nothing but the fix behind, so the diff is the fix.
PYTEST = ["python3", "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def _blob(text: str) -> str:
    """A file's abbreviated git blob id, as a diff's ``index`` line shows it."""
    data = text.encode()
    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()[:7]


EXPECTED_DIFF = (
    "diff --git a/calc.py b/calc.py\n"
    f"index {_blob(BUGGY)}..{_blob(FIXED)} 100644\n"
    "--- a/calc.py\n"
    "+++ b/calc.py\n"
    "@@ -1,2 +1,2 @@\n"
    " def add(a, b):\n"
    "-    return a - b\n"
    "+    return a + b\n"
)
REQUIRED = os.environ.get("HARNESS_REQUIRE_SANDBOX") == "1"


def _succeeds(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"HARNESS_REQUIRE_SANDBOX=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def script() -> Callable[[], FakeModel]:
    def call(index: int, name: str, arguments: dict[str, Any]) -> ScriptedTurn:
        return ScriptedTurn(tool_calls=[ToolCall(f"call-{index}", name, arguments)])

    turns = [
        call(0, "fs.list", {"path": "."}),
        call(1, "fs.read", {"path": "calc.py"}),
        call(2, "process.exec", {"argv": PYTEST, "timeoutMs": 30_000}),
        call(3, "fs.write", {"path": "calc.py", "contents": FIXED}),
        call(4, "process.exec", {"argv": PYTEST, "timeoutMs": 30_000}),
        call(5, "git.diff", {}),
        ScriptedTurn(content="Fixed add: it subtracted."),
    ]
    return lambda: FakeModel(turns)


def results(notes: list[JsonObject]) -> dict[str, list[JsonObject]]:
    by_tool: dict[str, list[JsonObject]] = {}
    for note in notes:
        event = note["params"]["event"]
        if event["type"] == "tool.result":
            by_tool.setdefault(event["data"]["tool"], []).append(event["data"])
    return by_tool


def make_repository(root: Path) -> Path:
    return git_repository(
        root / "ws",
        {"calc.py": BUGGY, "test_calc.py": TEST, ".gitignore": "__pycache__/\n.pytest_cache/\n"},
    )


async def fix_the_bug(running: ServerFactory, **options: Any) -> dict[str, list[JsonObject]]:
    options = {"models": {"fake-model/v1": script()}, "tools": catalogue_provider(["dev"]), **options}
    async with running(**options) as handle, handle.connect() as client:
        await client.initialize()
        result, notes = await prompt(client)
        assert result["status"] == "completed"
        assert result["finalText"] == "Fixed add: it subtracted."
        return results(notes)


async def prompt(client: AcpClient) -> tuple[JsonObject, list[JsonObject]]:
    session = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
    return await client.prompt(session, "make the test pass")


def check_the_run(by_tool: dict[str, list[JsonObject]]) -> None:
    assert [
        result["ok"] for name in ("fs.list", "fs.read", "fs.write", "git.diff") for result in by_tool[name]
    ] == [True] * 4
    assert {".gitignore", "calc.py", "test_calc.py"} <= set(by_tool["fs.list"][0]["output"]["entries"])
    assert by_tool["fs.read"][0]["output"]["content"] == BUGGY
    failing, passing = (result["output"] for result in by_tool["process.exec"])
    assert failing["exitCode"] == 1
    assert "1 failed" in failing["stdout"]
    assert "assert -1 == 5" in failing["stdout"]
    assert passing["exitCode"] == 0
    assert "1 passed" in passing["stdout"]
    assert by_tool["git.diff"][0]["output"] == {"diff": EXPECTED_DIFF, "truncated": False}


@pytest.fixture
def repository(running: ServerFactory) -> Path:
    workspace = running.workspace
    shutil.rmtree(workspace)
    return make_repository(workspace.parent)


async def test_on_a_host_workspace_with_the_operators_opt_in(
    running: ServerFactory, repository: Path
) -> None:
    if not await trio.to_thread.run_sync(_succeeds, "/usr/bin/python3", "-c", "import pytest"):
        _unavailable("the host's python3 has no pytest: `apt-get install python3-pytest` (CI installs it)")
    by_tool = await fix_the_bug(running, workspace_adapter="local", allow_host_effects=True)
    check_the_run(by_tool)
    # A host workspace: the fix is in the repository itself.
    assert (repository / "calc.py").read_text() == FIXED


async def _sandboxed(running: ServerFactory, repository: Path, engine: SandboxEngine) -> None:
    by_tool = await fix_the_bug(running, workspace_adapter="sandbox", sandbox_engine=engine)
    check_the_run(by_tool)
    # The sandbox worked on its copy: the source is untouched, the diff is the result.
    assert (repository / "calc.py").read_text() == BUGGY


async def test_in_a_bubblewrap_sandbox_without_any_opt_in(running: ServerFactory, repository: Path) -> None:
    engine = BubblewrapEngine()
    reason = await engine_unavailable_reason(engine)
    if reason is not None:
        _unavailable(f"bubblewrap engine unavailable: {reason}")
    if not await trio.to_thread.run_sync(_succeeds, "/usr/bin/python3", "-c", "import pytest"):
        _unavailable("the host's /usr has no pytest for bubblewrap: `apt-get install python3-pytest`")
    await _sandboxed(running, repository, engine)


async def test_in_a_docker_sandbox_without_any_opt_in(running: ServerFactory, repository: Path) -> None:
    if not await trio.to_thread.run_sync(_succeeds, "docker", "info"):
        _unavailable("docker daemon not reachable: run `dockerd > /tmp/dockerd.log 2>&1 &` (CI starts it)")
    image = await trio.to_thread.run_sync(cached_default_image)
    if image is None:
        _unavailable("default sandbox image not built: run `python3 packages/sandbox/scripts/build_image.py`")
        return
    await _sandboxed(running, repository, DockerEngine(image))


def test_effect_tools_without_isolation_are_refused_at_start_up(tmp_path: Path) -> None:
    def config(*flags: str) -> ServerConfig:
        arguments = parser().parse_args(["serve", "--no-db", "--workspace-root", str(tmp_path), *flags])
        return build_config(arguments, {})

    for flags in (("--tools", "dev"), ("--tools", "fs.write", "--workspace-adapter", "local")):
        with pytest.raises(ValueError, match=r"fs\.write .*need an isolated workspace") as refused:
            config(*flags)
        assert "--allow-host-effects" in str(refused.value)
    with pytest.raises(ValueError, match=r"process\.exec write or run commands"):
        config("--tools", "read_file,process.exec", "--workspace-adapter", "local")
    with pytest.raises(ValueError, match="--allow-host-effects is for --workspace-adapter local"):
        config("--tools", "dev", "--allow-host-effects")
    # Reads alone need no opt-in; the opt-in admits the rest on a local adapter.
    assert (
        config(
            "--tools", "fs.read,fs.list,git.diff", "--workspace-adapter", "local"
        ).workspace.effects_admitted
        is False
    )
    opted_in = config("--tools", "dev", "--workspace-adapter", "local", "--allow-host-effects")
    assert opted_in.workspace.effects_admitted is True
    assert opted_in.workspace.allow_host_effects is True
