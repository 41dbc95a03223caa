"""The end of a run: its terminal pair ``turn.completed`` + ``agent.stopped`` (spec §8.8).

A run ends exactly once. Its pair carries the run's accounting (model requests, tool calls,
usage, message revision). When the pair cannot be built, a ``failed`` pair is tried once;
when that fails too, or an append fails, nothing more is written and the run ends
``failed`` with the error the consumer (or a control waiting for the end) receives.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness_kernel._gate import cut_reason as cut
from harness_kernel.events._model import AgentStatus, AgentStoppedData, Event, EventUsage, TurnCompletedData
from harness_kernel.models._types import Usage
from harness_kernel.runtime._channel import RunChannel
from harness_kernel.runtime._errors import AgentRuntimeError, EventAppendError, ModelStreamError
from harness_kernel.runtime._shared import or_unset
from harness_kernel.runtime._state import RunView

__all__ = ["Stopped", "event_usage", "record_terminal"]


@dataclass(frozen=True, slots=True)
class Stopped:
    """How the run ended: its status, and the error its consumer (or a waiting control) gets.

    ``pairless``: not even the ``failed`` pair could be built, so nothing was stored.
    """

    status: str
    error: BaseException | None
    pairless: bool = False


async def record_terminal(
    view: RunView, channel: RunChannel, status: AgentStatus, note: str | None, error: BaseException | None
) -> Stopped:
    """Append the terminal pair for ``status`` (or the ``failed`` pair); how the run ended."""
    if channel.poison is not None:
        return Stopped("failed", channel.poison)
    try:
        pair = _terminal_pair(view, channel, status, note)
    except Exception as fault:
        if isinstance(fault, AgentRuntimeError):
            error = fault
        else:
            error = ModelStreamError("terminal event construction failed")
            error.__cause__ = fault
        status, note = "failed", cut(error.message)
        try:
            pair = _terminal_pair(view, channel, status, note)
        except Exception:
            # No pair at all: the consumer gets the error, and so does a control driving
            # the end.
            return Stopped("failed", error, pairless=True)
    channel.completing_as(status)
    try:
        # No acknowledgement wait between the two (spec §8.4): one batch, one commit.
        await channel.append_batch(pair)
    except EventAppendError as poison:
        return Stopped("failed", poison)
    return Stopped(status, error)


def _terminal_pair(
    view: RunView, channel: RunChannel, status: AgentStatus, note: str | None
) -> tuple[Event, Event]:
    output_message_id = view.output_message_id if status == "completed" else None
    cut_note = None if note is None else cut(note)
    completed = TurnCompletedData(
        **channel.ids,
        status=status,
        output_message_id=or_unset(output_message_id),
        model_requests=view.model_requests,
        tool_calls=view.tool_calls,
        usage=event_usage(view.usage),
        state_version=1,
        message_revision=view.revision,
        note=or_unset(cut_note),
    )
    stopped = AgentStoppedData(
        **channel.ids,
        agent_id=view.agent_id,
        status=status,
        steps=view.model_requests,
        tool_calls=view.tool_calls,
        note=or_unset(cut_note),
    )
    return channel.event("turn.completed", completed), channel.event("agent.stopped", stopped)


def event_usage(usage: Usage) -> EventUsage:
    """The event record of a usage."""
    return EventUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )
