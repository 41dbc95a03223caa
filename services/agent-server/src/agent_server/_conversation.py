"""What one session holds: its state, its conversation with the kernel runtime, its pending asks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

import trio

from agent_server._turns import Outbox, RunEvents, RunOutcome
from harness_exit_gate.manifest import TaskManifest
from harness_kernel.models import ModelAdapter
from harness_kernel.policy import PermissionResolution
from harness_kernel.runtime import MinimalAgentRuntime, RunStream
from harness_sandbox import SandboxWorkspace
from harness_tools import ToolRegistry
from harness_workspace import AbortController
from harness_workspace.local import LocalWorkspace

__all__ = ["NOTE_CANCELED", "WAITING", "Conversation", "PendingPermission", "Session", "SessionState"]

SessionState = Literal["created", "running", "idle", "finished"]
WAITING: Final = frozenset({"created", "idle"})
"""The states in which a session waits for a prompt, under its idle timer."""
NOTE_CANCELED: Final = "session canceled"
"""Why asks are denied when a session or its turn is canceled, or its idle timer ran out."""


@dataclass(eq=False, slots=True)
class PendingPermission:
    """A permission request waiting for the operator's answer."""

    done: trio.Event = field(default_factory=trio.Event)
    resolution: PermissionResolution | None = None


@dataclass(eq=False, slots=True)
class Conversation:
    """The kernel side of a session, kept across its turns: one runtime, one event store, one model.

    A follow-up turn must run on the runtime that ran the turns before it, with the very same
    event store (kernel.md §8.14); the model is made once per session.
    """

    runtime: MinimalAgentRuntime
    events: RunEvents
    model: ModelAdapter
    model_name: str
    """The name the runs record: a one-shot model's own name, else the configured one."""
    turns: int = 0
    stream: RunStream | None = None
    """The running turn's stream; ``None`` between turns."""
    outcome: RunOutcome = field(default_factory=RunOutcome)
    """What the running (or last) turn's stream told so far, its run id included."""


@dataclass(eq=False, slots=True)
class Session:
    """One session of a connection."""

    id: str
    workspace: str
    model_name: str
    task_id: str | None
    manifest: TaskManifest | None
    tools: ToolRegistry
    adapter: LocalWorkspace | SandboxWorkspace | None = None
    state: SessionState = "created"
    conversation: Conversation | None = None
    abort: AbortController = field(default_factory=AbortController)
    """The running (or last) turn's abort; every turn gets a fresh one."""
    pending: dict[str, PendingPermission] = field(default_factory=dict[str, PendingPermission])
    resolved: set[str] = field(default_factory=set[str])
    persistence_failed: bool = False
    persistence_error: BaseException | None = None
    """Why persistence failed (the store's error), chained into the prompt's failure."""
    owns_row: bool = True
    """Whether this connection holds the row's lease (a continuation takes it only when it starts)."""
    closing: bool = False
    """``session/close`` or a disconnect: the session finishes when its running turn returns."""
    finished: bool = False
    done: trio.Event = field(default_factory=trio.Event)
    idle_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    lease_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    run_limit_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    run_limit_reached: bool = False
    outbox: Outbox = field(default_factory=Outbox)

    def resolve_pending(self, permission_id: str, resolution: PermissionResolution) -> None:
        """Settle one pending permission and mark its id used."""
        pending = self.pending.pop(permission_id, None)
        self.resolved.add(permission_id)
        if pending is not None:
            pending.resolution = resolution
            pending.done.set()

    def deny_pending(self, note: str) -> None:
        """Deny every pending permission with ``note``."""
        for permission_id in list(self.pending):
            self.resolve_pending(permission_id, PermissionResolution("deny", note))

    def stop(self, note: str) -> None:
        """Deny pending permissions and abort the running turn (cancel, close, disconnect)."""
        self.deny_pending(note)
        self.abort.abort(note)
