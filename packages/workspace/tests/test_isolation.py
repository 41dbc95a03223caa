"""Isolation attestation: who is declared, what carries it, and what cannot forge or relabel it."""

from __future__ import annotations

import copy
import gc
from pathlib import Path

import pytest

from harness_workspace import (
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    _isolation,
    bind_workspace,
    declare_isolation,
    isolation_of,
    restrict_workspace,
)
from harness_workspace.local import LocalWorkspace


class _Adapter(MemoryWorkspace):
    """A subclass: it may add host effects, so it is not vouched for by MemoryWorkspace."""


class _Slotted:
    __slots__ = ()


def test_memory_workspace_declares_itself_in_memory() -> None:
    assert isolation_of(MemoryWorkspace()) == "in-memory"
    assert isolation_of(MemoryWorkspace({"a.txt": "x"}, commands={})) == "in-memory"


async def test_a_memory_workspace_with_command_handlers_vouches_for_nothing(tmp_path: Path) -> None:
    # A handler can run anything anywhere: here, on a host workspace it was handed.
    host = LocalWorkspace(tmp_path)

    async def delegate(command: CommandRequest) -> CommandResult:
        return await host.execute(command)

    forged = MemoryWorkspace(commands={"sh": delegate})

    assert isolation_of(forged) is None
    # Its host, vouching for the handlers, declares it; nobody relabels it afterwards.
    assert isolation_of(declare_isolation(forged, "in-memory")) == "in-memory"
    with pytest.raises(ValueError, match="already declared in-memory"):
        declare_isolation(forged, "unsafe-host")


def test_a_subclass_of_memory_workspace_is_not_vouched_for() -> None:
    assert isolation_of(_Adapter()) is None


def test_a_local_workspace_is_never_declared_by_itself(tmp_path: Path) -> None:
    assert isolation_of(LocalWorkspace(tmp_path)) is None


def test_declaring_returns_the_same_object_and_records_it(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path)
    assert declare_isolation(workspace, "unsafe-host") is workspace
    assert isolation_of(workspace) == "unsafe-host"
    assert declare_isolation(workspace, "unsafe-host") is workspace  # again: unchanged


def test_a_declared_workspace_cannot_be_relabelled() -> None:
    workspace = MemoryWorkspace()
    with pytest.raises(ValueError, match="already declared in-memory, not sandboxed"):
        declare_isolation(workspace, "sandboxed")
    assert isolation_of(workspace) == "in-memory"


@pytest.mark.parametrize("level", ["isolated", "SANDBOXED", "", None, 1])
def test_an_unknown_isolation_is_refused_and_records_nothing(tmp_path: Path, level: object) -> None:
    workspace = LocalWorkspace(tmp_path)
    with pytest.raises(ValueError, match="workspace isolation must be one of"):
        declare_isolation(workspace, level)  # type: ignore[arg-type]
    assert isolation_of(workspace) is None


@pytest.mark.parametrize("value", [None, "ws", b"ws", 3, (), [], {}])
def test_data_cannot_be_declared(value: object) -> None:
    with pytest.raises(TypeError, match="only a workspace object"):
        declare_isolation(value, "sandboxed")
    assert isolation_of(value) is None


def test_an_object_without_weak_references_is_refused() -> None:
    slotted = _Slotted()
    with pytest.raises(TypeError, match="does not support weak references"):
        declare_isolation(slotted, "sandboxed")
    assert isolation_of(slotted) is None


def test_copies_and_look_alikes_are_undeclared() -> None:
    workspace = MemoryWorkspace({"a.txt": "x"})
    assert isolation_of(copy.copy(workspace)) is None
    assert isolation_of(copy.deepcopy(workspace)) is None
    assert isolation_of(object()) is None


def test_facades_and_views_carry_the_isolation_of_what_they_wrap(tmp_path: Path) -> None:
    declared = MemoryWorkspace()
    bound = bind_workspace(declared)
    view = restrict_workspace(declared, "execute")
    assert isolation_of(bound) == "in-memory"
    assert isolation_of(view) == "in-memory"
    assert isolation_of(restrict_workspace(view, "execute")) == "in-memory"
    host = LocalWorkspace(tmp_path)
    assert isolation_of(bind_workspace(host)) is None
    assert isolation_of(restrict_workspace(host, "execute")) is None


def test_a_facade_made_before_the_declaration_stays_undeclared(tmp_path: Path) -> None:
    host = LocalWorkspace(tmp_path)
    early = bind_workspace(host)
    declare_isolation(host, "unsafe-host")
    assert isolation_of(early) is None
    assert isolation_of(bind_workspace(host)) == "unsafe-host"


def test_the_record_keeps_nothing_alive_and_a_reused_id_starts_undeclared(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path)
    declare_isolation(workspace, "unsafe-host")
    old_id = id(workspace)
    del workspace
    gc.collect()
    assert old_id not in _isolation._DECLARED  # pyright: ignore[reportPrivateUsage]
    # Whatever object now has the old id (CPython reuses freed ids), it was never declared.
    fresh = [LocalWorkspace(tmp_path) for _ in range(64)]
    assert all(isolation_of(candidate) is None for candidate in fresh)
