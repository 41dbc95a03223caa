"""Property tests for the requests ``invoke_workspace_operation`` takes (spec §3.5-3.7).

Whatever hypothesis finds, only typed ``WorkspaceOperationError``s may escape, a malformed
request never reaches the adapter, and a well-formed one reaches it exactly once.
"""

from __future__ import annotations

from typing import cast

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from workspace_dispatch_fixtures import (
    TripwireWorkspace,
)
from workspace_dispatch_strategies import (
    COMMAND_KEYS,
    PROPERTY_SETTINGS,
    RecordingWorkspace,
    any_value,
    malformed_commands,
    malformed_requests,
    valid_requests,
)

from harness_workspace import (
    AbortSignal,
    CommandRequest,
    MemoryWorkspace,
    WorkspaceOperationError,
    WorkspaceOperationMalformedError,
    invoke_workspace_operation,
)

# ------------------------------------------------------------------ properties: requests


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(candidate=malformed_requests())
async def test_malformed_request_raises_only_a_typed_workspace_error(candidate: object) -> None:
    with pytest.raises(WorkspaceOperationError):
        await invoke_workspace_operation(MemoryWorkspace({"a": "b"}), candidate)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(candidate=malformed_requests())
async def test_malformed_request_never_reaches_the_adapter(candidate: object) -> None:
    memory = MemoryWorkspace({"a": "b"})
    with pytest.raises(WorkspaceOperationError) as with_adapter:
        await invoke_workspace_operation(memory, candidate)
    assert memory.calls == []

    tripwire = TripwireWorkspace()
    with pytest.raises(WorkspaceOperationError) as with_tripwire:
        await invoke_workspace_operation(tripwire, candidate)
    assert tripwire.touched == []

    with pytest.raises(WorkspaceOperationError) as without_workspace:
        await invoke_workspace_operation(None, candidate)

    for other in (with_tripwire.value, without_workspace.value):
        assert type(other) is type(with_adapter.value)
        assert (other.code, str(other), other.operation) == (
            with_adapter.value.code,
            str(with_adapter.value),
            with_adapter.value.operation,
        )


@PROPERTY_SETTINGS
@given(candidate=st.one_of(any_value, valid_requests(), malformed_requests()))
async def test_any_request_is_either_refused_with_a_typed_error_or_reaches_the_adapter_once(
    candidate: object,
) -> None:
    adapter = RecordingWorkspace()
    try:
        await invoke_workspace_operation(adapter, candidate)
    except WorkspaceOperationError as error:
        event(f"refused: {error.code}")
        assert adapter.calls == []
    else:
        event("accepted")
        assert len(adapter.calls) == 1


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(command=malformed_commands())
async def test_malformed_command_raises_only_a_typed_error_and_never_reaches_the_adapter(
    command: object,
) -> None:
    memory = MemoryWorkspace()
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        await invoke_workspace_operation(memory, {"operation": "execute", "command": command})
    assert caught.value.operation == "execute"
    assert memory.calls == []


def assert_received_command_matches(received: object, sent: object) -> None:
    """The adapter's command is a new ``CommandRequest`` equal to what the caller sent."""
    assert type(received) is CommandRequest
    assert received is not sent
    fields = (
        {key: getattr(sent, key) for key in COMMAND_KEYS}
        if type(sent) is CommandRequest
        else cast("dict[str, object]", sent)
    )
    assert type(received.argv) is tuple
    assert received.argv == tuple(cast("list[str]", fields["argv"]))
    assert received.cwd == fields.get("cwd")
    assert received.timeout_ms == fields.get("timeout_ms")
    sent_signal = fields.get("signal")
    if sent_signal is None:
        assert received.signal is None
        return
    assert type(sent_signal) is AbortSignal
    assert type(received.signal) is AbortSignal
    assert received.signal is not sent_signal
    assert received.signal.aborted == sent_signal.aborted
    assert received.signal.reason is sent_signal.reason


@PROPERTY_SETTINGS
@given(candidate=valid_requests())
async def test_well_formed_request_reaches_the_adapter_exactly_once_with_equal_arguments(
    candidate: dict[str, object],
) -> None:
    adapter = RecordingWorkspace()
    await invoke_workspace_operation(adapter, candidate)
    assert len(adapter.calls) == 1
    operation, arguments = adapter.calls[0]
    assert operation == candidate["operation"]
    if operation in ("read_file", "list_files"):
        assert arguments == (candidate["path"],)
        assert arguments[0] is candidate["path"]
    elif operation == "write_file":
        assert arguments == (candidate["path"], candidate["contents"])
        assert arguments[0] is candidate["path"]
        assert arguments[1] is candidate["contents"]
    elif operation == "execute":
        assert len(arguments) == 1
        assert_received_command_matches(arguments[0], candidate["command"])
    else:
        assert arguments == ()
