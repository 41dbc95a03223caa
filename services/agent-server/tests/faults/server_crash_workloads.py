"""The agent-server workload the zygote forks: a real server on 127.0.0.1, killed mid-prompt.

The grandchild serves with a ``SqliteSessionStore`` on the trial's file, a tool provider
offering the pure ``mark`` tool (its effect appends the call id to the marker file) and a
FakeModel that calls it ``rounds * calls`` times, then reports ``port=N`` and serves
until it is killed. ``params["self_kill"]`` makes it SIGKILL itself at the N-th append (before
or after the commit) or effect (before or after the write).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

import trio
from faults.crash_harness import mark_tool
from faults.kernel_crash_workloads import Report, SelfKill, scripted_turns

from agent_server import (
    LimitsConfig,
    ModelConfig,
    NetworkConfig,
    ServerConfig,
    ServerHandle,
    StorageConfig,
    ToolProviderContext,
    WorkspaceConfig,
    serve,
)
from harness_kernel.events import Event
from harness_kernel.models import FakeModel
from harness_kernel.store import SequencedEvent, SqliteSessionStore
from harness_tools import Tool

__all__ = ["WORKLOADS"]

MODEL: Final = "fake-model/v1"


class _KillableStore(SqliteSessionStore):
    """The real store, with self-kill points around every append."""

    def __init__(self, path: str, kill: SelfKill) -> None:
        super().__init__(path)
        self._kill = kill

    async def append(self, session_id: str, event: Event, *, owner_id: str | None = None) -> SequencedEvent:
        self._kill.passing("before-append")
        stored = await super().append(session_id, event, owner_id=owner_id)
        self._kill.passing("after-append")
        return stored

    async def append_many(
        self, session_id: str, events: Sequence[Event], *, owner_id: str | None = None
    ) -> tuple[SequencedEvent, ...]:
        self._kill.passing("before-append")
        stored = await super().append_many(session_id, events, owner_id=owner_id)
        self._kill.passing("after-append")
        return stored


async def _server_main(params: dict[str, Any], report: Report) -> None:
    kill = SelfKill(params.get("self_kill"), report)
    tool = mark_tool(params["marker"], kill.passing)
    turns = scripted_turns(params["rounds"], params["calls"])

    def tools(context: ToolProviderContext) -> Iterable[Tool[Any]]:
        return [tool]

    def model() -> FakeModel:
        return FakeModel(turns)

    store = _KillableStore(params["db"], kill)
    config = ServerConfig(
        network=NetworkConfig(port=0),
        storage=StorageConfig(session_store=store),
        model=ModelConfig(models={MODEL: model}),
        workspace=WorkspaceConfig(workspace_root=params["root"], tools=tools),
        limits=LimitsConfig(session_lease_ms=1000),
    )
    async with store, trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve, config)
        report(port=handle.port, token=handle.token)
        await trio.sleep_forever()


def _server(params: dict[str, Any], report: Report) -> None:
    trio.run(_server_main, params, report)


WORKLOADS: Final = {"server": _server}
