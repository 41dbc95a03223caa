"""Cancellation signals: ``AbortController``, ``AbortSignal`` and ``move_on_abort`` (spec §3.8)."""

from __future__ import annotations

import contextlib
import gc
import weakref
from typing import cast

import pytest
import trio
import trio.testing

from harness_workspace import (
    AbortController,
    AbortSignal,
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    invoke_workspace_operation,
    move_on_abort,
)

# Generous upper bound that only stops a broken implementation from hanging the suite.
HANG_GUARD_SECONDS = 10

# ------------------------------------------------------------------ helpers


def half_built_signal() -> AbortSignal:
    """An instance of the exact class that no factory initialised."""
    return object.__new__(AbortSignal)


class LookAlikeSignal:
    """Quacks like a signal, but is not one."""

    aborted = False
    reason: object = None

    async def wait(self) -> None:
        await trio.sleep_forever()


NON_GENUINE_SIGNALS = [
    pytest.param(None, id="None"),
    pytest.param(object(), id="object"),
    pytest.param("aborted", id="str"),
    pytest.param(LookAlikeSignal(), id="look-alike"),
    pytest.param(AbortController(), id="controller"),
    pytest.param(trio.CancelScope(), id="cancel-scope"),
    pytest.param(trio.Event(), id="trio-event"),
]


def enter_move_on_abort(signal: object) -> None:
    """Construct and enter ``move_on_abort`` with ``signal``, doing nothing inside."""
    with move_on_abort(cast(AbortSignal, signal)):
        pass


# ------------------------------------------------------------------ controller and signal state


def test_a_controller_always_returns_the_same_signal() -> None:
    controller = AbortController()
    assert controller.signal is controller.signal
    assert type(controller.signal) is AbortSignal


def test_each_controller_has_its_own_signal() -> None:
    assert AbortController().signal is not AbortController().signal


def test_a_new_signal_is_not_aborted_and_has_no_reason() -> None:
    signal = AbortController().signal
    assert signal.aborted is False
    assert signal.reason is None


def test_abort_sets_aborted_and_stores_the_reason() -> None:
    controller = AbortController()
    reason = ValueError("stopped by the user")
    controller.abort(reason)
    assert controller.signal.aborted is True
    assert controller.signal.reason is reason


def test_abort_without_a_reason_aborts_with_reason_none() -> None:
    controller = AbortController()
    controller.abort()
    assert controller.signal.aborted is True
    assert controller.signal.reason is None


def test_the_first_abort_wins_and_later_calls_do_nothing() -> None:
    controller = AbortController()
    controller.abort("first")
    controller.abort("second")
    controller.abort()
    assert controller.signal.aborted is True
    assert controller.signal.reason == "first"


def test_a_controller_keeps_its_signal_even_if_someone_tries_to_replace_it() -> None:
    controller = AbortController()
    original = controller.signal
    with contextlib.suppress(AttributeError):
        setattr(controller, "signal", AbortController().signal)  # noqa: B010  # a dynamic write on purpose
    assert controller.signal is original


@pytest.mark.parametrize("name", ["aborted", "reason", "_aborted", "_reason", "extra"])
def test_a_signal_refuses_attribute_assignment(name: str) -> None:
    signal = AbortController().signal
    with pytest.raises(AttributeError):
        setattr(signal, name, True)
    assert signal.aborted is False
    assert signal.reason is None


@pytest.mark.parametrize("name", ["aborted", "reason", "_aborted", "_reason"])
def test_a_signal_refuses_attribute_deletion(name: str) -> None:
    signal = AbortController().signal
    with pytest.raises(AttributeError):
        delattr(signal, name)
    assert signal.aborted is False


def test_an_aborted_signal_cannot_be_made_pending_again() -> None:
    controller = AbortController()
    controller.abort("done")
    with pytest.raises(AttributeError):
        setattr(controller.signal, "aborted", False)  # noqa: B010  # a dynamic write on purpose
    assert controller.signal.aborted is True
    assert controller.signal.reason == "done"


# ------------------------------------------------------------------ construction is closed


def test_a_signal_cannot_be_constructed_directly() -> None:
    with pytest.raises(TypeError):
        AbortSignal()


def test_a_signal_cannot_be_constructed_with_arguments() -> None:
    constructor = cast(type, AbortSignal)
    with pytest.raises(TypeError):
        constructor(aborted=True)


def test_the_signal_class_cannot_be_subclassed() -> None:
    with pytest.raises(TypeError):
        type("EternalSignal", (AbortSignal,), {})


# ------------------------------------------------------------------ wait()


async def test_wait_returns_after_the_signal_is_aborted_from_another_task() -> None:
    controller = AbortController()
    woke: list[object] = []

    async def waiter() -> None:
        await controller.signal.wait()
        woke.append(controller.signal.reason)

    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert woke == []
            controller.abort("go")
    assert woke == ["go", "go"]


async def test_wait_returns_at_once_on_an_already_aborted_signal() -> None:
    controller = AbortController()
    controller.abort("earlier")
    with trio.fail_after(HANG_GUARD_SECONDS):
        await controller.signal.wait()
    assert controller.signal.aborted


async def test_wait_does_not_return_while_the_signal_is_pending() -> None:
    signal = AbortController().signal
    returned: list[bool] = []

    async def waiter() -> None:
        await signal.wait()
        returned.append(True)

    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert returned == []
            nursery.cancel_scope.cancel()
    assert returned == []
    assert signal.aborted is False


async def test_wait_on_a_linked_signal_returns_when_its_input_aborts() -> None:
    controller = AbortController()
    linked = AbortSignal.any([controller.signal])
    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(linked.wait)
            await trio.testing.wait_all_tasks_blocked()
            controller.abort("linked")
    assert linked.reason == "linked"


# ------------------------------------------------------------------ aborted_with


def test_aborted_with_returns_an_already_aborted_signal_with_the_reason() -> None:
    reason = object()
    signal = AbortSignal.aborted_with(reason)
    assert type(signal) is AbortSignal
    assert signal.aborted is True
    assert signal.reason is reason


def test_aborted_with_defaults_the_reason_to_none() -> None:
    signal = AbortSignal.aborted_with()
    assert signal.aborted is True
    assert signal.reason is None


def test_aborted_with_returns_a_new_signal_each_time() -> None:
    assert AbortSignal.aborted_with("x") is not AbortSignal.aborted_with("x")


# ------------------------------------------------------------------ any()


def test_any_returns_a_new_pending_signal_when_no_input_is_aborted() -> None:
    first = AbortController()
    second = AbortController()
    combined = AbortSignal.any([first.signal, second.signal])
    assert type(combined) is AbortSignal
    assert combined is not first.signal
    assert combined is not second.signal
    assert combined.aborted is False
    assert combined.reason is None


def test_any_of_an_already_aborted_input_is_aborted_at_once_with_its_reason() -> None:
    pending = AbortController()
    combined = AbortSignal.any(
        [pending.signal, AbortSignal.aborted_with("first"), AbortSignal.aborted_with("second")]
    )
    assert combined.aborted is True
    assert combined.reason == "first"


def test_any_of_aborted_inputs_takes_the_reason_of_the_first_in_input_order() -> None:
    earlier = AbortController()
    later = AbortController()
    later.abort("aborted first in time")
    earlier.abort("aborted second in time")
    combined = AbortSignal.any([earlier.signal, later.signal])
    assert combined.reason == "aborted second in time"


def test_any_of_an_aborted_input_is_not_that_input() -> None:
    aborted = AbortSignal.aborted_with("x")
    combined = AbortSignal.any([aborted])
    assert combined is not aborted
    assert combined.aborted is True


def test_any_follows_the_first_input_to_abort_later() -> None:
    first = AbortController()
    second = AbortController()
    combined = AbortSignal.any([first.signal, second.signal])
    second.abort("second won")
    assert combined.aborted is True
    assert combined.reason == "second won"
    first.abort("first lost")
    assert combined.reason == "second won"


def test_any_accepts_any_iterable_of_signals() -> None:
    controller = AbortController()
    combined = AbortSignal.any(signal for signal in (controller.signal,))
    controller.abort("from a generator")
    assert combined.reason == "from a generator"


def test_combining_signals_never_aborts_an_input() -> None:
    pending = AbortController()
    combined = AbortSignal.any([pending.signal, AbortSignal.aborted_with("pre")])
    assert combined.aborted is True
    assert pending.signal.aborted is False
    assert pending.signal.reason is None


@pytest.mark.parametrize(
    "candidate", [*NON_GENUINE_SIGNALS, pytest.param(half_built_signal(), id="half-built")]
)
def test_any_rejects_a_non_genuine_input_with_type_error(candidate: object) -> None:
    genuine = AbortController().signal
    with pytest.raises(TypeError):
        AbortSignal.any([genuine, cast(AbortSignal, candidate)])


def test_any_rejects_a_non_genuine_input_even_after_an_aborted_one() -> None:
    with pytest.raises(TypeError):
        AbortSignal.any([AbortSignal.aborted_with("x"), cast(AbortSignal, LookAlikeSignal())])


def test_a_parent_does_not_keep_its_dependent_signals_alive() -> None:
    parent = AbortController()
    dependents = [weakref.ref(AbortSignal.any([parent.signal])) for _ in range(2_000)]
    gc.collect()
    assert [ref for ref in dependents if ref() is not None] == []
    assert parent.signal.aborted is False


def test_a_long_lived_signal_still_reaches_the_dependents_that_are_kept() -> None:
    parent = AbortController()
    kept = [AbortSignal.any([parent.signal]) for _ in range(100)]
    dropped = [weakref.ref(AbortSignal.any([parent.signal])) for _ in range(1_000)]
    gc.collect()
    assert all(ref() is None for ref in dropped)
    parent.abort("shutdown")
    assert all(signal.aborted and signal.reason == "shutdown" for signal in kept)


def test_a_combined_signal_follows_a_nested_combination_whose_reference_was_dropped() -> None:
    first = AbortController()
    second = AbortController()
    third = AbortController()
    combined = AbortSignal.any([AbortSignal.any([first.signal, second.signal]), third.signal])
    gc.collect()
    first.abort("inner input aborted")
    assert combined.aborted is True
    assert combined.reason == "inner input aborted"


def test_a_long_chain_of_linked_signals_aborts_without_recursion_error() -> None:
    root = AbortController()
    chain = [root.signal]
    for _ in range(10_000):
        chain.append(AbortSignal.any([chain[-1]]))
    root.abort("deep")
    assert chain[-1].aborted is True
    assert chain[-1].reason == "deep"
    assert all(signal.aborted for signal in chain)


def test_a_wide_fan_out_of_linked_signals_all_abort() -> None:
    root = AbortController()
    children = [AbortSignal.any([root.signal]) for _ in range(10_000)]
    grandchildren = [AbortSignal.any([child]) for child in children]
    root.abort("wide")
    assert all(signal.reason == "wide" for signal in grandchildren)


# ------------------------------------------------------------------ move_on_abort


async def test_move_on_abort_cancels_its_body_when_the_signal_aborts_from_another_task() -> None:
    controller = AbortController()
    finished_body = False

    async def abort_when_blocked() -> None:
        await trio.testing.wait_all_tasks_blocked()
        controller.abort("stop")

    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(abort_when_blocked)
            with move_on_abort(controller.signal) as scope:
                await trio.sleep_forever()
                finished_body = True
    assert scope.cancelled_caught
    assert not finished_body


async def test_move_on_abort_cancels_at_entry_when_the_signal_is_already_aborted() -> None:
    reached_after_checkpoint = False
    with move_on_abort(AbortSignal.aborted_with("already")) as scope:
        assert scope.cancel_called
        await trio.lowlevel.checkpoint()
        reached_after_checkpoint = True
    assert scope.cancelled_caught
    assert not reached_after_checkpoint


async def test_move_on_abort_leaves_the_body_alone_while_the_signal_stays_pending() -> None:
    controller = AbortController()
    steps = 0
    with move_on_abort(controller.signal) as scope:
        for _ in range(5):
            await trio.lowlevel.checkpoint()
            steps += 1
    assert steps == 5
    assert not scope.cancel_called
    assert not scope.cancelled_caught


async def test_move_on_abort_does_not_cancel_code_after_the_block_when_the_signal_aborts_later() -> None:
    controller = AbortController()
    with move_on_abort(controller.signal):
        await trio.lowlevel.checkpoint()
    controller.abort("too late")
    await trio.lowlevel.checkpoint()
    assert controller.signal.aborted


async def test_move_on_abort_follows_a_linked_signal() -> None:
    controller = AbortController()
    linked = AbortSignal.any([controller.signal])

    async def abort_when_blocked() -> None:
        await trio.testing.wait_all_tasks_blocked()
        controller.abort("via link")

    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(abort_when_blocked)
            with move_on_abort(linked) as scope:
                await trio.sleep_forever()
    assert scope.cancelled_caught


@pytest.mark.parametrize(
    "candidate", [*NON_GENUINE_SIGNALS, pytest.param(half_built_signal(), id="half-built")]
)
def test_move_on_abort_rejects_a_non_genuine_signal_with_type_error(candidate: object) -> None:
    with pytest.raises(TypeError):
        enter_move_on_abort(candidate)


# ------------------------------------------------------------------ through the dispatcher


async def test_abort_reaches_the_linked_signal_an_adapter_kept() -> None:
    captured: list[AbortSignal | None] = []

    def capture(command: CommandRequest) -> CommandResult:
        captured.append(command.signal)
        return CommandResult(exit_code=0, stdout="", stderr="")

    workspace = MemoryWorkspace(commands={"make": capture})
    controller = AbortController()
    await invoke_workspace_operation(
        workspace, {"operation": "execute", "command": {"argv": ["make"], "signal": controller.signal}}
    )
    [kept] = captured
    assert kept is not None
    assert kept is not controller.signal
    assert type(kept) is AbortSignal
    assert kept.aborted is False
    controller.abort("stopped by the user")
    assert kept.aborted is True
    assert kept.reason == "stopped by the user"


async def test_the_adapter_signal_starts_in_the_callers_aborted_state() -> None:
    captured: list[AbortSignal | None] = []

    def capture(command: CommandRequest) -> CommandResult:
        captured.append(command.signal)
        return CommandResult(exit_code=0, stdout="", stderr="")

    workspace = MemoryWorkspace(commands={"make": capture})
    caller_signal = AbortSignal.aborted_with("before the call")
    await invoke_workspace_operation(
        workspace, {"operation": "execute", "command": CommandRequest(argv=("make",), signal=caller_signal)}
    )
    [kept] = captured
    assert kept is not None
    assert kept is not caller_signal
    assert kept.aborted is True
    assert kept.reason == "before the call"


async def test_abort_reaches_an_adapter_signal_linked_to_an_inline_combination() -> None:
    captured: list[AbortSignal | None] = []

    def capture(command: CommandRequest) -> CommandResult:
        captured.append(command.signal)
        return CommandResult(exit_code=0, stdout="", stderr="")

    workspace = MemoryWorkspace(commands={"make": capture})
    user = AbortController()
    deadline = AbortController()
    await invoke_workspace_operation(
        workspace,
        {
            "operation": "execute",
            "command": {"argv": ["make"], "signal": AbortSignal.any([user.signal, deadline.signal])},
        },
    )
    [kept] = captured
    assert kept is not None
    gc.collect()
    user.abort("stopped by the user")
    assert kept.aborted is True
    assert kept.reason == "stopped by the user"


async def test_an_adapter_honours_the_signal_with_move_on_abort_while_the_call_is_running() -> None:
    async def long_build(command: CommandRequest) -> CommandResult:
        assert command.signal is not None
        with move_on_abort(command.signal) as scope:
            await trio.sleep_forever()
        stderr = "aborted\n" if scope.cancelled_caught else "finished\n"
        return CommandResult(exit_code=None, stdout="", stderr=stderr, timed_out=False)

    workspace = MemoryWorkspace(commands={"make": long_build})
    controller = AbortController()
    results: list[object] = []

    async def run() -> None:
        results.append(
            await invoke_workspace_operation(
                workspace,
                {"operation": "execute", "command": {"argv": ["make"], "signal": controller.signal}},
            )
        )

    with trio.fail_after(HANG_GUARD_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            assert results == []
            controller.abort("user pressed stop")
    assert results == [CommandResult(exit_code=None, stdout="", stderr="aborted\n", timed_out=False)]


async def test_the_adapter_cannot_abort_the_callers_signal() -> None:
    captured: list[AbortSignal | None] = []

    def capture(command: CommandRequest) -> CommandResult:
        captured.append(command.signal)
        return CommandResult(exit_code=0, stdout="", stderr="")

    controller = AbortController()
    await invoke_workspace_operation(
        MemoryWorkspace(commands={"make": capture}),
        {"operation": "execute", "command": {"argv": ["make"], "signal": controller.signal}},
    )
    [kept] = captured
    assert kept is not None
    with pytest.raises(AttributeError):
        setattr(kept, "aborted", True)  # noqa: B010  # a dynamic write on purpose
    assert controller.signal.aborted is False
