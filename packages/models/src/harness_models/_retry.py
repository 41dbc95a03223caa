"""Retries of a streamed answer: only retryable errors, only before the first frame is handed on.

A first version for the adapters to build on; the transport helper owns and refines it.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import trio

from harness_models._errors import ModelError
from harness_models._wire import RetryPolicy

__all__ = ["backoff_s", "stream_with_retries"]

T = TypeVar("T")


def backoff_s(policy: RetryPolicy, attempt: int, hint_s: float | None, rng: random.Random) -> float:
    """The wait before attempt ``attempt + 1``: full-jitter exponential backoff, or longer hint."""
    ceiling = min(policy.max_delay_s, policy.base_delay_s * (2 ** (attempt - 1)))
    wait = rng.uniform(0, ceiling)
    if hint_s is not None:
        wait = max(wait, min(hint_s, policy.max_delay_s))
    return wait


async def stream_with_retries(
    attempt: Callable[[], AsyncIterator[T]], policy: RetryPolicy, *, rng: random.Random | None = None
) -> AsyncIterator[T]:
    """Yield the items of ``attempt()``, starting it again on a retryable ``ModelError`` that
    comes before its first item, as ``policy`` allows; an error after an item was yielded, or
    the last one, propagates."""
    chooser = rng if rng is not None else random.Random()
    started = trio.current_time()
    number = 0
    while True:
        number += 1
        produced = False
        stream = attempt()
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
