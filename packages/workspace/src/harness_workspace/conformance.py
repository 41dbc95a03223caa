"""One conformance suite for every adapter of the ``Workspace`` contract.

Each check builds a workspace through the factory an adapter's tests pass in, drives the
seven operations, and raises ``AssertionError`` (explicitly, so it checks under ``python -O``)
where the adapter departs from the contract. What differs between adapters by design is
declared in a :class:`Profile`: a test double (``MemoryWorkspace``) has no typed path errors,
runs scripted command handlers instead of programs, and needs no git tree.

Usage, in an adapter's tests::

    @pytest.mark.parametrize("check", CHECKS, ids=str)
    async def test_conforms(check: WorkspaceCheck, tmp_path: Path) -> None:
        await check.run(factory_for(tmp_path), LOCAL_PROFILE)

``factory(files)`` returns an async context manager yielding a new workspace holding
``files`` (relative path → bytes) committed as the tree's ``HEAD`` when the profile has git,
and disposing it on exit (a check may dispose it first: ``dispose`` is idempotent).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Final, TypeAlias

import trio

from harness_workspace._errors import WorkspaceOperationError
from harness_workspace._signals import AbortController
from harness_workspace._types import CommandRequest, Workspace

__all__ = [
    "CHECKS",
    "LOCAL_PROFILE",
    "MEMORY_PROFILE",
    "Profile",
    "WorkspaceCheck",
    "WorkspaceFactory",
]

WorkspaceFactory: TypeAlias = Callable[[Mapping[str, bytes]], AbstractAsyncContextManager[Workspace]]
"""Builds a workspace holding the given files; disposes it on exit."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """What an adapter is, where adapters differ by design.

    Attributes:
        typed_errors: Failures carry the ``WORKSPACE_*`` codes of ``harness_workspace.local``.
        programs: ``execute`` runs real programs (``sh``, ``echo``) with a working directory.
        git: ``diff`` and ``snapshot`` read the tree as a git work tree.
    """

    typed_errors: bool
    programs: bool
    git: bool


LOCAL_PROFILE: Final = Profile(typed_errors=True, programs=True, git=True)
"""``LocalWorkspace`` and adapters built on it (``SandboxWorkspace``)."""
MEMORY_PROFILE: Final = Profile(typed_errors=False, programs=False, git=False)
"""``MemoryWorkspace``."""

_FILES: Final[Mapping[str, bytes]] = {
    "README.md": b"hello\n",
    "src/app.py": b"print(1)\n",
    "src/pkg/mod.py": b"x = 1\n",
    "bad.bin": b"\xff\xfe not utf-8",
}


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


async def _expect_code(profile: Profile, code: str, call: Awaitable[object], what: str) -> None:
    """``call`` must fail; with typed errors, with ``code``."""
    try:
        result = await call
    except WorkspaceOperationError as error:
        if profile.typed_errors and getattr(error, "code", None) != code:
            raise AssertionError(f"{what}: expected {code}, got {error.code}: {error}") from error
        return
    except (OSError, ValueError) as error:
        if profile.typed_errors:
            raise AssertionError(f"{what}: expected {code}, got untyped {error!r}") from error
        return
    raise AssertionError(f"{what}: expected a failure ({code}), got {result!r}")


async def _files(factory: WorkspaceFactory, profile: Profile) -> None:
    async with factory(_FILES) as workspace:
        _expect(await workspace.read_file("README.md") == "hello\n", "read an initial file")
        await workspace.write_file("src/app.py", "print(2)\n")
        _expect(await workspace.read_file("src/app.py") == "print(2)\n", "read back a replaced file")
        await workspace.write_file("notes.txt", "é ✓\n")
        _expect(await workspace.read_file("notes.txt") == "é ✓\n", "read back a new file (UTF-8)")
        listed = await workspace.list_files("src")
        _expect(listed == sorted(listed), f"list_files is sorted: {listed}")
        _expect(set(listed) == {"src/app.py", "src/pkg/mod.py"}, f"list_files('src'): {listed}")
        everything = await workspace.list_files("")
        _expect({"README.md", "notes.txt", "src/app.py"} <= set(everything), f"list_files(''): {everything}")


async def _file_refusals(factory: WorkspaceFactory, profile: Profile) -> None:
    async with factory(_FILES) as workspace:
        await _expect_code(
            profile, "WORKSPACE_NOT_FOUND", workspace.read_file("missing.txt"), "a missing file"
        )
        await _expect_code(profile, "WORKSPACE_INVALID_UTF8", workspace.read_file("bad.bin"), "invalid UTF-8")
        if not profile.typed_errors:
            return
        await _expect_code(
            profile, "WORKSPACE_PATH_ESCAPES_ROOT", workspace.read_file("../x"), "a path above the root"
        )
        await _expect_code(
            profile, "WORKSPACE_PATH_INVALID", workspace.read_file("/etc/passwd"), "an absolute path"
        )
        await _expect_code(profile, "WORKSPACE_PATH_INVALID", workspace.read_file(""), "an empty path")
        await _expect_code(profile, "WORKSPACE_NOT_A_FILE", workspace.read_file("src"), "a directory")
        await _expect_code(
            profile,
            "WORKSPACE_PATH_ESCAPES_ROOT",
            workspace.write_file("../escape.txt", "x"),
            "a write above",
        )
        await _expect_code(
            profile, "WORKSPACE_NOT_FOUND", workspace.list_files("nope"), "listing a missing dir"
        )
        _expect(await workspace.read_file("README.md") == "hello\n", "refusals changed nothing")


async def _commands(factory: WorkspaceFactory, profile: Profile) -> None:
    if not profile.programs:
        return
    async with factory(_FILES) as workspace:
        echoed = await workspace.execute(CommandRequest(argv=("echo", "a b", "'c'")))
        _expect(
            (echoed.exit_code, echoed.stdout, echoed.timed_out) == (0, "a b 'c'\n", False), f"echo: {echoed}"
        )
        failed = await workspace.execute(CommandRequest(argv=("sh", "-c", "echo err >&2; exit 3")))
        _expect((failed.exit_code, failed.stderr) == (3, "err\n"), f"exit code and stderr: {failed}")
        here = await workspace.execute(CommandRequest(argv=("sh", "-c", "cat mod.py"), cwd="src/pkg"))
        _expect(here.stdout == "x = 1\n", f"cwd: {here}")
        wrote = await workspace.execute(CommandRequest(argv=("sh", "-c", "echo made > made.txt")))
        _expect(wrote.exit_code == 0, f"a command writes: {wrote}")
        _expect(
            await workspace.read_file("made.txt") == "made\n", "a command's file is read on the host side"
        )
        slow = await workspace.execute(CommandRequest(argv=("sleep", "30"), timeout_ms=300))
        _expect((slow.exit_code, slow.timed_out) == (None, True), f"a timeout: {slow}")


async def _command_refusals(factory: WorkspaceFactory, profile: Profile) -> None:
    if not profile.programs:
        return
    async with factory(_FILES) as workspace:
        await _expect_code(
            profile,
            "WORKSPACE_COMMAND_NOT_FOUND",
            workspace.execute(CommandRequest(argv=("no-such-program-xyz",))),
            "a missing program",
        )
        await _expect_code(
            profile,
            "WORKSPACE_PATH_ESCAPES_ROOT",
            workspace.execute(CommandRequest(argv=("true",), cwd="..")),
            "a cwd above the root",
        )
        await _expect_code(
            profile,
            "WORKSPACE_NOT_A_DIRECTORY",
            workspace.execute(CommandRequest(argv=("true",), cwd="README.md")),
            "a file as cwd",
        )
        await _expect_code(
            profile,
            "WORKSPACE_TIMEOUT_TOO_LARGE",
            workspace.execute(CommandRequest(argv=("true",), timeout_ms=10**9)),
            "a budget over the maximum",
        )
        controller = AbortController()
        controller.abort("stop")
        await _expect_code(
            profile,
            "WORKSPACE_COMMAND_ABORTED",
            workspace.execute(CommandRequest(argv=("true",), signal=controller.signal)),
            "an aborted signal",
        )


async def _planted_files(factory: WorkspaceFactory, profile: Profile) -> None:
    """What a command plants (a link out, a FIFO) never leads a file operation off the tree."""
    if not profile.programs:
        return
    async with factory(_FILES) as workspace:
        planted = await workspace.execute(
            CommandRequest(
                argv=("sh", "-c", "ln -s /etc/passwd planted && ln -s README.md inner && mkfifo fifo")
            )
        )
        _expect(planted.exit_code == 0, f"planting: {planted}")
        escapes = ("WORKSPACE_PATH_ESCAPES_ROOT", "WORKSPACE_SYMLINK_REFUSED")
        await _expect_code_in(profile, escapes, workspace.read_file("planted"), "reading a planted link out")
        await _expect_code_in(
            profile, escapes, workspace.write_file("planted", "x"), "writing a planted link out"
        )
        await _expect_code_in(
            profile,
            ("WORKSPACE_SYMLINK_REFUSED",),
            workspace.write_file("inner", "x"),
            "writing through a link in",
        )
        with trio.fail_after(5.0):  # reading a FIFO must not block
            await _expect_code(profile, "WORKSPACE_NOT_A_FILE", workspace.read_file("fifo"), "reading a FIFO")
        _expect(await workspace.read_file("README.md") == "hello\n", "the link's target is unchanged")


async def _expect_code_in(
    profile: Profile, codes: tuple[str, ...], call: Awaitable[object], what: str
) -> None:
    """``call`` must fail; with typed errors, with one of ``codes``."""
    try:
        result = await call
    except WorkspaceOperationError as error:
        if profile.typed_errors and getattr(error, "code", None) not in codes:
            raise AssertionError(f"{what}: expected one of {codes}, got {error.code}: {error}") from error
        return
    raise AssertionError(f"{what}: expected a failure ({' or '.join(codes)}), got {result!r}")


async def _diff_and_snapshot(factory: WorkspaceFactory, profile: Profile) -> None:
    async with factory(_FILES) as workspace:
        before = await workspace.snapshot()
        _expect(await workspace.diff() == "" or not profile.git, "no change, no diff")
        await workspace.write_file("README.md", "changed\n")
        patch = await workspace.diff()
        _expect("README.md" in patch and "+changed" in patch, f"the diff shows the change: {patch!r}")
        after = await workspace.snapshot()
        _expect(after.id != before.id, "a change gives another snapshot id")
        again = await workspace.snapshot()
        _expect(again.id == after.id, "the same state gives the same snapshot id")


async def _dispose(factory: WorkspaceFactory, profile: Profile) -> None:
    async with factory(_FILES) as workspace:
        await workspace.dispose()
        await workspace.dispose()
        calls: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            ("read_file", lambda: workspace.read_file("README.md")),
            ("write_file", lambda: workspace.write_file("x", "y")),
            ("list_files", lambda: workspace.list_files("")),
            ("execute", lambda: workspace.execute(CommandRequest(argv=("true",)))),
            ("diff", workspace.diff),
            ("snapshot", workspace.snapshot),
        ]
        for name, call in calls:
            try:
                await call()
            except WorkspaceOperationError as error:
                code = getattr(error, "code", None)
                _expect(
                    not profile.typed_errors or code == "WORKSPACE_DISPOSED", f"{name} after dispose: {code}"
                )
            else:
                raise AssertionError(f"{name} after dispose succeeded")


@dataclass(frozen=True, slots=True)
class WorkspaceCheck:
    """One check: its name, what it pins, and ``run(factory, profile)``."""

    name: str
    description: str
    run: Callable[[WorkspaceFactory, Profile], Awaitable[None]]

    def __str__(self) -> str:
        """The check's name (a readable test id)."""
        return self.name


CHECKS: Final[tuple[WorkspaceCheck, ...]] = (
    WorkspaceCheck("files", "read, replace, create (UTF-8) and list files", _files),
    WorkspaceCheck(
        "file_refusals", "missing, invalid UTF-8, escaping, absolute, empty, directory paths", _file_refusals
    ),
    WorkspaceCheck(
        "commands", "argv unchanged, exit codes, stderr, cwd, files seen by the host, timeouts", _commands
    ),
    WorkspaceCheck(
        "command_refusals", "missing program, bad cwd, budget over the maximum, abort", _command_refusals
    ),
    WorkspaceCheck(
        "planted_files",
        "a planted link (out or in) and a FIFO never lead a file operation off the tree",
        _planted_files,
    ),
    WorkspaceCheck(
        "diff_and_snapshot", "a change shows in the diff and changes the snapshot id", _diff_and_snapshot
    ),
    WorkspaceCheck("dispose", "dispose is idempotent; every operation afterwards fails", _dispose),
)
"""Every check, in a stable order."""
