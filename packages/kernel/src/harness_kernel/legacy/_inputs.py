"""What the runtime is handed for a ``run_agent`` call (kernel.md §9): its id source, a store
that keeps nothing, the caller's controller captured once and the tools as §9 runs them."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from itertools import count
from typing import Any, Final, cast

import msgspec

from harness_kernel.events._model import Event
from harness_kernel.policy._permission import PermissionDecision, PermissionRequest
from harness_tools import PureBoundary, Tool, ToolPermissionIntent, create_bounded_tool, tool_kind
from harness_workspace import AbortController, AbortSignal

__all__ = ["Decider", "Resolver", "RunIds", "UnrecordedEvents", "captured_permission", "runnable"]

_FORWARDED: Final = frozenset({"agent", "req", "call", "perm"})
"""The prefixes of the ids §9 publishes, drawn from the caller's ``new_id``."""


class UnrecordedEvents:
    """The runtime's event store under ``run_agent``: §9's record is ``on_event``, not a store."""

    async def append(self, event: Event) -> None:
        return None

    async def read_session(self, session_id: str) -> AsyncIterator[Event]:
        return
        yield


class Decider:
    """The caller's controller, captured once (§9.5: later replacement has no effect)."""

    def __init__(self, decide: Callable[[ToolPermissionIntent], object]) -> None:
        self._decide = decide

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        # Whatever the caller's decide answers, the gate checks (and fails closed on).
        return cast(PermissionDecision, self._decide(intent))


class Resolver(Decider):
    """A controller with a resolver; §9 accepts its answer returned or awaited, and hands it
    the run's signal: the caller's, or one nothing aborts."""

    def __init__(
        self,
        decide: Callable[[ToolPermissionIntent], object],
        resolve: Callable[[PermissionRequest, AbortSignal], object],
        signal: AbortSignal,
    ) -> None:
        super().__init__(decide)
        self._resolve = resolve
        self._signal = signal

    async def resolve(self, request: PermissionRequest, signal: AbortSignal) -> object:
        # §9's request names no run or turn: the runtime's are the facade's own.
        asked = msgspec.structs.replace(request, run_id=None, turn_id=None)
        pending = self._resolve(asked, self._signal)
        return await pending if inspect.isawaitable(pending) else pending


def captured_permission(permission: object, signal: AbortSignal | None) -> Decider | None:
    if permission is None:
        return None
    decide: object = getattr(permission, "decide", None)
    if not callable(decide):
        raise TypeError("permission must have a callable decide")
    resolve: object = getattr(permission, "resolve", None)
    decide = cast("Callable[[ToolPermissionIntent], object]", decide)
    if not callable(resolve):
        return Decider(decide)
    resolve = cast("Callable[[PermissionRequest, AbortSignal], object]", resolve)
    return Resolver(decide, resolve, signal if signal is not None else AbortController().signal)


def runnable(tool: Tool[Any], controller: bool) -> Tool[Any]:
    """The tool the runtime runs for ``tool`` (§9.4): an unreviewed tool runs like a pure one,
    and a pure call without a controller is not judged, so its authorization is not asked."""
    kind = tool_kind(tool)
    if kind == "unreviewed" or (kind == "pure" and not controller and tool.authorization is not None):
        copy = msgspec.structs.replace(tool, authorization=tool.authorization if controller else None)
        return create_bounded_tool(copy, PureBoundary())
    return tool


class RunIds:
    """The runtime's id source: §9's ids from the caller's ``new_id`` while the run is live,
    every other id (run, turn, message, the runtime's own event ids) from a private count."""

    def __init__(self, new_id: Callable[[str], str]) -> None:
        self._new_id = new_id
        self._private = count(1)
        self.live = True

    def __call__(self, prefix: str) -> str:
        if self.live and prefix in _FORWARDED:
            return self._new_id(prefix)
        return f"run-agent-{prefix}-{next(self._private)}"
