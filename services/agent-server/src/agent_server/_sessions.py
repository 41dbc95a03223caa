"""Sessions of one connection: admission, runs, permissions, durable events (spec §5 to §7)."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal

import trio

from agent_server._admission import admit_tools
from agent_server._config import ServerConfig, ToolProviderContext
from agent_server._errors import (
    InvalidParamsError,
    PermissionNotFoundError,
    PermissionResolvedError,
    RunTimeLimitError,
    SandboxUnavailableError,
    ServerSessionLimitError,
    SessionAlreadyRunError,
    SessionLimitError,
    SessionNotFoundError,
    StorageFullError,
)
from agent_server._protocol import (
    CancelParams,
    CancelResult,
    NewSessionParams,
    NewSessionResult,
    PermissionRespondParams,
    PermissionRespondResult,
    PromptParams,
    PromptResult,
    PromptUsage,
    encode_notification,
)
from agent_server._turns import Outbox, RunEvents, RunOutcome, consume
from harness_kernel.events import (
    ErrorData,
    Event,
    SessionCreatedData,
    create_event,
    format_timestamp,
    redact_event,
    serialize_event,
)
from harness_kernel.manifest import TaskManifest, manifest_permissions
from harness_kernel.models import adapt_model
from harness_kernel.policy import PermissionRequest, PermissionResolution, RulePermissionController
from harness_kernel.runtime import AgentRuntimeError, MinimalAgentRuntime, RunInput, RuntimeBudget
from harness_kernel.store import SessionStore
from harness_sandbox import SANDBOX_SOURCE_INVALID, SandboxError, SandboxWorkspace
from harness_tools import Tool, ToolRegistry
from harness_workspace import (
    AbortController,
    AbortSignal,
    WorkspaceEscapesRootError,
    declare_isolation,
    open_workspace,
)
from harness_workspace.local import (
    WORKSPACE_NOT_A_DIRECTORY,
    WORKSPACE_NOT_FOUND,
    LocalWorkspace,
    LocalWorkspaceError,
)

__all__ = ["ServerState", "Session", "SessionManager"]

_log: Final = logging.getLogger("agent_server")

SessionState = Literal["created", "running", "completed", "failed", "canceled"]
_TERMINAL: Final = frozenset({"completed", "failed", "canceled"})

NOTE_CANCELED: Final = "session canceled"
NOTE_DISCONNECTED: Final = "ACP client disconnected"
NOTE_FINISHED: Final = "session finished"
NOTE_TIMED_OUT: Final = "permission request timed out"
NOTE_RUN_TIME_LIMIT: Final = "run time limit reached"
_WORKSPACE_MISSING: Final = "workspace must exist inside the configured root"
FREE_SPACE_TTL_SECONDS: Final = 0.5
"""How long one reading of the store's free disk space serves ``check_storage``."""


@dataclass(eq=False, slots=True)
class ServerState:
    """What every connection shares: configuration, root, store, session ids and session slots.

    ``live_sessions`` counts sessions from admission at ``session/new`` until they finish,
    server-wide; ``storage_directory`` is the folder of the store's file, whose free space is
    checked before a session is created or prompted.
    """

    config: ServerConfig
    root: str
    store: SessionStore
    persistent: bool = True
    storage_directory: str | None = None
    active_session_ids: set[str] = field(default_factory=set[str])
    live_sessions: int = 0
    _free_bytes: int | None = None
    _free_read_at: float | None = None
    _free_reading: trio.Event | None = None

    async def clock(self) -> datetime:
        """The store clock, which also judges the sessions' leases."""
        return await self.store.current_time()

    def reserve_session(self) -> None:
        """Take one server-wide session slot, synchronously (so pipelined requests cannot overrun it).

        Raises:
            AcpError: ``-32014`` when ``max_sessions`` sessions are live.
        """
        if self.live_sessions >= self.config.max_sessions:
            raise ServerSessionLimitError()
        self.live_sessions += 1

    def release_session(self) -> None:
        """Give back a slot taken by :meth:`reserve_session`."""
        self.live_sessions -= 1

    async def check_storage(self) -> None:
        """Refuse new work while the store's file system has less than ``min_free_disk_bytes`` free.

        Raises:
            AcpError: ``-32015`` when the disk is too full.
        """
        directory = self.storage_directory
        floor = self.config.min_free_disk_bytes
        if directory is None or floor == 0:
            return
        free = await self._free_space(directory)
        if free is not None and free < floor:
            _log.warning("refusing new work: %d bytes free in %s, below %d", free, directory, floor)
            raise StorageFullError()

    async def _free_space(self, directory: str) -> int | None:
        """Free bytes in ``directory``, read at most once per :data:`FREE_SPACE_TTL_SECONDS`.

        Reading it costs a worker-thread round trip, which dominated ``session/new`` under
        load; one reading serves every check for a moment, and checks that arrive while a
        reading is under way share it. ``None`` when it cannot be read (logged; not refused).
        """
        now = trio.current_time()
        if self._free_read_at is not None and now - self._free_read_at < FREE_SPACE_TTL_SECONDS:
            return self._free_bytes
        if self._free_reading is not None:
            await self._free_reading.wait()
            return self._free_bytes
        reading = self._free_reading = trio.Event()
        try:
            self._free_bytes = (await trio.to_thread.run_sync(shutil.disk_usage, directory)).free
        except OSError:
            _log.exception("checking free space in %s failed", directory)
            self._free_bytes = None
        finally:
            self._free_read_at = trio.current_time()
            self._free_reading = None
            reading.set()
        return self._free_bytes


class PersistenceFailedError(Exception):
    """Storing an event or refreshing the lease failed; the run is aborted."""


class PromptCanceledError(Exception):
    """The run ended canceled; its prompt is answered with an internal error (§5.3 step 4)."""


@dataclass(eq=False, slots=True)
class _Pending:
    done: trio.Event = field(default_factory=trio.Event)
    resolution: PermissionResolution | None = None


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
    abort: AbortController = field(default_factory=AbortController)
    pending: dict[str, _Pending] = field(default_factory=dict[str, _Pending])
    resolved: set[str] = field(default_factory=set[str])
    persistence_failed: bool = False
    persistence_error: BaseException | None = None
    """Why persistence failed (the store's error), chained into the prompt's failure."""
    finished: bool = False
    idle_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    lease_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    run_limit_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    run_limit_reached: bool = False
    outbox: Outbox = field(default_factory=Outbox)
    runtime: MinimalAgentRuntime | None = None
    run_id: str | None = None

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
        """Deny pending permissions and abort the run (cancel and disconnect)."""
        self.deny_pending(note)
        self.abort.abort(note)


class SessionManager:
    """The sessions created by one connection and the methods that act on them.

    Args:
        state: The server-wide state.
        send: Queues one text frame, waiting for outbound room; dropped once the connection is closing.
        nursery: Runs the session timers; the connection waits for it.
        principal: The connection's principal, recorded in each session's metadata.
    """

    def __init__(
        self,
        state: ServerState,
        send: Callable[[str], Awaitable[None]],
        nursery: trio.Nursery,
        *,
        principal: str,
    ) -> None:
        self._state = state
        self._config = state.config
        self._send = send
        self._nursery = nursery
        self._principal = principal
        self._sessions: dict[str, Session] = {}
        self._created = 0
        self.owner_id: Final = state.config.new_id("connection")
        self.disconnected = False

    def _lookup(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        return session

    # ------------------------------------------------------------ session/new

    def _resolve_workspace(self, requested: str) -> str:
        root = self._state.root
        try:
            lexical = open_workspace(root).resolve_path(requested)
            real = os.path.realpath(lexical, strict=True)
        except (WorkspaceEscapesRootError, OSError, ValueError):
            raise InvalidParamsError(_WORKSPACE_MISSING) from None
        inside = real == root or real.startswith(root.rstrip(os.sep) + os.sep)
        if not inside or not os.path.isdir(real):
            raise InvalidParamsError(_WORKSPACE_MISSING)
        return real

    async def _open_adapter(self, workspace: str) -> LocalWorkspace | SandboxWorkspace | None:
        """The session's own adapter (``workspace_adapter`` ``"local"`` or ``"sandbox"``), else ``None``.

        Raises:
            AcpError: ``-32602`` when the workspace vanished since it was resolved;
                ``-32017`` when the sandbox cannot be made (its engine is unavailable, the
                image is not pinned, the copy is over the disk limit …; the message says why).
            LocalWorkspaceError: any other failure to open a local adapter (answered ``-32603``).
        """
        config = self._config
        if config.workspace_adapter is None:
            return None
        if config.workspace_adapter == "sandbox":
            assert config.sandbox_engine is not None
            try:
                return await SandboxWorkspace.create(
                    workspace, engine=config.sandbox_engine, limits=config.sandbox_limits
                )
            except SandboxError as error:
                if error.code == SANDBOX_SOURCE_INVALID:
                    raise InvalidParamsError(_WORKSPACE_MISSING) from None
                _log.warning("session sandbox refused: %s (%s)", error.message, error.code)
                raise SandboxUnavailableError(f"{error.code}: {error.message}") from None
        try:
            # The constructor opens the directory: blocking, so in a worker thread.
            local = await trio.to_thread.run_sync(LocalWorkspace, workspace)
        except LocalWorkspaceError as error:
            if error.code in (WORKSPACE_NOT_FOUND, WORKSPACE_NOT_A_DIRECTORY):
                raise InvalidParamsError(_WORKSPACE_MISSING) from None
            raise
        if config.allow_host_effects:
            # The operator's explicit, unsafe opt-in: writes and commands act on the host.
            declare_isolation(local, "unsafe-host")
        return local

    async def create(self, params: NewSessionParams) -> NewSessionResult:
        """``session/new`` (§5.1).

        The connection's count and a server-wide slot are both taken before the first
        ``await``, so pipelined requests cannot overrun either cap; a creation that fails
        gives both back.
        """
        if self._created >= self._config.max_sessions_per_connection:
            raise SessionLimitError()
        self._state.reserve_session()
        self._created += 1
        try:
            session = await self._admit(params)
        except BaseException:
            self._created -= 1
            self._state.release_session()
            raise
        self._sessions[session.id] = session
        self._nursery.start_soon(self._idle_timer, session)
        self._nursery.start_soon(self._lease_refresh, session)
        return NewSessionResult(session_id=session.id)

    async def _admit(self, params: NewSessionParams) -> Session:
        """Check and build one session and create its row (steps 2 to 7 of §5.1)."""
        config = self._config
        await self._state.check_storage()
        workspace = await trio.to_thread.run_sync(self._resolve_workspace, params.workspace)
        model_name = params.model if params.model is not None else config.chosen_default_model
        if model_name is None or model_name not in config.models:
            raise InvalidParamsError("unknown model")
        manifest = None
        if params.task_id is not None:
            manifest = await trio.to_thread.run_sync(config.load_manifest, workspace, params.task_id)
        session_id = config.new_id("sess")
        if session_id in self._state.active_session_ids:
            raise RuntimeError("session id collision")
        context = ToolProviderContext(
            session_id=session_id, workspace=workspace, task_id=params.task_id, model=model_name
        )
        offered: list[Tool[Any]] = list(config.tools(context))
        local = config.workspace_adapter is not None
        # The same rule that makes the session's workspace declared isolated (_open_adapter).
        isolated = config.effects_admitted
        tools = await trio.to_thread.run_sync(
            lambda: admit_tools(offered, workspace, workspace_adapter=local, effects_admitted=isolated)
        )
        # The adapter is opened before the row is created, so a failure to open it stores
        # nothing; a failure to create the row disposes it again.
        adapter = await self._open_adapter(workspace)
        session = Session(
            id=session_id,
            workspace=workspace,
            model_name=model_name,
            task_id=params.task_id,
            manifest=manifest,
            tools=tools,
            adapter=adapter,
        )
        self._state.active_session_ids.add(session_id)
        try:
            await self._create_row(session)
        except BaseException:
            self._state.active_session_ids.discard(session_id)
            await self._dispose_adapter(session)
            raise
        return session

    async def _create_row(self, session: Session) -> None:
        """Create the session's row and take its lease for this connection, in one transaction."""
        metadata: dict[str, object] = {
            "kind": "agent-session",
            "workspace": session.workspace,
            "modelName": session.model_name,
            "principal": self._principal,
        }
        record = await self._state.store.create(
            session.id,
            task_id=session.task_id,
            metadata=metadata,
            owner_id=self.owner_id,
            lease_ms=self._config.session_lease_ms,
        )
        if record.lease is None or record.lease.owner_id != self.owner_id:
            raise RuntimeError("session row belongs to another owner")

    async def _idle_timer(self, session: Session) -> None:
        try:
            with session.idle_scope:
                await trio.sleep(self._config.created_session_timeout_ms / 1000)
                if session.state == "created":
                    session.stop(NOTE_CANCELED)
                    session.state = "canceled"
                    await self._finish(session)
        finally:
            # Cancelled from outside while never prompted (no disconnect ran): the adapter
            # must not outlive the session all the same.
            if session.state == "created":
                await self._dispose_adapter(session)

    async def _lease_refresh(self, session: Session) -> None:
        store = self._state.store
        interval = max(0.5, self._config.session_lease_ms / 3000)
        with session.lease_scope:
            while True:
                await trio.sleep(interval)
                try:
                    await store.renew_lease(session.id, self.owner_id, lease_ms=self._config.session_lease_ms)
                except Exception as error:
                    _log.exception("lease refresh failed for session %s", session.id)
                    session.persistence_failed = True
                    session.persistence_error = error
                    session.abort.abort("persistence failure")
                    return

    async def _dispose_adapter(self, session: Session) -> None:
        """Dispose the session's adapter once, shielded; a failure is logged, never raised.

        Disposal kills the adapter's running commands and waits for its operations in flight.
        """
        adapter, session.adapter = session.adapter, None
        if adapter is None:
            return
        try:
            with trio.CancelScope(shield=True):
                await adapter.dispose()
        except Exception:
            _log.exception("disposing the workspace adapter of session %s failed", session.id)

    async def _finish(self, session: Session, *, keep_active: bool = False) -> None:
        if session.finished:
            return
        session.finished = True
        session.deny_pending(NOTE_FINISHED)
        session.idle_scope.cancel()
        session.lease_scope.cancel()
        # Before the row is closed: a closed row means nothing of the session still runs.
        await self._dispose_adapter(session)
        store = self._state.store
        try:
            if not keep_active:
                with trio.CancelScope(shield=True):
                    await store.close(session.id, owner_id=self.owner_id)
                    if not self._state.persistent:
                        await self._forget_events(store)
        except Exception:
            _log.exception("closing the row of session %s failed", session.id)
        finally:
            self._forget(session)

    def _forget(self, session: Session) -> None:
        """Drop a finished session's id from the active set and give back its slot."""
        self._state.active_session_ids.discard(session.id)
        self._state.release_session()

    # ------------------------------------------------------------ session/prompt

    async def prompt(self, params: PromptParams) -> PromptResult:
        """``session/prompt`` (§5.3) on the kernel runtime, bounded by ``max_run_ms`` of wall time."""
        session = self._lookup(params.session_id)
        if session.state == "created":
            await self._state.check_storage()
        if session.state != "created":
            raise SessionAlreadyRunError()
        session.state = "running"
        session.idle_scope.cancel()
        self._nursery.start_soon(self._run_limit_timer, session)
        try:
            outcome = await self._drive(session, params)
        except Exception as error:
            session.state = "canceled" if session.abort.signal.aborted else "failed"
            await self._finish(session, keep_active=session.persistence_failed)
            if session.run_limit_reached and not session.persistence_failed:
                raise self._run_limit_error() from error
            if session.persistence_failed:
                cause = session.persistence_error if session.persistence_error is not None else error
                raise PersistenceFailedError("a session event was not stored") from cause
            raise
        except BaseException:
            # Cancelled from outside rather than through the abort signal: nothing is sent
            # any more (the runtime still stored its canceled pair, shielded), but the adapter
            # must not outlive the run, nor the session its slot.
            await self._dispose_adapter(session)
            if not session.finished:
                session.finished = True
                self._forget(session)
            raise
        finally:
            session.run_limit_scope.cancel()
        return await self._answer(session, outcome)

    def _run_input(self, session: Session, params: PromptParams, events: RunEvents) -> RunInput:
        """The runtime's input for one prompt: §5.3 step 3 on ``RunInput``."""
        config = self._config
        limits = session.manifest.budget if session.manifest is not None else None
        budget = RuntimeBudget(
            max_model_tokens=_smallest(params.max_model_tokens, limits and limits.max_model_tokens),
            max_tool_calls=_smallest(params.max_tool_calls, limits and limits.max_tool_calls),
        )
        permissions = manifest_permissions(session.manifest) if session.manifest is not None else None

        async def resolve(request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
            return await self._await_operator(session, request)

        model = config.models[session.model_name]()
        # A one-shot model names itself in the audit trail; a streaming adapter goes by its
        # configured name.
        name: object = getattr(model, "name", None)
        return RunInput(
            run_id=config.new_id("run"),
            session_id=session.id,
            turn_id=config.new_id("turn"),
            input=params.content,
            model=name if type(name) is str and name else session.model_name,
            model_adapter=adapt_model(model),
            event_store=events,
            tools=session.tools,
            permission=RulePermissionController(permissions, resolve=resolve),
            budget=budget,
            task_id=session.task_id,
            workspace=session.adapter,
            signal=session.abort.signal,
            now=lambda: format_timestamp(config.now()),
            new_id=config.new_id,
        )

    async def _drive(self, session: Session, params: PromptParams) -> RunOutcome:
        """Record ``session.created``, then run the turn on a fresh runtime and send its events."""
        created = create_event(
            "session.created",
            SessionCreatedData(session_id=session.id, workspace=session.workspace),
            event_id=self._config.new_id("evt"),
            at=format_timestamp(self._config.now()),
            actor="kernel",
        )
        # session.created is stored with the run's admission events, in one commit.
        events = RunEvents(
            session.id,
            lambda batch: self._record(session, batch),
            self._read_events,
            prelude=created,
        )
        run_input = self._run_input(session, params, events)
        runtime = self._config.runtime()
        stream = runtime.run(run_input)
        session.runtime, session.run_id = runtime, run_input.run_id
        outcome = await consume(stream, session.outbox, self.send)
        if await events.store_prelude():  # the run appended nothing (it failed at admission)
            await session.outbox.flush(self.send)
        return outcome

    async def _answer(self, session: Session, outcome: RunOutcome) -> PromptResult:
        """The terminal state of a run that ended with its pair, and the prompt's answer (§5.3 step 4)."""
        if session.persistence_failed:
            session.state = "failed"
            await self._finish(session, keep_active=True)
            raise PersistenceFailedError("a session event was not stored") from session.persistence_error
        if session.abort.signal.aborted or outcome.status == "canceled":
            session.state = "canceled"
        else:
            session.state = "completed" if outcome.status == "completed" else "failed"
        await self._finish(session)
        if session.run_limit_reached:
            raise self._run_limit_error()
        if session.state == "canceled":
            raise PromptCanceledError()
        return PromptResult(
            status="completed" if session.state == "completed" else "failed",
            events=[],
            final_text=outcome.final_text,
            usage=PromptUsage(
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                total_tokens=outcome.prompt_tokens + outcome.completion_tokens,
            ),
        )

    def _read_events(self, session_id: str) -> AsyncIterator[Event]:
        return self._state.store.event_log(session_id, owner_id=self.owner_id).read_session(session_id)

    @staticmethod
    async def _forget_events(store: SessionStore) -> None:
        """Without persistence nothing can be restored: drop closed sessions at once.

        The in-memory store would otherwise keep every event of a long-running server.
        """
        now = await store.current_time()
        while await store.delete_closed(closed_before=now + timedelta(seconds=1), limit=100):
            pass

    async def _run_limit_timer(self, session: Session) -> None:
        """Abort the run once it has run for ``max_run_ms`` (pending permissions are denied)."""
        with session.run_limit_scope:
            await trio.sleep(self._config.max_run_ms / 1000)
            _log.warning("session %s reached its run time limit", session.id)
            session.run_limit_reached = True
            session.stop(NOTE_RUN_TIME_LIMIT)

    def _run_limit_error(self) -> RunTimeLimitError:
        seconds = self._config.max_run_ms / 1000
        return RunTimeLimitError(f"the run was stopped after its limit of {seconds:g} s")

    async def _record(self, session: Session, events: Sequence[Event]) -> None:
        """Redact and store ``events`` with one commit, then queue their notifications (§6).

        Raises:
            Exception: the events were not stored (the run is aborted); a redaction failure
                stores the events before it and its replacement ``error`` event first.
        """
        redacted: list[Event] = []
        for event in events:
            try:
                redacted.append(redact_event(event))
            except Exception:
                _log.exception("event redaction failed in session %s", session.id)
                session.abort.abort("event redaction failed")
                await self._store(session, [*redacted, self._redaction_failed()])
                raise
        # Handed over without keeping a name for them in this frame: only the notification
        # texts outlive the store call.
        handover = [redacted]
        del redacted
        await self._store(session, handover.pop())

    def _redaction_failed(self) -> Event:
        """The ``error`` event stored in place of one whose redaction failed."""
        return create_event(
            "error",
            ErrorData(code="EVENT_REDACTION_FAILED", message="event redaction failed", retryable=False),
            event_id=self._config.new_id("evt"),
            at=format_timestamp(self._config.now()),
            actor="agent-server",
        )

    async def _store(self, session: Session, events: list[Event]) -> None:
        if not events:
            return
        try:
            stored = await self._state.store.append_many(session.id, events, owner_id=self.owner_id)
        except Exception as error:
            session.persistence_failed = True
            session.persistence_error = error
            session.abort.abort("persistence failure")
            raise
        finally:
            events.clear()
        for item in stored:
            event = item.event
            if event.type == "permission.requested":
                permission_id: object = getattr(event.data, "permission_id", None)
                if type(permission_id) is str:
                    session.pending[permission_id] = _Pending()
            session.outbox.texts.append(encode_notification(session.id, item.seq, serialize_event(event)))
        del stored

    async def send(self, text: str) -> None:
        """Queue a frame unless the client has disconnected."""
        if not self.disconnected:
            await self._send(text)

    async def _await_operator(self, session: Session, request: PermissionRequest) -> PermissionResolution:
        if session.abort.signal.aborted or session.finished:
            session.resolved.add(request.permission_id)
            return PermissionResolution("deny", NOTE_CANCELED)
        pending = session.pending.get(request.permission_id)
        if pending is None:
            pending = session.pending[request.permission_id] = _Pending()
        with trio.move_on_after(self._config.permission_timeout_ms / 1000):
            await pending.done.wait()
        if pending.resolution is None:
            session.resolve_pending(request.permission_id, PermissionResolution("deny", NOTE_TIMED_OUT))
        assert pending.resolution is not None
        return pending.resolution

    # ------------------------------------------------------------ permission/respond, cancel

    def respond(self, params: PermissionRespondParams) -> PermissionRespondResult:
        """``permission/respond`` (§7)."""
        session = self._lookup(params.session_id)
        if params.permission_id in session.pending:
            session.resolve_pending(params.permission_id, PermissionResolution(params.decision, params.note))
            return PermissionRespondResult(accepted=True)
        if params.permission_id in session.resolved:
            raise PermissionResolvedError()
        raise PermissionNotFoundError()

    async def cancel(self, params: CancelParams) -> CancelResult:
        """``session/cancel`` (§5.4)."""
        session = self._lookup(params.session_id)
        if session.state in _TERMINAL:
            return CancelResult(canceled=False)
        await self._stop(session, NOTE_CANCELED)
        return CancelResult(canceled=True)

    async def disconnect(self) -> None:
        """Apply the disconnect semantics (§5.5); no frame is sent afterwards."""
        self.disconnected = True
        for session in list(self._sessions.values()):
            if session.state not in _TERMINAL:
                await self._stop(session, NOTE_DISCONNECTED)

    async def _stop(self, session: Session, note: str) -> None:
        """Deny, abort, and finish a ``created`` session (cancel and disconnect).

        A running session finishes when its run returns; its adapter is disposed now, so a
        command that ignores the abort is killed rather than left running until then.
        """
        session.stop(note)
        if session.state == "created":
            session.state = "canceled"
            await self._finish(session)
            return
        await self._dispose_adapter(session)
        await self._cancel_run(session)

    async def _cancel_run(self, session: Session) -> None:
        """The runtime's cancel path: return once the run's terminal pair is durable.

        The abort signal already asked the run to stop; this waits for (or drives) its end.
        A run that ended otherwise, or whose pair could not be stored, is left to the
        prompt's task, which answers for it.
        """
        runtime, run_id = session.runtime, session.run_id
        if runtime is None or run_id is None:
            return
        try:
            await runtime.cancel(run_id)
        except AgentRuntimeError as error:
            _log.info("cancel of run %s in session %s: %s", run_id, session.id, error.message)


def _smallest(first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)
