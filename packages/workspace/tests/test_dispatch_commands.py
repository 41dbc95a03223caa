"""Requests crossing ``invoke_workspace_operation``: the ``execute`` command (spec §3.7).

Its container, its fields in contract order, and the fresh copy the adapter receives.
"""

from __future__ import annotations

import collections
import pathlib
import types
from collections.abc import Callable

import pytest
import trio
from workspace_dispatch_fixtures import (
    MAX_SAFE_INTEGER,
    ClassForgingSignal,
    CommandRequestSubclass,
    CommandShape,
    DictSubclass,
    HostileKey,
    IntSubclass,
    ListSubclass,
    LookalikeSignal,
    Number,
    ProgramAndArgument,
    StrSubclass,
    assert_malformed,
    build_command_request,
    command_in_form,
    executed_command,
    half_built_signal,
)

from harness_workspace import (
    AbortController,
    AbortSignal,
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    invoke_workspace_operation,
)

# ------------------------------------------------------------------ §3.7 execute.command: container


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(None, id="None"),
        pytest.param("ls -l", id="shell-string"),
        pytest.param(["ls", "-l"], id="bare-argv-list"),
        pytest.param(("ls",), id="bare-argv-tuple"),
        pytest.param(1, id="int"),
        pytest.param(collections.OrderedDict[str, list[str]](argv=["ls"]), id="OrderedDict"),
        pytest.param(collections.defaultdict(list, {"argv": ["ls"]}), id="defaultdict"),
        pytest.param(DictSubclass({"argv": ["ls"]}), id="dict-subclass"),
        pytest.param(types.MappingProxyType({"argv": ["ls"]}), id="MappingProxyType"),
        pytest.param(CommandShape(argv=["ls"]), id="dataclass"),
        pytest.param(CommandRequestSubclass(argv=("ls",)), id="CommandRequest-subclass"),
        pytest.param(CommandResult(exit_code=0, stdout="", stderr=""), id="other-Struct"),
        pytest.param({1: ["ls"]}, id="int-key"),
        pytest.param({"argv": ["ls"], b"cwd": "/"}, id="bytes-key"),
    ],
)
async def test_command_that_is_neither_an_exact_dict_with_string_keys_nor_a_command_request_is_malformed(
    command: object,
) -> None:
    request: object = {"operation": "execute", "command": command}
    await assert_malformed(request, "execute.command must be an object", "execute")


async def test_execute_without_a_command_is_malformed() -> None:
    request: object = {"operation": "execute"}
    await assert_malformed(request, "execute.command must be an object", "execute")


async def test_command_dict_subclass_is_rejected_without_running_its_overridden_methods() -> None:
    command = DictSubclass({"argv": ["ls"]})
    request: object = {"operation": "execute", "command": command}
    await assert_malformed(request, "execute.command must be an object", "execute")
    assert command.consulted == []


async def test_command_key_with_hostile_eq_and_hash_is_rejected_without_running_caller_code() -> None:
    key = HostileKey(collides_with="argv")
    command: dict[object, object] = {key: "x", "argv": ["ls"]}
    key.armed = True
    request: object = {"operation": "execute", "command": command}
    await assert_malformed(request, "execute.command must be an object", "execute")
    assert key.consulted == []


async def test_command_with_a_str_subclass_key_is_malformed_without_hashing_or_comparing_it() -> None:
    command: dict[object, object] = {StrSubclass("argv"): ["ls"]}
    StrSubclass.consulted.clear()
    request: object = {"operation": "execute", "command": command}
    await assert_malformed(request, "execute.command must be an object", "execute")
    assert StrSubclass.consulted == []


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("timeoutMs", id="camelCase-timeoutMs"),
        pytest.param("env", id="env"),
        pytest.param("shell", id="shell"),
        pytest.param("operation", id="operation"),
    ],
)
async def test_command_with_an_unexpected_key_is_malformed(key: str) -> None:
    request: object = {"operation": "execute", "command": {"argv": ["ls"], key: 5}}
    await assert_malformed(request, f"execute.command contains unexpected property {key!r}", "execute")


async def test_command_key_present_with_none_still_counts_as_unexpected() -> None:
    request: object = {"operation": "execute", "command": {"argv": ["ls"], "env": None}}
    await assert_malformed(request, "execute.command contains unexpected property 'env'", "execute")


async def test_command_unexpected_key_is_reported_before_its_field_checks() -> None:
    request: object = {"operation": "execute", "command": {"argv": [], "cwd": "", "stdin": ""}}
    await assert_malformed(request, "execute.command contains unexpected property 'stdin'", "execute")


# ------------------------------------------------------------------ §3.7 execute.command: fields

COMMAND_FORMS = [pytest.param("dict", id="dict-form"), pytest.param("struct", id="CommandRequest-form")]

ARGV_MUST_BE_AN_ARRAY = "execute.command.argv must be an array"
ARGV_LENGTH = "execute.command.argv length must be between 0 and 100000"
ARGV_NEEDS_A_PROGRAM = "execute.command.argv must contain a program"
ARGV_PROGRAM = "execute.command.argv[0] must be a nonempty program string"


async def test_command_dict_without_argv_is_malformed() -> None:
    request: object = {"operation": "execute", "command": {"cwd": "/"}}
    await assert_malformed(request, ARGV_MUST_BE_AN_ARRAY, "execute")


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(None, ARGV_MUST_BE_AN_ARRAY, id="None"),
        pytest.param("ls", ARGV_MUST_BE_AN_ARRAY, id="str"),
        pytest.param(b"ls", ARGV_MUST_BE_AN_ARRAY, id="bytes"),
        pytest.param({"ls"}, ARGV_MUST_BE_AN_ARRAY, id="set"),
        pytest.param({"0": "ls"}, ARGV_MUST_BE_AN_ARRAY, id="dict"),
        pytest.param(ListSubclass(["ls"]), ARGV_MUST_BE_AN_ARRAY, id="list-subclass"),
        pytest.param(ProgramAndArgument("ls", "-l"), ARGV_MUST_BE_AN_ARRAY, id="namedtuple"),
        pytest.param(["ls"] * 100_001, ARGV_LENGTH, id="100001-items"),
        pytest.param([], ARGV_NEEDS_A_PROGRAM, id="empty-list"),
        pytest.param((), ARGV_NEEDS_A_PROGRAM, id="empty-tuple"),
        pytest.param([""], ARGV_PROGRAM, id="empty-program"),
        pytest.param([1], ARGV_PROGRAM, id="int-program"),
        pytest.param([None, "x"], ARGV_PROGRAM, id="None-program"),
        pytest.param([b"ls"], ARGV_PROGRAM, id="bytes-program"),
        pytest.param([["ls"]], ARGV_PROGRAM, id="nested-list-program"),
        pytest.param([StrSubclass("ls")], ARGV_PROGRAM, id="str-subclass-program"),
        pytest.param([1, 2], ARGV_PROGRAM, id="program-checked-before-arguments"),
        pytest.param(["ls", 1], "execute.command.argv[1] must be a string", id="int-argument"),
        pytest.param(["ls", "-l", None], "execute.command.argv[2] must be a string", id="None-argument"),
        pytest.param(["ls", b"x"], "execute.command.argv[1] must be a string", id="bytes-argument"),
        pytest.param(["ls", StrSubclass("x")], "execute.command.argv[1] must be a string", id="str-subclass"),
        pytest.param(("ls", "a", "b", ["c"]), "execute.command.argv[3] must be a string", id="tuple-argv"),
    ],
)
async def test_invalid_argv_is_malformed(form: str, argv: object, message: str) -> None:
    request: object = {"operation": "execute", "command": command_in_form(form, {"argv": argv})}
    await assert_malformed(request, message, "execute")


async def test_list_subclass_argv_is_rejected_without_running_its_overridden_methods() -> None:
    argv = ListSubclass(["ls", "-l"])
    request: object = {"operation": "execute", "command": {"argv": argv}}
    await assert_malformed(request, ARGV_MUST_BE_AN_ARRAY, "execute")
    assert argv.consulted == []


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["ls"], ("ls",), id="program-only"),
        pytest.param(["printf", ""], ("printf", ""), id="empty-argument"),
        pytest.param(("git", "status", "--short"), ("git", "status", "--short"), id="tuple"),
        pytest.param(["ls", "-", " ", "a\x00b"], ("ls", "-", " ", "a\x00b"), id="odd-arguments"),
    ],
)
async def test_valid_argv_reaches_the_adapter_as_a_tuple(
    form: str, argv: object, expected: tuple[str, ...]
) -> None:
    received = await executed_command(command_in_form(form, {"argv": argv}))
    assert type(received.argv) is tuple
    assert received.argv == expected


@pytest.mark.parametrize("form", COMMAND_FORMS)
async def test_argv_of_exactly_100000_items_is_accepted(form: str) -> None:
    argv = ["echo"] + ["x"] * 99_999
    received = await executed_command(command_in_form(form, {"argv": argv}))
    assert len(received.argv) == 100_000


CWD_MESSAGE = "execute.command.cwd must be a nonempty string when provided"


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    "cwd",
    [
        pytest.param("", id="empty"),
        pytest.param(1, id="int"),
        pytest.param(b"/", id="bytes"),
        pytest.param(["/"], id="list"),
        pytest.param(pathlib.PurePosixPath("/"), id="PurePath"),
        pytest.param(StrSubclass("/"), id="str-subclass"),
        pytest.param(False, id="bool"),
    ],
)
async def test_invalid_cwd_is_malformed(form: str, cwd: object) -> None:
    request: object = {"operation": "execute", "command": command_in_form(form, {"argv": ["ls"], "cwd": cwd})}
    await assert_malformed(request, CWD_MESSAGE, "execute")


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    "cwd",
    [
        pytest.param(None, id="None"),
        pytest.param("/srv/checkout", id="absolute"),
        pytest.param("..", id="dot-dot"),
        pytest.param("sub dir", id="relative"),
    ],
)
async def test_valid_cwd_reaches_the_adapter(form: str, cwd: str | None) -> None:
    received = await executed_command(command_in_form(form, {"argv": ["ls"], "cwd": cwd}))
    assert received.cwd == cwd
    assert received.cwd is cwd


TIMEOUT_MESSAGE = "execute.command.timeout_ms must be a nonnegative safe integer when provided"


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    "timeout_ms",
    [
        pytest.param(-1, id="negative"),
        pytest.param(2**53, id="2**53"),
        pytest.param(10**100, id="huge"),
        pytest.param(-(2**53), id="minus-2**53"),
        pytest.param(True, id="True"),
        pytest.param(False, id="False"),
        pytest.param(5.0, id="integral-float"),
        pytest.param(0.0, id="zero-float"),
        pytest.param(0.5, id="fraction"),
        pytest.param(float("inf"), id="infinity"),
        pytest.param("5", id="str"),
        pytest.param(IntSubclass(5), id="int-subclass"),
        pytest.param(Number.FIVE, id="IntEnum"),
    ],
)
async def test_invalid_timeout_is_malformed(form: str, timeout_ms: object) -> None:
    command = command_in_form(form, {"argv": ["ls"], "timeout_ms": timeout_ms})
    request: object = {"operation": "execute", "command": command}
    await assert_malformed(request, TIMEOUT_MESSAGE, "execute")


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    "timeout_ms",
    [
        pytest.param(None, id="None"),
        pytest.param(0, id="zero"),
        pytest.param(1, id="one"),
        pytest.param(30_000, id="thirty-seconds"),
        pytest.param(MAX_SAFE_INTEGER, id="2**53-1"),
    ],
)
async def test_valid_timeout_reaches_the_adapter_unchanged(form: str, timeout_ms: int | None) -> None:
    received = await executed_command(command_in_form(form, {"argv": ["ls"], "timeout_ms": timeout_ms}))
    assert received.timeout_ms == timeout_ms
    assert type(received.timeout_ms) is type(timeout_ms)


async def test_absent_optional_fields_reach_the_adapter_as_none() -> None:
    received = await executed_command({"argv": ["ls"]})
    assert (received.cwd, received.timeout_ms, received.signal) == (None, None, None)


SIGNAL_MESSAGE = "execute.command.signal must be a genuine AbortSignal when provided"


@pytest.mark.parametrize("form", COMMAND_FORMS)
@pytest.mark.parametrize(
    "make_signal",
    [
        pytest.param(LookalikeSignal, id="look-alike"),
        pytest.param(ClassForgingSignal, id="forged-__class__"),
        pytest.param(half_built_signal, id="object.__new__(AbortSignal)"),
        pytest.param(AbortController, id="AbortController"),
        pytest.param(lambda: AbortSignal, id="the-AbortSignal-class"),
        pytest.param(trio.Event, id="trio.Event"),
        pytest.param(trio.CancelScope, id="trio.CancelScope"),
        pytest.param(lambda: True, id="bool"),
        pytest.param(lambda: "signal", id="str"),
    ],
)
async def test_signal_that_is_not_a_genuine_abort_signal_is_malformed_with_the_cause_chained(
    form: str, make_signal: Callable[[], object]
) -> None:
    command = command_in_form(form, {"argv": ["ls"], "signal": make_signal()})
    request: object = {"operation": "execute", "command": command}
    error = await assert_malformed(request, SIGNAL_MESSAGE, "execute")
    assert isinstance(error.__cause__, Exception)


def test_abort_signal_cannot_be_subclassed_so_no_subclass_instance_exists() -> None:
    with pytest.raises(TypeError):
        type("SignalSubclass", (AbortSignal,), {})


@pytest.mark.parametrize(
    ("command", "message"),
    [
        pytest.param(
            {"argv": None, "cwd": "", "timeout_ms": -1, "signal": "x"}, ARGV_MUST_BE_AN_ARRAY, id="argv-first"
        ),
        pytest.param(
            {"argv": ["ls"], "cwd": "", "timeout_ms": -1, "signal": "x"}, CWD_MESSAGE, id="then-cwd"
        ),
        pytest.param({"argv": ["ls"], "timeout_ms": True, "signal": "x"}, TIMEOUT_MESSAGE, id="then-timeout"),
        pytest.param(
            {"argv": ["ls"], "cwd": "/", "timeout_ms": 0, "signal": 1}, SIGNAL_MESSAGE, id="then-signal"
        ),
    ],
)
@pytest.mark.parametrize("form", COMMAND_FORMS)
async def test_command_fields_are_checked_in_contract_order(
    form: str, command: dict[str, object], message: str
) -> None:
    request: object = {"operation": "execute", "command": command_in_form(form, command)}
    await assert_malformed(request, message, "execute")


# ------------------------------------------------------------------ §3.7 the adapter's copy


async def test_adapter_receives_a_new_command_request_never_the_callers_struct() -> None:
    controller = AbortController()
    original = CommandRequest(argv=("make", "test"), cwd="/srv", timeout_ms=0, signal=controller.signal)
    received = await executed_command(original)
    assert received is not original
    assert (received.argv, received.cwd, received.timeout_ms) == (("make", "test"), "/srv", 0)


async def test_command_request_with_a_list_argv_reaches_the_adapter_with_a_tuple_copy() -> None:
    argv = ["make", "test"]
    received = await executed_command(build_command_request(argv=argv))
    argv.append("--evil")
    assert type(received.argv) is tuple
    assert received.argv == ("make", "test")


async def test_callers_argv_list_mutated_afterwards_does_not_change_what_the_adapter_received() -> None:
    argv = ["make", "test"]
    received = await executed_command({"argv": argv, "cwd": "/srv"})
    argv[0] = "rm"
    argv.append("-rf")
    assert type(received.argv) is tuple
    assert received.argv == ("make", "test")


async def test_callers_argv_list_mutated_while_the_adapter_runs_does_not_change_its_copy() -> None:
    argv = ["make", "test"]
    seen: list[tuple[str, ...]] = []

    def run(command: CommandRequest) -> CommandResult:
        argv[1] = "deploy"
        argv.append("--force")
        seen.append(command.argv)
        return CommandResult(exit_code=0, stdout="", stderr="")

    memory = MemoryWorkspace(commands={"make": run})
    await invoke_workspace_operation(memory, {"operation": "execute", "command": {"argv": argv}})
    assert seen == [("make", "test")]


async def test_genuine_signal_is_replaced_by_a_fresh_linked_signal_that_follows_a_later_abort() -> None:
    controller = AbortController()
    received = await executed_command({"argv": ["sleep", "10"], "signal": controller.signal})
    linked = received.signal
    assert linked is not None
    assert linked is not controller.signal
    assert type(linked) is AbortSignal
    assert (linked.aborted, linked.reason) == (False, None)

    controller.abort("stopped by the user")

    assert (linked.aborted, linked.reason) == (True, "stopped by the user")


async def test_signal_in_a_command_request_is_replaced_by_a_fresh_linked_signal() -> None:
    controller = AbortController()
    received = await executed_command(CommandRequest(argv=("sleep", "10"), signal=controller.signal))
    linked = received.signal
    assert linked is not None
    assert linked is not controller.signal
    assert type(linked) is AbortSignal
    assert not linked.aborted
    controller.abort("later")
    assert (linked.aborted, linked.reason) == (True, "later")


async def test_already_aborted_signal_is_replaced_by_a_fresh_signal_that_starts_aborted() -> None:
    reason = RuntimeError("gone")
    caller_signal = AbortSignal.aborted_with(reason)
    received = await executed_command({"argv": ["ls"], "signal": caller_signal})
    linked = received.signal
    assert linked is not None
    assert linked is not caller_signal
    assert type(linked) is AbortSignal
    assert linked.aborted
    assert linked.reason is reason


async def test_linked_signal_wakes_an_adapter_waiting_on_it_when_the_caller_aborts() -> None:
    controller = AbortController()
    received = await executed_command({"argv": ["sleep", "10"], "signal": controller.signal})
    linked = received.signal
    assert linked is not None
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(linked.wait)
            await trio.lowlevel.checkpoint()
            controller.abort("now")
    assert linked.reason == "now"


async def test_each_call_gets_its_own_linked_signal() -> None:
    controller = AbortController()
    first = await executed_command({"argv": ["ls"], "signal": controller.signal})
    second = await executed_command({"argv": ["ls"], "signal": controller.signal})
    assert first.signal is not None
    assert second.signal is not None
    assert first.signal is not second.signal


async def test_zero_timeout_is_not_wired_to_the_linked_signal() -> None:
    controller = AbortController()
    received = await executed_command({"argv": ["ls"], "timeout_ms": 0, "signal": controller.signal})
    assert received.timeout_ms == 0
    assert received.signal is not None
    await trio.sleep(0.01)
    assert not received.signal.aborted
    assert not controller.signal.aborted
