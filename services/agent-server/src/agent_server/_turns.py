"""One turn of a session on the kernel runtime: its events stored, then sent (spec §5.3, §6).

The server drives :class:`~harness_kernel.runtime.MinimalAgentRuntime`, the kernel's one
streaming runtime. The runtime appends every event to its event store before it delivers
it; here that store is :class:`RunEvents`, which redacts the event, stores it owner-fenced
(taking the session's ``seq``) and keeps the notification text in the session's outbox. The
prompt's task consumes the stream and sends the outbox after each event, so an event is on
the wire only after its commit, and the runtime takes its next step (for an ``ask``, the wait
for the operator) only after the event before it was sent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import trio

from harness_kernel.events import (
    AssistantMessageCompletedData,
    Event,
    EventUsage,
    TurnCompletedData,
    TurnResumedData,
    redact_value,
)
from harness_kernel.runtime import AgentRuntimeError, EventAppendError, RunStream

__all__ = ["Link", "Outbox", "RunEvents", "RunOutcome", "consume"]


class Link:
    """The connection's outbound side: frames go out until the client has disconnected.

    Args:
        send: Queues one text frame, waiting for outbound room.
    """

    def __init__(self, send: Callable[[str], Awaitable[None]]) -> None:
        self._send = send
        self.disconnected = False

    async def send(self, text: str) -> None:
        """Queue a frame unless the client has disconnected."""
        if not self.disconnected:
            await self._send(text)


@dataclass(eq=False, slots=True)
class Outbox:
    """Notification texts of stored events, in store order, waiting to be sent.

    The turn's task flushes after every event; ``session/steer`` flushes too, so its answer
    follows its ``steering.queued`` notification. Flushes never interleave: a second one waits
    for the first, so the texts go out in store order.
    """

    texts: deque[str] = field(default_factory=deque[str])
    _flushing: trio.Event | None = None

    async def flush(self, send: Callable[[str], Awaitable[None]]) -> None:
        """Send every waiting text, oldest first; one text at a time leaves the outbox before its send."""
        while self._flushing is not None:
            await self._flushing.wait()
        if not self.texts:
            return
        flushing = self._flushing = trio.Event()
        try:
            while self.texts:
                await send(self.texts.popleft())
        finally:
            self._flushing = None
            flushing.set()


class RunEvents:
    """The runtime's :class:`~harness_kernel.store.BatchEventStore` for one session, every turn.

    One object serves all the session's turns (a follow-up must use its session's very
    store). ``session.created`` (the ``prelude``) is stored together with the first events the
    runtime appends (its first turn's admission events), so a prompt's opening costs one durable
    commit; :meth:`store_prelude` stores it alone when the run appended nothing.

    Args:
        session_id: The session every event belongs to.
        record: Redacts, stores (one commit) and queues the events' texts, in order; raises
            when they were not stored.
        read: The stored events of the session (the port's reader).
        prelude: The event stored before the run's first event.
    """

    def __init__(
        self,
        session_id: str,
        record: Callable[[Sequence[Event]], Awaitable[None]],
        read: Callable[[str], AsyncIterator[Event]],
        prelude: Event | None = None,
    ) -> None:
        self._session_id = session_id
        self._record = record
        self._read = read
        self._prelude = prelude

    async def append(self, event: Event) -> None:
        """Store ``event`` (redacted) before returning.

        Raises:
            Exception: whatever the redaction or the store raised; the run is poisoned.
        """
        await self.append_many((event,))

    async def append_many(self, events: Sequence[Event]) -> None:
        """Store ``events`` (redacted) with one commit before returning, all or none.

        Raises:
            Exception: whatever the redaction or the store raised; the run is poisoned.
        """
        prelude, self._prelude = self._prelude, None
        await self._record(events if prelude is None else (prelude, *events))

    async def store_prelude(self) -> bool:
        """Store the prelude if no append has taken it yet; True when it did."""
        if self._prelude is None:
            return False
        await self.append_many(())
        return True

    def read_session(self, session_id: str) -> AsyncIterator[Event]:
        """The stored events of ``session_id`` (this run's session only)."""
        if session_id != self._session_id:
            raise ValueError("this event store holds one session")
        return self._read(session_id)


@dataclass(eq=False, slots=True)
class RunOutcome:
    """What the consumer learned from the stream: the run, the terminal status, the answer and the
    session's usage (``turn.completed`` counts every turn of the session so far)."""

    run_id: str | None = None
    status: Literal["completed", "failed", "canceled", "budget_exceeded"] | None = None
    final_text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def observe(self, event: Event) -> None:
        """Take the final text from the assistant's messages, the outcome from ``turn.completed``
        and a continued run's id from ``turn.resumed``.

        ``event`` is the runtime's own, not the redacted copy that was stored and sent: the
        final text is redacted here as that copy's content was, so the prompt's answer never
        carries what its ``session/event`` and the store do not.
        """
        data = event.data
        if isinstance(data, AssistantMessageCompletedData):
            self.final_text = str(redact_value(data.content))  # a str comes back a str
        elif isinstance(data, TurnResumedData):
            self.run_id = data.run_id
        elif isinstance(data, TurnCompletedData):
            self.status = data.status
            if isinstance(data.usage, EventUsage):
                self.prompt_tokens = data.usage.prompt_tokens
                self.completion_tokens = data.usage.completion_tokens


async def consume(
    stream: RunStream, outcome: RunOutcome, outbox: Outbox, send: Callable[[str], Awaitable[None]]
) -> RunOutcome:
    """Drive ``stream`` to its end, sending the outbox after every event; ``outcome`` observes each.

    A failed or budget-exceeded run raises its error after its terminal pair; the pair has
    already told the outcome, so that error only ends the loop. A store failure
    (:class:`EventAppendError`) propagates, after the texts stored before it were sent.
    """
    async with stream:
        try:
            async for event in stream:
                outcome.observe(event)
                del event
                await outbox.flush(send)
        except EventAppendError:
            await outbox.flush(send)
            raise
        except AgentRuntimeError:
            pass
        await outbox.flush(send)
    return outcome
