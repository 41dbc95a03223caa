"""The operator's side of a session's permission requests (spec §5.3 step 3, §7).

A session's permission controller applies its manifest's rules (every action ``ask`` without
one) and hands each ``ask`` to the operator: the client that answers with
``permission/respond``, within ``permission_timeout_ms``. Without an operator (a session
continued at server start), or once the turn is aborted, an ask is denied at once.
"""

from __future__ import annotations

from typing import Final

import trio

from agent_server._config import ServerConfig
from agent_server._conversation import NOTE_CANCELED, PendingPermission, Session
from agent_server._errors import PermissionNotFoundError, PermissionResolvedError
from agent_server._protocol import PermissionRespondParams, PermissionRespondResult
from harness_exit_gate.manifest import manifest_permissions
from harness_kernel.policy import PermissionRequest, PermissionResolution, RulePermissionController
from harness_workspace import AbortSignal

__all__ = ["Operator"]

NOTE_TIMED_OUT: Final = "permission request timed out"
NOTE_NO_OPERATOR: Final = "no operator is connected: the turn was continued at server start"


class Operator:
    """Asks the connection's client about a session's permission requests and takes its answers.

    Args:
        config: The server's configuration (``permission_timeout_ms``).
        present: Whether a client can answer; without one every ask is denied at once.
    """

    def __init__(self, config: ServerConfig, *, present: bool) -> None:
        self._config = config
        self._present = present

    def controller(self, session: Session) -> RulePermissionController:
        """§5.3 step 3: the manifest's rules (every action ``ask`` without one), asks to the operator."""
        permissions = manifest_permissions(session.manifest) if session.manifest is not None else None

        async def resolve(request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
            return await self._ask(session, request)

        return RulePermissionController(permissions, resolve=resolve)

    async def _ask(self, session: Session, request: PermissionRequest) -> PermissionResolution:
        permission_id = request.permission_id
        note = NOTE_CANCELED if session.abort.signal.aborted or session.finished else None
        if note is None and not self._present:
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

    @staticmethod
    def respond(session: Session, params: PermissionRespondParams) -> PermissionRespondResult:
        """``permission/respond`` (§7): settle the session's pending ask with the client's decision.

        Raises:
            AcpError: ``-32021`` for an ask already answered, ``-32020`` for an unknown one.
        """
        if params.permission_id in session.pending:
            session.resolve_pending(params.permission_id, PermissionResolution(params.decision, params.note))
            return PermissionRespondResult(accepted=True)
        if params.permission_id in session.resolved:
            raise PermissionResolvedError()
        raise PermissionNotFoundError()
