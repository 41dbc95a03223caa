"""Admitting a session (spec §5.1, §5.3; decision 058): who may open, take up and prompt which session.

:class:`Admission` counts a connection's sessions against its, the server's and the
principal's caps and checks free disk space and stored bytes before any work; the session
itself (workspace, manifest, tools, adapter) is built by ``agent_server._session_build``.
"""

from __future__ import annotations

import os

import trio

from agent_server._conversation import Session
from agent_server._errors import (
    InvalidParamsError,
    SessionAlreadyRunError,
    SessionLimitError,
    SessionNotRestorableError,
)
from agent_server._protocol import NewSessionParams
from agent_server._restore import claim_interrupted, claim_session
from agent_server._session_build import build_session, resolve_workspace
from agent_server._state import ServerState

__all__ = ["Admission"]


class Admission:
    """Who may open, take up and prompt which session on one connection (spec §5.1, §5.3).

    A slot is counted for the connection, the server and the principal (decision 058) before
    the first ``await``, so pipelined requests cannot overrun a cap; an admission that fails
    gives every slot back.

    Args:
        state: The server-wide state.
        principal: The connection's principal.
        operator: Whether a client can answer permission requests; without one (a session
            continued at server start) only an interrupted session may be taken up.
    """

    def __init__(self, state: ServerState, *, principal: str, operator: bool) -> None:
        self._state = state
        self._config = state.config
        self._principal = principal
        self._operator = operator
        self._created = 0

    def _take_slot(self) -> None:
        """Count one session of this connection, take a server-wide slot and one of the principal's.

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

    def give_back_slot(self) -> None:
        """Give back the slots of a session that was admitted but could not be opened."""
        self._created -= 1
        self._state.release_session()
        self._state.quotas.release(self._principal)

    async def admit(self, params: NewSessionParams) -> Session:
        """Check and build one session, its id active (steps 1 to 6 of §5.1); its row is not made yet.

        Raises:
            AcpError: a cap, full storage, the principal's bytes, an unknown workspace or
                model, a refused manifest or tool, an unavailable sandbox.
        """
        self._take_slot()
        try:
            await self._state.check_storage()
            self._state.quotas.check_stored(self._principal)
            workspace = await trio.to_thread.run_sync(resolve_workspace, self._state.root, params.workspace)
            model_name = params.model if params.model is not None else self._config.model.chosen_default_model
            if model_name is None or model_name not in self._config.model.models:
                raise InvalidParamsError("unknown model")
            session_id = self._state.hooks.new_id("sess")
            if session_id in self._state.active_session_ids:
                raise RuntimeError("session id collision")
            session = await build_session(self._config, session_id, workspace, model_name, params.task_id)
        except BaseException:
            self.give_back_slot()
            raise
        self._state.active_session_ids.add(session_id)
        return session

    async def claim(self, session_id: str) -> tuple[Session, str]:
        """Check that the session is this principal's and may be taken up, then rebuild it here.

        The status is ``"interrupted"`` (its turn is continued) or ``"completed"`` (it joins
        idle); without an operator only an interrupted session is claimed.

        Raises:
            AcpError: ``-32010`` another principal's or unknown; ``-32013`` no store, foreign
                metadata, a live owner lease; ``-32023`` nothing interrupted; and the
                ``session/new`` refusals of its workspace, manifest and tools.
        """
        self._take_slot()
        try:
            session, status = await self._claim(session_id)
        except BaseException:
            self.give_back_slot()
            raise
        self._state.active_session_ids.add(session_id)
        return session, status

    async def _claim(self, session_id: str) -> tuple[Session, str]:
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
        return session, status

    async def check_prompt(self, session: Session) -> None:
        """Whether ``session`` may run a turn now: not running or finished, storage and bytes left.

        Raises:
            AcpError: ``-32011`` while a turn runs or once finished; ``-32015``; ``-32024``.
        """
        _check_promptable(session)
        await self._state.check_storage()
        self._state.quotas.check_stored(self._principal)
        _check_promptable(session)  # a concurrent prompt, a close or the idle timer came first

    def withdraw(self, session: Session) -> None:
        """Drop the id of a session that could not be opened (its slots go back separately)."""
        self._state.active_session_ids.discard(session.id)

    def release(self, session: Session) -> None:
        """Drop a finished session's id from the active set and give back its slot."""
        self._state.active_session_ids.discard(session.id)
        self._state.release_session()
        self._state.quotas.release(self._principal)
        session.done.set()


def _check_promptable(session: Session) -> None:
    if session.state == "running":
        raise SessionAlreadyRunError("a turn of this session is running; steer it or wait for its answer")
    if session.state == "finished":
        raise SessionAlreadyRunError("the session has finished")
