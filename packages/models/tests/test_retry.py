"""stream_with_retries on trio's MockClock: which errors retry, how long it waits, when it stops."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from harness_models import MODEL_BAD_REQUEST, MODEL_CONNECTION_FAILED, MODEL_RATE_LIMITED, ModelError
from harness_models._retry import backoff_s, stream_with_retries
from harness_models._wire import RetryPolicy

POLICY = RetryPolicy(max_attempts=4, base_delay_s=1.0, max_delay_s=8.0, max_total_s=100.0)


def retryable(hint: float | None = None) -> ModelError:
    return ModelError(MODEL_RATE_LIMITED, "slow down", retryable=True, retry_after_s=hint)


class Script:
    """Attempts that fail with the given errors, then yield ``items``; records start times and closes."""

    def __init__(self, errors: list[ModelError], items: tuple[str, ...] = ("a", "b")) -> None:
        self.errors = errors
        self.items = items
        self.started: list[float] = []
        self.closed = 0

    async def attempt(self) -> AsyncIterator[str]:
        self.started.append(trio.current_time())
        try:
            if len(self.started) <= len(self.errors):
                raise self.errors[len(self.started) - 1]
            for item in self.items:
                yield item
        finally:
            self.closed += 1


async def run(script: Script | Callable[[], AsyncIterator[str]], policy: RetryPolicy = POLICY) -> list[str]:
    attempt = script.attempt if isinstance(script, Script) else script
    return [item async for item in stream_with_retries(attempt, policy, rng=random.Random(7))]


async def test_retryable_errors_before_the_first_item_are_retried_after_the_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Script([retryable(), retryable()])
    assert await run(script) == ["a", "b"]
    rng = random.Random(7)
    waits = [backoff_s(POLICY, 1, None, rng), backoff_s(POLICY, 2, None, rng)]
    gaps = [later - earlier for earlier, later in zip(script.started, script.started[1:], strict=False)]
    assert gaps == pytest.approx(waits)
    assert 0 <= waits[0] <= 1.0
    assert 0 <= waits[1] <= 2.0
    assert script.closed == 3  # every attempt's stream was closed


async def test_an_error_after_an_item_was_yielded_is_never_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls = 0

    async def attempt() -> AsyncIterator[str]:
        nonlocal calls
        calls += 1
        yield "partial"
        raise ModelError(MODEL_CONNECTION_FAILED, "dropped", retryable=True)

    seen: list[str] = []

    async def consume() -> None:
        async for item in stream_with_retries(attempt, POLICY):
            seen.append(item)

    with pytest.raises(ModelError) as caught:
        await consume()
    assert (seen, calls, caught.value.code) == (["partial"], 1, MODEL_CONNECTION_FAILED)


async def test_a_non_retryable_error_propagates_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Script([ModelError(MODEL_BAD_REQUEST, "no")])
    with pytest.raises(ModelError) as caught:
        await run(script)
    assert caught.value.code == MODEL_BAD_REQUEST
    assert len(script.started) == 1


async def test_attempts_stop_at_max_attempts_with_the_last_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    errors = [retryable(), retryable(), retryable(), ModelError(MODEL_RATE_LIMITED, "last", retryable=True)]
    script = Script([*errors, retryable()])
    with pytest.raises(ModelError, match="last"):
        await run(script)
    assert len(script.started) == POLICY.max_attempts


async def test_no_attempt_starts_when_the_wait_would_pass_the_total_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    policy = RetryPolicy(max_attempts=10, base_delay_s=1.0, max_delay_s=8.0, max_total_s=10.0)
    script = Script([retryable(hint=6.0)] * 9)
    with pytest.raises(ModelError):
        await run(script, policy)
    # 6 s after the first failure the second attempt runs; another 6 s would end at 12 > 10.
    assert script.started == pytest.approx([0.0, 6.0])


async def test_a_longer_provider_hint_wins_but_is_bounded_by_max_delay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Script([retryable(hint=5.0), retryable(hint=1000.0)])
    assert await run(script) == ["a", "b"]
    assert script.started == pytest.approx([0.0, 5.0, 13.0])


async def test_cancelling_during_a_backoff_wait_ends_it_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Script([retryable(hint=8.0)])
    with trio.move_on_after(1.5):
        await run(script)
    assert trio.current_time() == pytest.approx(1.5)
    assert len(script.started) == 1


async def test_leaving_early_closes_the_running_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Script([], items=("a", "b", "c"))
    stream = stream_with_retries(script.attempt, POLICY)
    assert await anext(stream) == "a"
    await stream.aclose()
    assert script.closed == 1


@given(
    attempt=st.integers(min_value=1, max_value=30),
    hint=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_a_wait_stays_within_the_ceiling_and_honours_a_usable_hint(
    attempt: int, hint: float | None, seed: int
) -> None:
    wait = backoff_s(POLICY, attempt, hint, random.Random(seed))
    assert 0.0 <= wait <= POLICY.max_delay_s
    if hint is not None and 0 <= hint < float("inf"):
        assert wait >= min(hint, POLICY.max_delay_s)
