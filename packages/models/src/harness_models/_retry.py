"""Retries of a streamed answer: only retryable errors, only before the first item is handed on.

Once an item left this generator the runtime may have shown or recorded it, so a later
failure propagates as it is: a second attempt would repeat output. The waits are
full-jitter exponential backoff ("AWS Architecture Blog: Exponential Backoff and Jitter"):
uniform in ``[0, min(max_delay, base * 2**(n-1))]``; a provider's ``Retry-After`` wins when
it is longer, but never beyond ``max_delay_s``. No attempt starts after ``max_total_s``.
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Final, TypeVar, cast

import trio

from harness_kernel.models import abort_reason_error
from harness_models._errors import ModelError
from harness_models._wire import RetryPolicy
from harness_workspace import AbortSignal, move_on_abort

__all__ = ["backoff_s", "retried_until_aborted", "stream_with_retries"]

T = TypeVar("T")

_END: Final = object()


def backoff_s(policy: RetryPolicy, attempt: int, hint_s: float | None, rng: random.Random) -> float:
    """The wait after failed attempt number ``attempt`` (1-based).

    Args:
        policy: The retry policy.
        attempt: Which attempt just failed.
        hint_s: The provider's wait hint; ignored unless a finite number of seconds >= 0.
        rng: The source of jitter (seeded in tests).
    """
    ceiling = min(policy.max_delay_s, policy.base_delay_s * 2.0 ** min(attempt - 1, 64))
    wait = rng.uniform(0.0, ceiling)
    if hint_s is not None and math.isfinite(hint_s) and hint_s > wait:
        wait = min(hint_s, policy.max_delay_s)
    return max(wait, 0.0)


async def stream_with_retries(
    attempt: Callable[[], AsyncIterator[T]], policy: RetryPolicy, *, rng: random.Random | None = None
) -> AsyncGenerator[T, None]:
    """Yield the items of ``attempt()``, starting it again after a retryable error.

    A :class:`~harness_models.ModelError` with ``retryable`` set that comes before the first
    item starts a new attempt after :func:`backoff_s`, while attempts and total time last.
    Every other error, an error after an item was yielded, and the last error propagate
    unchanged. Each attempt's iterator is closed before the wait (so its connection is not
    held while sleeping); a cancellation during the wait ends it at once.

    Args:
        attempt: Starts one attempt (an async generator function qualifies).
        policy: Attempts, delays and the total time budget.
        rng: The source of jitter; a fresh ``random.Random()`` by default.
    """
    chooser = rng if rng is not None else random.Random()
    started = trio.current_time()
    number = 0
    while True:
        number += 1
        stream = attempt()
        produced = False
        try:
            async for item in stream:
                produced = True
                yield item
            return
        except ModelError as error:
            if produced or not error.retryable or number >= policy.max_attempts:
                raise
            wait = backoff_s(policy, number, error.retry_after_s, chooser)
            if trio.current_time() - started + wait > policy.max_total_s:
                raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        await trio.sleep(wait)


async def retried_until_aborted(
    attempt: Callable[[], AsyncIterator[T]], policy: RetryPolicy, signal: AbortSignal | None
) -> AsyncGenerator[T, None]:
    """:func:`stream_with_retries`, each pull of which ``signal`` can cancel (the open, a read,
    a backoff wait) — never a ``yield``, so no cancel scope is held while the consumer runs.

    Raises:
        BaseException: the signal's reason when it aborts a pull; the retries' own errors.
    """
    async with aclosing(stream_with_retries(attempt, policy)) as items:
        while True:
            item: object = _END
            if signal is None:
                item = await anext(items, _END)
            else:
                pulled = False
                with move_on_abort(signal):
                    item = await anext(items, _END)
                    pulled = True
                if not pulled:
                    raise abort_reason_error(signal.reason)
            if item is _END:
                return
            yield cast("T", item)
