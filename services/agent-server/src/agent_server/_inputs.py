"""What a session's turns run on: its conversation with the kernel runtime and each turn's input.

The conversation (one runtime, one event store, one model) is made at the session's first turn
and kept across its turns (kernel.md §8.14). A prompt's :class:`~harness_kernel.runtime.RunInput`
and a continuation's :class:`~harness_kernel.runtime.ContinueInput` carry the same session
parts: its tools, its permission controller, its budget, its workspace adapter, its abort.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from agent_server._conversation import Conversation, Session
from agent_server._operator import Operator
from agent_server._protocol import PromptParams
from agent_server._recording import Recorder
from agent_server._state import ServerState
from agent_server._turns import RunEvents
from harness_kernel.models import ModelAdapter, adapt_model
from harness_kernel.policy import RulePermissionController
from harness_kernel.runtime import ContextPolicy, ContinueInput, RunInput, RuntimeBudget
from harness_sandbox import SandboxWorkspace
from harness_tools import ToolRegistry
from harness_workspace import AbortSignal
from harness_workspace.local import LocalWorkspace

__all__ = ["TurnInputs"]


class TurnInputs:
    """Makes a session's conversation and the runtime's input for each of its turns.

    Args:
        state: The server-wide state (configuration and store).
        recorder: Stores the session's events; the conversation's event store writes through it.
        operator: Answers the session's permission asks.
        owner_id: The connection's lease owner id, with which a continuation takes the lease.
    """

    def __init__(self, state: ServerState, recorder: Recorder, operator: Operator, *, owner_id: str) -> None:
        self._state = state
        self._config = state.config
        self._recorder = recorder
        self._operator = operator
        self._owner_id = owner_id

    def conversation(self, session: Session, *, prompted: bool) -> Conversation:
        """The session's conversation, made at its first turn.

        A prompt's first turn stores ``session.created`` with its first events; a session
        taken up or continued was created before.
        """
        prelude = self._recorder.created_event(session) if prompted else None
        if session.conversation is not None:
            return session.conversation
        model = self._config.model.models[session.model_name]()
        # A one-shot model names itself in the audit trail; a streaming adapter goes by its
        # configured name.
        name: object = getattr(model, "name", None)
        session.conversation = Conversation(
            runtime=self._state.hooks.runtime(),
            events=self._recorder.run_events(session, prelude=prelude),
            model=adapt_model(model),
            model_name=name if type(name) is str and name else session.model_name,
        )
        return session.conversation

    def run_input(self, session: Session, conversation: Conversation, params: PromptParams) -> RunInput:
        """The input of a prompt's turn: new run and turn ids, the prompt's content and limits."""
        budget = _budget(session, params.max_model_tokens, params.max_tool_calls)
        return RunInput(
            run_id=self._state.hooks.new_id("run"),
            session_id=session.id,
            turn_id=self._state.hooks.new_id("turn"),
            input=params.content,
            **self._parts(session, conversation, budget),
            checkpoints=True,
        )

    def continue_input(
        self, session: Session, conversation: Conversation, *, resend_uncertain: bool = False
    ) -> ContinueInput:
        """The kernel's continuation input for ``session``, which takes its lease for this connection."""
        return ContinueInput(
            session_id=session.id,
            sessions=self._state.store,
            owner_id=self._owner_id,
            lease_ms=self._config.limits.session_lease_ms,
            **self._parts(session, conversation, _budget(session, None, None)),
            resend_uncertain=resend_uncertain,
        )

    def _parts(self, session: Session, conversation: Conversation, budget: RuntimeBudget) -> _SessionParts:
        """What every turn of ``session`` runs with, whether prompted or continued."""
        return _SessionParts(
            model=conversation.model_name,
            model_adapter=conversation.model,
            event_store=conversation.events,
            tools=session.tools,
            permission=self._operator.controller(session),
            budget=budget,
            task_id=session.task_id,
            workspace=session.adapter,
            signal=session.abort.signal,
            now=self._recorder.timestamp,
            new_id=self._state.hooks.new_id,
            context_policy=self._config.model.context_policy,
        )


class _SessionParts(TypedDict):
    """The fields :class:`RunInput` and :class:`ContinueInput` share, as a session supplies them."""

    model: str
    model_adapter: ModelAdapter
    event_store: RunEvents
    tools: ToolRegistry
    permission: RulePermissionController
    budget: RuntimeBudget
    task_id: str | None
    workspace: LocalWorkspace | SandboxWorkspace | None
    signal: AbortSignal
    now: Callable[[], str]
    new_id: Callable[[str], str]
    context_policy: ContextPolicy | None


def _budget(session: Session, max_model_tokens: int | None, max_tool_calls: int | None) -> RuntimeBudget:
    """Each limit is the smaller of the request's and the manifest's (``max_model_tokens``
    bounds the whole session: a follow-up inherits its usage)."""
    limits = session.manifest.budget if session.manifest is not None else None
    return RuntimeBudget(
        max_model_tokens=_smallest(max_model_tokens, limits and limits.max_model_tokens),
        max_tool_calls=_smallest(max_tool_calls, limits and limits.max_tool_calls),
    )


def _smallest(first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)
