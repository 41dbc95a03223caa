"""The local workspace's process runner: real processes, bounded time and output, group kills."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from harness_workspace import AbortController, AbortSignal, CommandResult
from harness_workspace.local._errors import (
    WORKSPACE_COMMAND_ABORTED,
    WORKSPACE_COMMAND_FAILED_TO_START,
    WORKSPACE_COMMAND_NOT_FOUND,
    WORKSPACE_TIMEOUT_TOO_LARGE,
    LocalWorkspaceError,
)
from harness_workspace.local._process import SAFE_PATH, ProcessLimits, run_command, scrubbed_environment

LIMITS = ProcessLimits(default_timeout_ms=10_000, kill_grace_ms=200, max_output_bytes=64 * 1024)
FLOOD_BYTES = 50 * 1024 * 1024


@pytest.fixture
def root_fd(tmp_path: Path) -> Iterator[int]:
    descriptor = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


async def run(
    cwd_fd: int,
    *argv: str,
    timeout_ms: int | None = None,
    signal: AbortSignal | None = None,
    limits: ProcessLimits = LIMITS,
) -> CommandResult:
    return await run_command(
        cwd_fd, argv, timeout_ms=timeout_ms, signal=signal, environment=scrubbed_environment(), limits=limits
    )


async def failure(cwd_fd: int, *argv: str, timeout_ms: int | None = None) -> LocalWorkspaceError:
    with pytest.raises(LocalWorkspaceError) as caught:
        await run(cwd_fd, *argv, timeout_ms=timeout_ms)
    return caught.value


def is_gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs; an unreaped zombie (state Z) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in {"Z", "X"}


async def wait_until_gone(*pids: int) -> bool:
    """Poll for up to two seconds: a killed process disappears asynchronously."""
    for _ in range(100):
        if all(is_gone(pid) for pid in pids):
            return True
        await trio.sleep(0.02)
    return False


def read_pids(path: Path) -> list[int] | None:
    return [int(word) for word in path.read_text().split()] if path.exists() else None


async def wait_for_pids(path: Path) -> list[int]:
    """Wait until the command under test has published its pids (written, then renamed)."""
    for _ in range(1000):
        pids = read_pids(path)
        if pids is not None:
            return pids
        await trio.sleep(0.01)
    raise AssertionError("the command never published its pids")


# Starts a child that outlives nothing unless killed, and publishes "<shell pid> <child pid>".
PUBLISH_PIDS = "sleep 30 & echo $$ $! > pids.tmp && mv pids.tmp pids; wait"


def open_fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- results ------------------------------------------------------------------------


async def test_exit_code_and_both_streams_are_returned(root_fd: int) -> None:
    result = await run(root_fd, "sh", "-c", "printf out; printf err >&2; exit 7")

    assert result == CommandResult(exit_code=7, stdout="out", stderr="err", timed_out=False)


async def test_death_by_a_signal_the_adapter_did_not_send_is_a_negative_exit_code(root_fd: int) -> None:
    result = await run(root_fd, "sh", "-c", "kill -9 $$")

    assert result.exit_code == -9
    assert result.timed_out is False


async def test_invalid_utf8_output_is_replaced_not_rejected(root_fd: int) -> None:
    result = await run(root_fd, "printf", "a\\377b")

    assert result.stdout == "a\ufffdb"


async def test_arguments_are_passed_verbatim_without_a_shell(root_fd: int) -> None:
    result = await run(root_fd, "printf", "%s|", "$HOME", "*", "a b", "")

    assert result.stdout == "$HOME|*|a b||"


# -- program lookup and start failures ----------------------------------------------


async def test_missing_program_raises_command_not_found(root_fd: int) -> None:
    error = await failure(root_fd, "harness-no-such-program")

    assert error.code == WORKSPACE_COMMAND_NOT_FOUND
    assert error.operation == "execute"


async def test_program_is_looked_up_on_the_given_path_only(root_fd: int) -> None:
    with pytest.raises(LocalWorkspaceError) as caught:
        await run_command(
            root_fd,
            ("true",),
            timeout_ms=None,
            signal=None,
            environment={"PATH": "/nonexistent"},
            limits=LIMITS,
        )

    assert caught.value.code == WORKSPACE_COMMAND_NOT_FOUND


async def test_program_with_a_slash_is_relative_to_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    script = tmp_path / "sub" / "run.sh"
    script.write_text('#!/bin/sh\necho ran in "$(pwd)"\n')
    script.chmod(0o755)
    sub_fd = os.open(tmp_path / "sub", os.O_RDONLY | os.O_DIRECTORY)
    try:
        result = await run(sub_fd, "./run.sh")
    finally:
        os.close(sub_fd)

    assert result.stdout == f"ran in {tmp_path / 'sub'}\n"


async def test_file_without_execute_permission_fails_to_start(tmp_path: Path, root_fd: int) -> None:
    (tmp_path / "plain.sh").write_text("echo hi\n")

    error = await failure(root_fd, "./plain.sh")

    assert error.code == WORKSPACE_COMMAND_FAILED_TO_START


async def test_argument_with_a_nul_character_fails_to_start(root_fd: int) -> None:
    error = await failure(root_fd, "echo", "a\x00b")

    assert error.code == WORKSPACE_COMMAND_FAILED_TO_START


async def test_failures_and_kills_leave_no_descriptor_open(root_fd: int) -> None:
    before = open_fd_count()
    await failure(root_fd, "harness-no-such-program")
    await run(root_fd, "sh", "-c", "sleep 30 & echo started")
    await run(root_fd, "sleep", "30", timeout_ms=50)

    assert open_fd_count() == before


# -- working directory and environment ------------------------------------------------


async def test_working_directory_is_the_descriptor_even_after_its_path_was_renamed(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    work_fd = os.open(tmp_path / "work", os.O_RDONLY | os.O_DIRECTORY)
    try:
        (tmp_path / "work").rename(tmp_path / "moved")
        (tmp_path / "work").mkdir()  # a decoy at the old path
        result = await run(work_fd, "sh", "-c", "pwd -P; touch made-here")
    finally:
        os.close(work_fd)

    assert result.stdout == f"{tmp_path / 'moved'}\n"
    assert (tmp_path / "moved" / "made-here").exists()
    assert not (tmp_path / "work" / "made-here").exists()


async def test_environment_is_exactly_the_given_mapping(
    root_fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_TEST_SECRET", "s3cret")

    result = await run(root_fd, "env")

    assert "s3cret" not in result.stdout
    assert sorted(result.stdout.splitlines()) == ["HOME=/nonexistent", "LANG=C.UTF-8", f"PATH={SAFE_PATH}"]


def test_scrubbed_environment_is_minimal_and_takes_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_TEST_SECRET", "s3cret")

    assert scrubbed_environment() == {"PATH": SAFE_PATH, "HOME": "/nonexistent", "LANG": "C.UTF-8"}
    assert scrubbed_environment({"HOME": "/home/agent", "TOKEN": "t"}) == {
        "PATH": SAFE_PATH,
        "HOME": "/home/agent",
        "LANG": "C.UTF-8",
        "TOKEN": "t",
    }


# -- time ---------------------------------------------------------------------------


async def test_timeout_above_the_maximum_is_refused_before_anything_starts(
    tmp_path: Path, root_fd: int
) -> None:
    error = await failure(root_fd, "touch", "marker", timeout_ms=LIMITS.max_timeout_ms + 1)

    assert error.code == WORKSPACE_TIMEOUT_TOO_LARGE
    assert error.operation == "execute"
    assert not (tmp_path / "marker").exists()


async def test_zero_timeout_starts_nothing_and_reports_a_timeout(tmp_path: Path, root_fd: int) -> None:
    result = await run(root_fd, "touch", "marker", timeout_ms=0)

    assert result == CommandResult(exit_code=None, stdout="", stderr="", timed_out=True)
    assert not (tmp_path / "marker").exists()


async def test_no_timeout_means_the_default_budget(root_fd: int) -> None:
    limits = ProcessLimits(default_timeout_ms=100, kill_grace_ms=200)

    result = await run(root_fd, "sleep", "30", limits=limits)

    assert result.timed_out is True


async def test_timeout_kills_a_process_that_ignores_sigterm_and_keeps_its_output(root_fd: int) -> None:
    started = time.monotonic()
    result = await run(root_fd, "sh", "-c", "trap '' TERM; echo started; sleep 30", timeout_ms=200)

    assert result == CommandResult(exit_code=None, stdout="started\n", stderr="", timed_out=True)
    # budget 0.2 s + grace 0.2 s, with generous slack for a loaded machine
    assert time.monotonic() - started < 5


async def test_timeout_kills_forked_children_too(tmp_path: Path, root_fd: int) -> None:
    result = await run(root_fd, "sh", "-c", PUBLISH_PIDS, timeout_ms=300)

    assert result.timed_out is True
    pids = read_pids(tmp_path / "pids")
    assert pids is not None
    assert await wait_until_gone(*pids)


async def test_children_left_behind_are_killed_and_do_not_hold_the_call_open(root_fd: int) -> None:
    started = time.monotonic()
    # The background sleep inherits stdout: reading to end of file would wait 30 s.
    result = await run(root_fd, "sh", "-c", "sleep 30 & echo $!")

    assert result.exit_code == 0
    assert time.monotonic() - started < 5
    assert await wait_until_gone(int(result.stdout))


# -- output caps --------------------------------------------------------------------


async def test_stdout_beyond_the_cap_keeps_head_and_tail_with_a_notice_in_between(root_fd: int) -> None:
    started = time.monotonic()
    result = await run(root_fd, "sh", "-c", f"yes | head -c {FLOOD_BYTES}; echo done >&2")

    cap = LIMITS.max_output_bytes
    half = "y\n" * (cap // 4)
    assert result.exit_code == 0
    notice = f"\n[stdout truncated: {FLOOD_BYTES - cap} bytes in the middle were discarded]\n"
    assert result.stdout == half + notice + half
    assert result.stderr == "done\n"
    assert time.monotonic() - started < 10


async def test_stderr_is_capped_independently_of_stdout(root_fd: int) -> None:
    result = await run(root_fd, "sh", "-c", f"yes | head -c {FLOOD_BYTES} >&2; echo done")

    half = "y\n" * (LIMITS.max_output_bytes // 4)
    assert result.stdout == "done\n"
    assert result.stderr.startswith(half + "\n[stderr truncated: ")
    assert result.stderr.endswith("discarded]\n" + half)


async def test_an_endless_flood_is_bounded_by_the_timeout(root_fd: int) -> None:
    started = time.monotonic()
    result = await run(root_fd, "yes", timeout_ms=300)

    assert result.timed_out is True
    assert len(result.stdout) < LIMITS.max_output_bytes + 200
    assert time.monotonic() - started < 5


async def test_a_character_cut_by_the_cap_is_dropped_not_replaced(root_fd: int) -> None:
    result = await run(root_fd, "printf", "a\u00e9", limits=ProcessLimits(max_output_bytes=2))

    # Head "a" and tail the second byte of "é"; the tail gives that byte up, and counts it.
    assert result.stdout == "a\n[stdout truncated: 2 bytes in the middle were discarded]\n"


def test_process_limits_refuse_negative_or_inconsistent_values() -> None:
    with pytest.raises(ValueError, match="kill_grace_ms"):
        ProcessLimits(kill_grace_ms=-1)
    with pytest.raises(ValueError, match="default_timeout_ms"):
        ProcessLimits(default_timeout_ms=10, max_timeout_ms=5)


# -- abort and cancellation -----------------------------------------------------------


async def test_abort_signal_stops_the_whole_group_and_raises(tmp_path: Path, root_fd: int) -> None:
    controller = AbortController()
    pids: list[int] = []

    async def abort_once_started() -> None:
        pids.extend(await wait_for_pids(tmp_path / "pids"))
        controller.abort("enough")

    caught: LocalWorkspaceError | None = None
    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_once_started)
        try:
            await run(root_fd, "sh", "-c", PUBLISH_PIDS, signal=controller.signal)
        except LocalWorkspaceError as error:
            caught = error

    assert caught is not None
    assert caught.code == WORKSPACE_COMMAND_ABORTED
    assert "enough" in caught.message
    assert time.monotonic() - started < 5
    assert await wait_until_gone(*pids)


async def test_already_aborted_signal_starts_nothing(tmp_path: Path, root_fd: int) -> None:
    with pytest.raises(LocalWorkspaceError) as caught:
        await run(root_fd, "touch", "marker", signal=AbortSignal.aborted_with("early"))

    assert caught.value.code == WORKSPACE_COMMAND_ABORTED
    assert not (tmp_path / "marker").exists()


async def test_cancelling_the_caller_kills_the_group_and_propagates(tmp_path: Path, root_fd: int) -> None:
    pids: list[int] = []
    finished = False

    async def cancel_once_started(scope: trio.CancelScope) -> None:
        pids.extend(await wait_for_pids(tmp_path / "pids"))
        scope.cancel()

    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as scope:
            nursery.start_soon(cancel_once_started, scope)
            await run(root_fd, "sh", "-c", PUBLISH_PIDS)
            finished = True

    assert scope.cancelled_caught
    assert not finished
    assert await wait_until_gone(*pids)
