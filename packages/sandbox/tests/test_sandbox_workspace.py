"""SandboxWorkspace's own logic (copy, host-side files, cwd checks, limits, disposal) over a host test engine.

The engines' isolation is tested in their own files; here the engine isolates nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sandbox_helpers import HostTestEngine, git_repository

from harness_sandbox import (
    SANDBOX_COPY_FAILED,
    SANDBOX_DISK_LIMIT,
    SANDBOX_ENGINE_UNAVAILABLE,
    SANDBOX_SOURCE_INVALID,
    SandboxError,
    SandboxLimits,
    SandboxWorkspace,
)
from harness_sandbox._disk import ceiling_available, unmount_ceiling
from harness_workspace import AbortController, CommandRequest
from harness_workspace.credentials import scrub_git_config
from harness_workspace.local import (
    WORKSPACE_COMMAND_ABORTED,
    WORKSPACE_COMMAND_FAILED_TO_START,
    WORKSPACE_DISPOSED,
    WORKSPACE_NOT_A_DIRECTORY,
    WORKSPACE_PATH_ESCAPES_ROOT,
    WORKSPACE_SYMLINK_REFUSED,
    WORKSPACE_TIMEOUT_TOO_LARGE,
    LocalWorkspaceError,
)

_GIT_CONFIG = """[core]
\trepositoryformatversion = 0
[remote "origin"]
\turl = https://alice:ghp_secret@example.invalid/repo.git
[credential]
\thelper = store --file=/root/creds
[http "https://example.invalid/"]
\textraHeader = Authorization: Bearer abc
[user]
\tname = t
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    repo = git_repository(
        tmp_path / "src", {"README.md": "hello\n", "pkg/app.py": "print(1)\n", "tls/ca.pem": "CA\n"}
    )
    (repo / ".env").write_text("TOKEN=x\n")
    (repo / "deploy").mkdir()
    (repo / "deploy" / "id_rsa").write_text("KEY\n")
    (repo / "server.pem").write_text("PEM\n")
    (tmp_path / "secret").write_text("host secret\n")
    os.symlink(tmp_path / "secret", repo / "leak")
    os.mkfifo(repo / "pipe")
    config = repo / ".git" / "config"
    config.write_text(config.read_text() + _GIT_CONFIG)
    return repo


async def _create(source: Path, tmp_path: Path, **options: object) -> tuple[SandboxWorkspace, HostTestEngine]:
    engine = HostTestEngine()
    parent = tmp_path / "copies"
    parent.mkdir(exist_ok=True)
    workspace = await SandboxWorkspace.create(source, engine=engine, parent=parent, **options)  # pyright: ignore[reportArgumentType]
    return workspace, engine


# The tests read the host's files directly to check the copy: small, local, and the point.
# ruff: noqa: ASYNC240


async def test_the_copy_leaves_out_credentials_special_files_and_never_follows_a_link(
    source: Path, tmp_path: Path
) -> None:
    before = sorted(p.name for p in source.rglob("*"))
    workspace, _ = await _create(source, tmp_path)
    assert sorted(workspace.skipped) == [".env", "deploy/id_rsa", "pipe", "server.pem", "tls/ca.pem"]
    copy = Path(workspace.copy_path)
    assert os.readlink(copy / "leak") == str(tmp_path / "secret")
    with pytest.raises(LocalWorkspaceError) as refused:
        await workspace.read_file("leak")
    assert refused.value.code in (WORKSPACE_PATH_ESCAPES_ROOT, WORKSPACE_SYMLINK_REFUSED)
    config = (copy / ".git" / "config").read_text()
    assert "ghp_secret" not in config
    assert "alice" not in config
    assert "helper" not in config
    assert "extraHeader" not in config
    assert "url = https://example.invalid/repo.git" in config
    assert "name = t" in config
    assert await workspace.read_file("README.md") == "hello\n"
    # The tracked denied file is missing from the copy, but the diff is not a deletion of it.
    assert "ca.pem" not in await workspace.diff()
    assert "tls/ca.pem" in await workspace._local.diff()  # pyright: ignore[reportPrivateUsage]
    await workspace.dispose()
    assert sorted(p.name for p in source.rglob("*")) == before


async def test_a_denied_name_can_refuse_the_copy_and_nothing_is_left(source: Path, tmp_path: Path) -> None:
    with pytest.raises(SandboxError) as refused:
        await _create(source, tmp_path, denied="refuse")
    assert refused.value.code == SANDBOX_COPY_FAILED
    assert list((tmp_path / "copies").iterdir()) == []


async def test_a_source_over_the_disk_limit_or_missing_is_refused(source: Path, tmp_path: Path) -> None:
    (source / "big.bin").write_bytes(b"x" * 200_000)
    with pytest.raises(SandboxError) as too_big:
        await _create(source, tmp_path, limits=SandboxLimits(disk_bytes=100_000))
    assert too_big.value.code == SANDBOX_DISK_LIMIT
    with pytest.raises(SandboxError) as missing:
        await _create(tmp_path / "nope", tmp_path)
    assert missing.value.code == SANDBOX_SOURCE_INVALID
    assert list((tmp_path / "copies").iterdir()) == []


async def test_an_engine_that_cannot_start_leaves_nothing_behind(source: Path, tmp_path: Path) -> None:
    parent = tmp_path / "copies"
    parent.mkdir()
    engine = HostTestEngine(SandboxError(SANDBOX_ENGINE_UNAVAILABLE, "docker daemon not reachable", "create"))
    with pytest.raises(SandboxError) as failed:
        await SandboxWorkspace.create(source, engine=engine, parent=parent)
    assert failed.value.code == SANDBOX_ENGINE_UNAVAILABLE
    assert list(parent.iterdir()) == []


async def test_files_change_the_copy_only_and_diff_shows_it(source: Path, tmp_path: Path) -> None:
    workspace, _ = await _create(source, tmp_path)
    await workspace.write_file("pkg/app.py", "print(2)\n")
    assert "+print(2)" in await workspace.diff()
    assert "pkg/app.py" in await workspace.list_files("")
    assert (source / "pkg" / "app.py").read_text() == "print(1)\n"
    snapshot = await workspace.snapshot()
    assert snapshot.id
    await workspace.dispose()


async def test_commands_run_in_the_checked_cwd_with_the_scrubbed_environment(
    source: Path, tmp_path: Path
) -> None:
    os.environ["HARNESS_TEST_SECRET"] = "leak"
    try:
        workspace, engine = await _create(source, tmp_path)
        result = await workspace.execute(CommandRequest(argv=("sh", "-c", "pwd; env | sort"), cwd="pkg/./"))
    finally:
        del os.environ["HARNESS_TEST_SECRET"]
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].endswith("/workspace/pkg")
    assert "HARNESS_TEST_SECRET=leak" not in lines
    assert {line.split("=")[0] for line in lines[1:]} <= {"PATH", "HOME", "LANG", "PWD", "SHLVL", "_"}
    assert engine.environments[0].commands[0].cwd == "pkg"
    for cwd, code in (("..", WORKSPACE_PATH_ESCAPES_ROOT), ("README.md", WORKSPACE_NOT_A_DIRECTORY)):
        with pytest.raises(LocalWorkspaceError) as refused:
            await workspace.execute(CommandRequest(argv=("true",), cwd=cwd))
        assert refused.value.code == code
    assert len(engine.environments[0].commands) == 1
    await workspace.dispose()


async def test_budgets_nul_and_aborts_are_judged_before_anything_runs(source: Path, tmp_path: Path) -> None:
    workspace, engine = await _create(
        source, tmp_path, limits=SandboxLimits(max_timeout_ms=1000, default_timeout_ms=500)
    )
    with pytest.raises(LocalWorkspaceError) as too_long:
        await workspace.execute(CommandRequest(argv=("true",), timeout_ms=1001))
    assert too_long.value.code == WORKSPACE_TIMEOUT_TOO_LARGE
    with pytest.raises(LocalWorkspaceError) as refused:
        await workspace.execute(CommandRequest(argv=("echo", "a\x00b")))
    assert refused.value.code == WORKSPACE_COMMAND_FAILED_TO_START
    controller = AbortController()
    controller.abort("stop")
    with pytest.raises(LocalWorkspaceError) as aborted:
        await workspace.execute(CommandRequest(argv=("true",), signal=controller.signal))
    assert aborted.value.code == WORKSPACE_COMMAND_ABORTED
    instant = await workspace.execute(CommandRequest(argv=("true",), timeout_ms=0))
    assert (instant.exit_code, instant.timed_out) == (None, True)
    assert engine.environments[0].commands == []
    slow = await workspace.execute(CommandRequest(argv=("sleep", "5")))
    assert (slow.exit_code, slow.timed_out) == (None, True)
    await workspace.dispose()


async def test_the_disk_limit_holds_for_writes_and_is_reported_after_a_command(
    source: Path, tmp_path: Path
) -> None:
    workspace, _ = await _create(source, tmp_path, limits=SandboxLimits(disk_bytes=64 * 1024))
    with pytest.raises(SandboxError) as refused:
        await workspace.write_file("big.txt", "x" * 70_000)
    assert refused.value.code == SANDBOX_DISK_LIMIT
    assert "big.txt" not in await workspace.list_files("")
    with pytest.raises(SandboxError) as filled:
        await workspace.execute(CommandRequest(argv=("sh", "-c", "head -c 100000 /dev/zero > fill; exit 3")))
    assert filled.value.code == SANDBOX_DISK_LIMIT
    assert "exit code 3" in filled.value.message
    cleaned = await workspace.execute(CommandRequest(argv=("rm", "fill")))
    assert cleaned.exit_code == 0
    await workspace.write_file("small.txt", "ok")
    # Replacing a file many times over is not counted as growth.
    for round_ in range(5):
        await workspace.write_file("replaced.txt", str(round_) * 40_000)
    await workspace.dispose()


async def test_dispose_keeps_the_final_diff_stops_once_and_deletes_the_copy(
    source: Path, tmp_path: Path
) -> None:
    workspace, engine = await _create(source, tmp_path)
    await workspace.write_file("README.md", "changed\n")
    copy = Path(workspace.copy_path)
    await workspace.dispose()
    await workspace.dispose()
    assert workspace.final_diff is not None
    assert "+changed" in workspace.final_diff
    assert engine.environments[0].stopped == 1
    assert not copy.exists()
    assert list((tmp_path / "copies").iterdir()) == []
    for call in (workspace.read_file("README.md"), workspace.execute(CommandRequest(argv=("true",)))):
        with pytest.raises(LocalWorkspaceError) as refused:
            await call
        assert refused.value.code == WORKSPACE_DISPOSED


async def test_a_retained_copy_outlives_dispose(source: Path, tmp_path: Path) -> None:
    workspace, _ = await _create(source, tmp_path, retain=True)
    await workspace.write_file("new.txt", "kept")
    await workspace.dispose()
    assert (Path(workspace.copy_path) / "new.txt").read_text() == "kept"
    if workspace.disk_ceiling:
        assert os.path.ismount(workspace.copy_path)
        unmount_ceiling(os.path.dirname(workspace.copy_path), workspace.copy_path)


@pytest.mark.skipif(
    not ceiling_available(), reason="the disk ceiling needs root, a loop device and mkfs.ext4"
)
async def test_the_disk_ceiling_stops_a_command_that_writes_without_end(source: Path, tmp_path: Path) -> None:
    limit = 1024 * 1024
    workspace, _ = await _create(source, tmp_path, limits=SandboxLimits(disk_bytes=limit))
    assert workspace.disk_ceiling
    assert os.path.ismount(workspace.copy_path)
    with pytest.raises(SandboxError) as filled:
        await workspace.execute(CommandRequest(argv=("sh", "-c", "head -c 200000000 /dev/zero > big")))
    assert filled.value.code == SANDBOX_DISK_LIMIT
    assert "exit code 1" in filled.value.message
    size = os.path.getsize(os.path.join(workspace.copy_path, "big"))
    assert limit < size < 20 * limit  # stopped by the file system, a little above the limit
    home = os.path.dirname(workspace.copy_path)
    await workspace.dispose()
    assert not os.path.exists(home)


async def test_without_the_ceiling_the_copy_is_a_plain_directory(source: Path, tmp_path: Path) -> None:
    workspace, _ = await _create(source, tmp_path, disk_ceiling=False)
    assert not workspace.disk_ceiling
    assert not os.path.ismount(workspace.copy_path)
    await workspace.dispose()


_CONFIG_LINE = st.sampled_from(
    [
        "[core]\n",
        "\tbare = false\n",
        '[remote "o"]\n',
        "\turl = https://u:p@h.invalid/r\n",
        "\turl = ssh://git@h.invalid/r\n",
        "[credential]\n",
        '[credential "https://h.invalid"]\n',
        "\thelper = store\n",
        "\tusername = bob\n",
        '[http "https://h.invalid"]\n',
        "\textraheader = Authorization: x\n",
        "\tExtraHeader = Cookie: y\n",
    ]
)


@given(st.lists(_CONFIG_LINE, max_size=20))
def test_sanitized_git_config_keeps_no_credential(lines: list[str]) -> None:
    cleaned = scrub_git_config("".join(lines))
    assert "u:p@" not in cleaned
    assert "git@" not in cleaned
    assert "[credential" not in cleaned
    assert "extraheader" not in cleaned.lower()
    after_credential = False
    kept = iter(cleaned.splitlines(keepends=True))
    for line in lines:
        if line.startswith("["):
            after_credential = line.startswith("[credential")
        if not after_credential and "extraheader" not in line.lower():
            assert next(kept).replace("://", "").rstrip() in line.replace("://", "").replace(
                "u:p@", ""
            ).replace("git@", "")
    assert scrub_git_config(cleaned) == cleaned
