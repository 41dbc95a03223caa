"""The end of a run: its terminal pair ``turn.completed`` + ``agent.stopped`` (spec §8.8).

A run ends exactly once. Its pair carries the run's accounting (model requests, tool calls,
usage, message revision). When the pair cannot be built, a ``failed`` pair is tried once;
when that fails too, or an append fails, nothing more is written and the run ends
``failed`` with the error the consumer (or a control waiting for the end) receives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_kernel._gate import cut_reason as cut
from harness_kernel.events._model import AgentStatus, AgentStoppedData, Event, EventUsage, TurnCompletedData
from harness_kernel.models._types import Usage
from harness_kernel.runtime._errors import AgentRuntimeError, EventAppendError, ModelStreamError
from harness_kernel.runtime._shared import or_unset

if TYPE_CHECKING:
    from harness_kernel.runtime._run import Run

__all__ = ["event_usage", "record_terminal"]


async def record_terminal(
    run: Run, status: AgentStatus, note: str | None, error: BaseException | None
) -> None:
    """Append the terminal pair for ``status`` (or the ``failed`` pair) and end the run."""
    if run.poison is not None:
        run.error = run.poison
        run.end("failed")
        return
    try:
        pair = _terminal_pair(run, status, note)
    except Exception as fault:
        if isinstance(fault, AgentRuntimeError):
            error = fault
        else:
            error = ModelStreamError("terminal event construction failed")
            error.__cause__ = fault
        status, note = "failed", cut(error.message)
        try:
            pair = _terminal_pair(run, status, note)
        except Exception:
            # No pair at all: the consumer gets the error, and so does a control driving
            # the end.
            run.error = run.pairless = error
            run.end("failed")
            return
    run.finishing_as = status
    run.status = "completing"
    try:
        # No acknowledgement wait between the two (spec §8.4): one batch, one commit.
        await run.append_batch(pair)
    except EventAppendError as poison:
        run.error = poison
        run.end("failed")
        return
    run.error = error
    run.end(status)


def _terminal_pair(run: Run, status: AgentStatus, note: str | None) -> tuple[Event, Event]:
    a = run.a
    output_message_id = run.output_message_id if status == "completed" else None
    cut_note = None if note is None else cut(note)
    completed = TurnCompletedData(
        **run.ids(),
        status=status,
        output_message_id=or_unset(output_message_id),
        model_requests=run.model_requests,
        tool_calls=run.tool_calls,
        usage=event_usage(run.usage),
        state_version=1,
        message_revision=run.revision,
        note=or_unset(cut_note),
    )
    stopped = AgentStoppedData(
        agent_id=run.agent_id,
        status=status,
        steps=run.model_requests,
        tool_calls=run.tool_calls,
        note=or_unset(cut_note),
        run_id=a.run_id,
        session_id=a.session_id,
        turn_id=a.turn_id,
    )
    return run.event("turn.completed", completed), run.event("agent.stopped", stopped)


def event_usage(usage: Usage) -> EventUsage:
    """The event record of a usage."""
    return EventUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )
