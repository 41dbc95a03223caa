"""Sessions of one connection: conversations of turns, steering, permissions, durable events (spec §5 to §7).

A session is a conversation (issue #23): its first prompt runs a turn on the session's own
kernel runtime, and once a turn ends the session waits, ``idle``, with its workspace adapter,
its lease, its runtime and its event store, for the next prompt, which is a follow-up turn.
It finishes on ``session/close``, a disconnect, the idle timeout, or a turn that could not
store its events.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Final

import trio

from agent_server._admission import build_session, resolve_workspace
from agent_server._conversation import WAITING, Conversation, PendingPermission, Session
from agent_server._errors import (
    InvalidParamsError,
    NoRunningTurnError,
    PermissionNotFoundError,
    PermissionResolvedError,
    RunTimeLimitError,
    SessionAlreadyRunError,
    SessionLimitError,
    SessionNotContinuableError,
    SessionNotFoundError,
    SessionNotRestorableError,
    SteeringRefusedError,
)
from agent_server._protocol import (
    CancelParams,
    CancelResult,
    CloseParams,
    CloseResult,
    ContinueParams,
    NewSessionParams,
    NewSessionResult,
    PermissionRespondParams,
    PermissionRespondResult,
    PromptParams,
    PromptResult,
    PromptUsage,
    SteerParams,
    SteerResult,
    encode_notification,
)
from agent_server._quotas import PrincipalQuotas
from agent_server._restore import claim_interrupted, claim_session
from agent_server._state import ServerState
from agent_server._turns import RunEvents, RunOutcome, consume
from harness_kernel.events import (
    ErrorData,
    Event,
    SessionCreatedData,
    create_event,
    format_timestamp,
    redact_event,
    serialize_event,
)
from harness_kernel.manifest import manifest_permissions
from harness_kernel.models import adapt_model
from harness_kernel.policy import PermissionRequest, PermissionResolution, RulePermissionController
from harness_kernel.runtime import (
    AgentRuntimeError,
    CheckpointError,
    ContinuationError,
    ContinueInput,
    InvalidRunInputError,
    RunInput,
    RunStream,
    RunTerminalError,
    RuntimeBudget,
    SteeringClosedError,
)
from harness_kernel.store import SESS_OWNERSHIP_LOST, SessionStore, SessionStoreError
from harness_workspace import AbortController, AbortSignal

__all__ = ["PersistenceFailedError", "PromptCanceledError", "SessionManager"]

_log: Final = logging.getLogger("agent_server")

NOTE_CANCELED: Final = "session canceled"
NOTE_CLOSED: Final = "session closed"
NOTE_DISCONNECTED: Final = "ACP client disconnected"
NOTE_FINISHED: Final = "session finished"
NOTE_TIMED_OUT: Final = "permission request timed out"
NOTE_RUN_TIME_LIMIT: Final = "run time limit reached"
NOTE_NO_OPERATOR: Final = "no operator is connected: the turn was continued at server start"


class PersistenceFailedError(Exception):
    """Storing an event or refreshing the lease failed; the run is aborted."""


class PromptCanceledError(Exception):
    """The run ended canceled; its prompt is answered with an internal error (§5.3 step 4)."""


class SessionManager:
    """The sessions created (or continued) by one connection and the methods that act on them.

    Args:
        state: The server-wide state.
        send: Queues one text frame, waiting for outbound room; dropped once the connection is closing.
        nursery: Runs the session timers; the connection waits for it.
        principal: The connection's principal, recorded in each session's metadata.
        operator: Whether a client can answer permission requests; without one (a session
            continued at server start) every ask is denied at once.
    """

    def __init__(
        self,
        state: ServerState,
        send: Callable[[str], Awaitable[None]],
        nursery: trio.Nursery,
        *,
        principal: str,
        operator: bool = True,
    ) -> None:
        self._state = state
        self._config = state.config
        self._send = send
        self._nursery = nursery
        self._principal = principal
        self._operator = operator
        self._sessions: dict[str, Session] = {}
        self._created = 0
        self.owner_id: Final = state.hooks.new_id("connection")
        self.disconnected = False

    def _lookup(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        return session

    # ------------------------------------------------------------ session/new

    def _take_slot(self) -> None:
        """Count one session of this connection, take a server-wide slot and one of the principal's
        (decision 058), before any ``await``.

        Raises:
            AcpError: ``-32012``, ``-32014`` or ``-32024`` at the connection's, the server's
                or the principal's cap.
        """
        if self._created >= self._config.limits.max_sessions_per_connection:
            raise SessionLimitError()
        self._state.reserve_session()
        try:
            self._state.quotas.reserve(self._principal)
        except BaseException:
            self._state.release_session()
            raise
        self._created += 1

    def _give_back_slot(self) -> None:
        self._created -= 1
        self._state.release_session()
        self._state.quotas.release(self._principal)

    async def create(self, params: NewSessionParams) -> NewSessionResult:
        """``session/new`` (§5.1).

        The connection's count and a server-wide slot are both taken before the first
        ``await``, so pipelined requests cannot overrun either cap; a creation that fails
        gives both back.
        """
        self._take_slot()
        try:
            session = await self._admit(params)
        except BaseException:
            self._give_back_slot()
            raise
        self._sessions[session.id] = session
        self._start_idle_timer(session)
        self._nursery.start_soon(self._lease_refresh, session)
        return NewSessionResult(session_id=session.id)

    async def _admit(self, params: NewSessionParams) -> Session:
        """Check and build one session and create its row (steps 2 to 7 of §5.1)."""
        config = self._config
        await self._state.check_storage()
        self._state.quotas.check_stored(self._principal)
        workspace = await trio.to_thread.run_sync(resolve_workspace, self._state.root, params.workspace)
        model_name = params.model if params.model is not None else config.model.chosen_default_model
        if model_name is None or model_name not in config.model.models:
            raise InvalidParamsError("unknown model")
        session_id = self._state.hooks.new_id("sess")
        if session_id in self._state.active_session_ids:
            raise RuntimeError("session id collision")
        session = await build_session(self._config, session_id, workspace, model_name, params.task_id)
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
            lease_ms=self._config.limits.session_lease_ms,
        )
        if record.lease is None or record.lease.owner_id != self.owner_id:
            raise RuntimeError("session row belongs to another owner")

    # ------------------------------------------------------------ timers

    def _start_idle_timer(self, session: Session) -> None:
        """(Re)start the timer that finishes a session left waiting for a prompt too long."""
        session.idle_scope = scope = trio.CancelScope()
        self._nursery.start_soon(self._idle_timer, session, scope)

    async def _idle_timer(self, session: Session, scope: trio.CancelScope) -> None:
        try:
            with scope:
                await trio.sleep(self._config.limits.created_session_timeout_ms / 1000)
                if session.state in WAITING:
                    session.stop(NOTE_CANCELED)
                    await self._finish(session)
        finally:
            # Cancelled from outside while waiting (no disconnect ran): the adapter must not
            # outlive the session all the same. A timer replaced by a later one leaves it be.
            if session.idle_scope is scope and session.state in WAITING:
                await self._dispose_adapter(session)

    async def _lease_refresh(self, session: Session) -> None:
        store = self._state.store
        interval = max(0.5, self._config.limits.session_lease_ms / 3000)
        with session.lease_scope:
            while True:
                await trio.sleep(interval)
                try:
                    await store.renew_lease(
                        session.id, self.owner_id, lease_ms=self._config.limits.session_lease_ms
                    )
                except Exception as error:
                    _log.exception("lease refresh failed for session %s", session.id)
                    session.persistence_failed = True
                    session.persistence_error = error
                    session.abort.abort("persistence failure")
                    if session.state in WAITING:
                        # No turn runs to notice: the session ends now, its row left active.
                        self._nursery.start_soon(functools.partial(self._finish, session, keep_active=True))
                    return

    async def _run_limit_timer(self, session: Session, scope: trio.CancelScope) -> None:
        """Abort the turn once it has run for ``max_run_ms`` (pending permissions are denied)."""
        with scope:
            await trio.sleep(self._config.limits.max_run_ms / 1000)
            _log.warning("session %s reached its run time limit", session.id)
            session.run_limit_reached = True
            session.stop(NOTE_RUN_TIME_LIMIT)

    def _run_limit_error(self) -> RunTimeLimitError:
        seconds = self._config.limits.max_run_ms / 1000
        return RunTimeLimitError(f"the run was stopped after its limit of {seconds:g} s")

    # ------------------------------------------------------------ finishing

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
        session.state = "finished"
        session.deny_pending(NOTE_FINISHED)
        session.idle_scope.cancel()
        session.lease_scope.cancel()
        # Before the row is closed: a closed row means nothing of the session still runs.
        await self._dispose_adapter(session)
        store = self._state.store
        try:
            if session.owns_row and not keep_active:
                with trio.CancelScope(shield=True):
                    await store.close(session.id, owner_id=self.owner_id)
                    if not self._state.persistent:
                        await self._forget_events(store, self._state.quotas)
        except Exception:
            _log.exception("closing the row of session %s failed", session.id)
        finally:
            session.conversation = None  # the runtime and its messages go with it
            self._forget(session)

    def _forget(self, session: Session) -> None:
        """Drop a finished session's id from the active set and give back its slot."""
        self._state.active_session_ids.discard(session.id)
        self._state.release_session()
        self._state.quotas.release(self._principal)
        session.done.set()

    @staticmethod
    async def _forget_events(store: SessionStore, quotas: PrincipalQuotas) -> None:
        """Without persistence nothing can be restored: drop closed sessions at once.

        The in-memory store would otherwise keep every event of a long-running server; the
        dropped events no longer count for their principal's byte quota.
        """
        now = await store.current_time()
        while deleted := await store.delete_closed(closed_before=now + timedelta(seconds=1), limit=100):
            quotas.forget(deleted)

    # ------------------------------------------------------------ session/prompt

    async def prompt(self, params: PromptParams) -> PromptResult:
        """``session/prompt`` (§5.3): the session's first turn, or a follow-up once it is idle.

        Each turn is bounded by ``max_run_ms`` of wall time.
        """
        session = self._lookup(params.session_id)
        _check_promptable(session)
        await self._state.check_storage()
        self._state.quotas.check_stored(self._principal)
        _check_promptable(session)  # a concurrent prompt, a close or the idle timer came first

        async def start() -> RunStream:
            return self._start_prompt(session, params)

        self._begin_turn(session)
        return await self._drive(session, start)

    def _begin_turn(self, session: Session) -> None:
        """``running`` before the first ``await``, so two turns never both start; a fresh abort."""
        session.state = "running"
        session.idle_scope.cancel()
        session.abort = AbortController()
        session.run_limit_reached = False
        session.run_limit_scope = trio.CancelScope()
        self._nursery.start_soon(self._run_limit_timer, session, session.run_limit_scope)

    def _conversation(self, session: Session, *, prelude: Event | None) -> Conversation:
        """The session's conversation, made at its first turn."""
        if session.conversation is not None:
            return session.conversation
        model = self._config.model.models[session.model_name]()
        # A one-shot model names itself in the audit trail; a streaming adapter goes by its
        # configured name.
        name: object = getattr(model, "name", None)
        record = functools.partial(self._record, session)
        events = RunEvents(session.id, record, self._read_events, prelude=prelude)
        session.conversation = Conversation(
            runtime=self._state.hooks.runtime(),
            events=events,
            model=adapt_model(model),
            model_name=name if type(name) is str and name else session.model_name,
        )
        return session.conversation

    def _start_prompt(self, session: Session, params: PromptParams) -> RunStream:
        """Admit the prompt's turn: the session's first (``session.created`` goes with it), or a follow-up."""
        conversation = self._conversation(session, prelude=self._created_event(session))
        run_input = RunInput(
            run_id=self._state.hooks.new_id("run"),
            session_id=session.id,
            turn_id=self._state.hooks.new_id("turn"),
            input=params.content,
            model=conversation.model_name,
            model_adapter=conversation.model,
            event_store=conversation.events,
            tools=session.tools,
            permission=self._permission(session),
            budget=self._budget(session, params.max_model_tokens, params.max_tool_calls),
            task_id=session.task_id,
            workspace=session.adapter,
            signal=session.abort.signal,
            now=self._timestamp,
            new_id=self._state.hooks.new_id,
            context_policy=self._config.model.context_policy,
            checkpoints=True,
        )
        runtime = conversation.runtime
        stream = runtime.follow_up(run_input) if conversation.turns else runtime.run(run_input)
        conversation.turns += 1
        conversation.outcome = RunOutcome(run_id=run_input.run_id)
        return stream

    def _created_event(self, session: Session) -> Event:
        return create_event(
            "session.created",
            SessionCreatedData(session_id=session.id, workspace=session.workspace),
            event_id=self._state.hooks.new_id("evt"),
            at=self._timestamp(),
            actor="kernel",
        )

    def _timestamp(self) -> str:
        return format_timestamp(self._state.hooks.now())

    def _permission(self, session: Session) -> RulePermissionController:
        """§5.3 step 3: the manifest's rules (every action ``ask`` without one), asks to the operator."""
        permissions = manifest_permissions(session.manifest) if session.manifest is not None else None

        async def resolve(request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
            return await self._await_operator(session, request)

        return RulePermissionController(permissions, resolve=resolve)

    @staticmethod
    def _budget(session: Session, max_model_tokens: int | None, max_tool_calls: int | None) -> RuntimeBudget:
        """Each limit is the smaller of the request's and the manifest's (``max_model_tokens``
        bounds the whole session: a follow-up inherits its usage)."""
        limits = session.manifest.budget if session.manifest is not None else None
        return RuntimeBudget(
            max_model_tokens=_smallest(max_model_tokens, limits and limits.max_model_tokens),
            max_tool_calls=_smallest(max_tool_calls, limits and limits.max_tool_calls),
        )

    async def _drive(self, session: Session, start: Callable[[], Awaitable[RunStream]]) -> PromptResult:
        """Start a turn, send its events as they are stored, and answer for it (§5.3 step 4)."""
        try:
            stream = await start()
            conversation = session.conversation
            assert conversation is not None
            conversation.stream = stream
            outcome = await consume(stream, conversation.outcome, session.outbox, self.send)
            if await conversation.events.store_prelude():  # the run appended nothing (it failed at admission)
                await session.outbox.flush(self.send)
        except Exception as error:
            # The turn broke off without its outcome (a store or redaction failure, a refused
            # admission): what the runtime holds no longer matches the store, so the session ends.
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
                session.state = "finished"
                self._forget(session)
            raise
        finally:
            session.run_limit_scope.cancel()
            if session.conversation is not None:
                session.conversation.stream = None
        return await self._answer(session, outcome)

    async def _answer(self, session: Session, outcome: RunOutcome) -> PromptResult:
        """The session after a turn that ended with its pair, and the turn's answer (§5.3 step 4)."""
        if session.persistence_failed:
            await self._finish(session, keep_active=True)
            raise PersistenceFailedError("a session event was not stored") from session.persistence_error
        canceled = session.abort.signal.aborted or outcome.status == "canceled"
        if session.closing:
            await self._finish(session)
        else:
            session.state = "idle"
            self._start_idle_timer(session)
        if session.run_limit_reached:
            raise self._run_limit_error()
        if canceled:
            raise PromptCanceledError()
        return _result(outcome.status, outcome.final_text, outcome.prompt_tokens, outcome.completion_tokens)

    def _read_events(self, session_id: str) -> AsyncIterator[Event]:
        return self._state.store.event_log(session_id, owner_id=self.owner_id).read_session(session_id)

    # ------------------------------------------------------------ session/continue

    async def continue_session(self, params: ContinueParams) -> PromptResult:
        """``session/continue``: take up a session's interrupted turn on this connection (issue #23).

        The session joins this connection (it counts as one of its sessions), its turn is
        continued from its last runtime checkpoint and streamed like a prompt's, and the
        answer is the prompt's. Afterwards the session is idle here, ready for a follow-up.
        """
        self._take_slot()
        try:
            session, status = await self._claim(params.session_id)
        except BaseException:
            self._give_back_slot()
            raise
        self._sessions[session.id] = session
        if self.disconnected:  # the connection (or the server) ended while the session was claimed
            session.closing = True
            session.stop(NOTE_DISCONNECTED)
        if status == "completed":
            return await self._take_up(session)

        async def start() -> RunStream:
            return await self._start_continuation(session, resend_uncertain=params.resend_uncertain)

        self._begin_turn(session)
        return await self._drive(session, start)

    async def _take_up(self, session: Session) -> PromptResult:
        """A session whose last turn ended joins this connection idle, its conversation rebuilt
        from the store (kernel ``resume_conversation``); the answer repeats that turn's outcome.

        Raises:
            AcpError: ``-32013`` when another owner took the lease first; ``-32023`` when the
                session stored no (valid) runtime checkpoint.
        """
        conversation = self._conversation(session, prelude=None)
        try:
            with self._taking_lease(session):
                plan = await conversation.runtime.resume_conversation(
                    self._continue_input(session, conversation)
                )
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._finish(session)
            raise
        if session.closing:
            await self._finish(session)
        else:
            session.state = "idle"
            self._start_idle_timer(session)
        usage = plan.usage
        return _result(plan.status, plan.final_text, usage.prompt_tokens, usage.completion_tokens)

    @contextmanager
    def _taking_lease(self, session: Session) -> Generator[None]:
        """Around the kernel's continuation of ``session``: its refusals as protocol errors;
        once it took the lease, the row is this connection's, a first turn is behind the
        conversation, and the lease refresh starts.

        Raises:
            AcpError: ``-32013`` when another owner took the lease first; ``-32023`` when the
                session has nothing to continue or no (valid) runtime checkpoint.
        """
        try:
            yield
        except SessionStoreError as error:
            if error.code == SESS_OWNERSHIP_LOST:
                raise SessionNotRestorableError("another owner holds the session's lease") from None
            raise
        except (ContinuationError, CheckpointError) as error:
            session.owns_row = True  # the lease was taken before the events were read
            raise SessionNotContinuableError(error.message) from None
        session.owns_row = True
        conversation = session.conversation
        assert conversation is not None
        conversation.turns = 1
        self._nursery.start_soon(self._lease_refresh, session)

    async def _claim(self, session_id: str) -> tuple[Session, str]:
        """Check that the session is this principal's and interrupted, then rebuild it here.

        Raises:
            AcpError: ``-32010`` another principal's or unknown; ``-32013`` no store, foreign
                metadata, a live owner lease; ``-32023`` nothing interrupted; and the
                ``session/new`` refusals of its workspace, manifest and tools.
        """
        await self._state.check_storage()
        self._state.quotas.check_stored(self._principal)
        principal = self._principal if self._operator else None
        if self._operator:
            # A client may also take up a conversation whose last turn ended.
            record, status = await claim_session(self._state, session_id, principal=principal)
        else:
            record, status = (
                await claim_interrupted(self._state, session_id, principal=principal),
                "interrupted",
            )
        if session_id in self._state.active_session_ids:  # its lease is live, so claiming refused it already
            raise SessionNotRestorableError("the session is live in this server")
        metadata = record.metadata
        stored_workspace, model_name = str(metadata["workspace"]), str(metadata["modelName"])
        # The workspace is resolved again: it must still exist inside the root.
        root = self._state.root
        workspace = await trio.to_thread.run_sync(
            lambda: resolve_workspace(root, os.path.relpath(stored_workspace, root))
        )
        session = await build_session(self._config, session_id, workspace, model_name, record.task_id)
        session.owns_row = False
        self._state.active_session_ids.add(session_id)
        return session, status

    def _continue_input(self, session: Session, conversation: Conversation) -> ContinueInput:
        """The kernel's continuation input for ``session`` on this connection."""
        return ContinueInput(
            session_id=session.id,
            sessions=self._state.store,
            owner_id=self.owner_id,
            lease_ms=self._config.limits.session_lease_ms,
            event_store=conversation.events,
            model=conversation.model_name,
            model_adapter=conversation.model,
            tools=session.tools,
            permission=self._permission(session),
            budget=self._budget(session, None, None),
            task_id=session.task_id,
            workspace=session.adapter,
            signal=session.abort.signal,
            now=self._timestamp,
            new_id=self._state.hooks.new_id,
            context_policy=self._config.model.context_policy,
        )

    async def _start_continuation(self, session: Session, *, resend_uncertain: bool = False) -> RunStream:
        """Take the lease and continue the interrupted turn (kernel.md §8.16); then keep the lease.

        Raises:
            AcpError: ``-32013`` when another owner took the lease first; ``-32023`` when the
                session has no interrupted turn with a valid checkpoint.
        """
        conversation = self._conversation(session, prelude=None)
        continued = replace(self._continue_input(session, conversation), resend_uncertain=resend_uncertain)
        with self._taking_lease(session):
            stream = await conversation.runtime.continue_session(continued)
        conversation.outcome = RunOutcome()
        return stream

    # ------------------------------------------------------------ session/steer

    async def steer(self, params: SteerParams) -> SteerResult:
        """``session/steer``: store ``content`` for the running turn's next model request (issue #23).

        Answered once the steering is stored and its ``session/event`` notification is queued,
        so the answer follows it on the wire.

        Raises:
            AcpError: ``-32010``; ``-32019`` when no turn runs; ``-32602`` for text the
                runtime refuses (or 1 024 steering messages already pending); ``-32022`` when
                the turn is ending.
        """
        session = self._lookup(params.session_id)
        conversation = session.conversation
        stream = None if conversation is None else conversation.stream
        if session.state != "running" or stream is None:
            raise NoRunningTurnError()
        try:
            message_id = await stream.steer(params.content)
        except InvalidRunInputError as error:
            raise InvalidParamsError(error.message) from None
        except (RunTerminalError, SteeringClosedError):
            raise SteeringRefusedError() from None
        await session.outbox.flush(self.send)
        return SteerResult(message_id=message_id)

    # ------------------------------------------------------------ events

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
            event_id=self._state.hooks.new_id("evt"),
            at=self._timestamp(),
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
        size = 0
        for item in stored:
            event = item.event
            if event.type == "permission.requested":
                permission_id: object = getattr(event.data, "permission_id", None)
                if type(permission_id) is str:
                    session.pending[permission_id] = PendingPermission()
            data = serialize_event(event)
            size += len(data)
            session.outbox.texts.append(encode_notification(session.id, item.seq, data))
        del stored
        self._state.quotas.record(session.id, self._principal, size)

    async def send(self, text: str) -> None:
        """Queue a frame unless the client has disconnected."""
        if not self.disconnected:
            await self._send(text)

    async def _await_operator(self, session: Session, request: PermissionRequest) -> PermissionResolution:
        permission_id = request.permission_id
        note = NOTE_CANCELED if session.abort.signal.aborted or session.finished else None
        if note is None and not self._operator:
            note = NOTE_NO_OPERATOR
        if note is not None:
            resolution = PermissionResolution("deny", note)
            session.resolve_pending(permission_id, resolution)
            return resolution
        pending = session.pending.get(permission_id)
        if pending is None:
            pending = session.pending[permission_id] = PendingPermission()
        with trio.move_on_after(self._config.limits.permission_timeout_ms / 1000):
            await pending.done.wait()
        if pending.resolution is None:
            session.resolve_pending(permission_id, PermissionResolution("deny", NOTE_TIMED_OUT))
        assert pending.resolution is not None
        return pending.resolution

    # ------------------------------------------------------------ permission/respond, cancel, close

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
        """``session/cancel`` (§5.4): end a ``created`` session, or cancel the running turn.

        A canceled turn leaves the session idle for a follow-up; an idle or finished session
        has nothing to cancel (``session/close`` ends a conversation).
        """
        session = self._lookup(params.session_id)
        if session.state == "created":
            session.stop(NOTE_CANCELED)
            await self._finish(session)
            return CancelResult(canceled=True)
        if session.state != "running":
            return CancelResult(canceled=False)
        session.stop(NOTE_CANCELED)
        await self._cancel_run(session)
        return CancelResult(canceled=True)

    async def close(self, params: CloseParams) -> CloseResult:
        """``session/close``: end the session (its running turn canceled first) and close its row."""
        session = self._lookup(params.session_id)
        if session.finished or session.closing:
            return CloseResult(closed=False)
        await self._end(session, NOTE_CLOSED)
        await session.done.wait()
        return CloseResult(closed=True)

    async def disconnect(self) -> None:
        """Apply the disconnect semantics (§5.5); no frame is sent afterwards."""
        self.disconnected = True
        for session in list(self._sessions.values()):
            if not session.finished:
                await self._end(session, NOTE_DISCONNECTED)

    async def _end(self, session: Session, note: str) -> None:
        """Deny, abort, and finish a waiting session (close and disconnect).

        A running session finishes when its turn returns; its adapter is disposed now, so a
        command that ignores the abort is killed rather than left running until then.
        """
        session.closing = True
        session.stop(note)
        if session.state in WAITING:
            await self._finish(session)
            return
        await self._dispose_adapter(session)
        await self._cancel_run(session)

    async def _cancel_run(self, session: Session) -> None:
        """The runtime's cancel path: return once the turn's terminal pair is durable.

        The abort signal already asked the turn to stop; this waits for (or drives) its end.
        A turn that ended otherwise, or whose pair could not be stored, is left to the
        turn's task, which answers for it.
        """
        conversation = session.conversation
        run_id = None if conversation is None else conversation.outcome.run_id
        if conversation is None or run_id is None:
            return
        try:
            await conversation.runtime.cancel(run_id)
        except AgentRuntimeError as error:
            _log.info("cancel of run %s in session %s: %s", run_id, session.id, error.message)


def _result(status: str | None, final_text: str, prompt_tokens: int, completion_tokens: int) -> PromptResult:
    """A turn's answer (§5.3 step 4): completed or failed, its final text, the session's usage."""
    return PromptResult(
        status="completed" if status == "completed" else "failed",
        events=[],
        final_text=final_text,
        usage=PromptUsage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        ),
    )


def _check_promptable(session: Session) -> None:
    if session.state == "running":
        raise SessionAlreadyRunError("a turn of this session is running; steer it or wait for its answer")
    if session.state == "finished":
        raise SessionAlreadyRunError("the session has finished")


def _smallest(first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)
