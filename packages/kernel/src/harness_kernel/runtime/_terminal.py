"""The end of a run: its terminal pair ``turn.completed`` + ``agent.stopped`` (spec §8.8).

A run ends exactly once. Its pair carries the run's accounting (model requests, tool calls,
usage, message revision). When the pair cannot be built, a ``failed`` pair is tried once;
when that fails too, or an append fails, nothing more is written and the run ends
``failed`` with the error the consumer (or a control waiting for the end) receives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_kernel.events._model import Event
from harness_kernel.models._types import Usage
from harness_kernel.runtime._errors import AgentRuntimeError, EventAppendError, ModelStreamError
from harness_kernel.runtime._shared import cut

if TYPE_CHECKING:
    from harness_kernel.runtime._run import Run

__all__ = ["record_terminal", "usage_data"]


async def record_terminal(run: Run, status: str, note: str | None, error: BaseException | None) -> None:
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
        for event in pair:
            await run.append(event)
            run.enqueue(event)
    except EventAppendError as poison:
        run.error = poison
        run.end("failed")
        return
    run.error = error
    run.end(status)


def _terminal_pair(run: Run, status: str, note: str | None) -> tuple[Event, Event]:
    a = run.a
    completed: dict[str, object] = {**run.ids(), "status": status}
    if status == "completed" and run.output_message_id is not None:
        completed["outputMessageId"] = run.output_message_id
    completed |= {
        "modelRequests": run.model_requests,
        "toolCalls": run.tool_calls,
        "usage": usage_data(run.usage),
        "stateVersion": 1,
        "messageRevision": run.revision,
    }
    stopped: dict[str, object] = {
        "agentId": run.agent_id,
        "status": status,
        "steps": run.model_requests,
        "toolCalls": run.tool_calls,
    }
    if note is not None:
        completed["note"] = cut(note)
        stopped["note"] = cut(note)
    stopped |= {"runId": a.run_id, "sessionId": a.session_id, "turnId": a.turn_id}
    return run.event("turn.completed", completed), run.event("agent.stopped", stopped)


def usage_data(usage: Usage) -> dict[str, object]:
    """The wire form of a usage record."""
    return {
        "promptTokens": usage.prompt_tokens,
        "completionTokens": usage.completion_tokens,
        "totalTokens": usage.total_tokens,
    }
