"""What a streamed chunk costs through each model adapter, against a raw read of the same stream.

Run by hand (it is not a test):
``uv run python benchmarks/model_stream.py [--rounds R] [--chunks 5000,20000] [--profile]``.

For each provider wire (OpenAI Chat Completions, Anthropic Messages) and each stream length
N, a loopback HTTP/1.1 server on 127.0.0.1 (started by this script, in the same trio run)
answers with a wire-exact stream of N text deltas: for OpenAI the role chunk, one
``data: {chat.completion.chunk}`` per delta, the finish chunk, the usage chunk and
``data: [DONE]``; for Anthropic ``message_start``, ``content_block_start``, a ``ping``, one
``content_block_delta`` event per delta, ``content_block_stop``, ``message_delta`` and
``message_stop``. Every SSE event is its own HTTP chunk (``Transfer-Encoding: chunked``), as
a provider flushing each event sends it. In the same run it times:

- ``raw``: ``httpx.AsyncClient.stream("POST", ...)`` and ``Response.aiter_bytes()`` over the
  whole body, the baseline (h11 hands on one piece per HTTP chunk, so this is one iteration
  per event, and one more where an event straddles a 64 KiB socket read);
- ``raw+scope`` and ``raw+sse``: the raw read with one of the transport's two per-read costs
  added, to show where the transport's time goes: each read under its own
  ``trio.move_on_at`` (the transport's whole-attempt deadline), or each piece fed to the
  public ``SseParser``;
- ``transport``: ``HttpSseTransport.stream(...)`` iterating its ``SseEvent``\\ s;
- ``adapter``: ``OpenAIChatModel.stream`` / ``AnthropicModel.stream`` yielding frames (on an
  ``HttpSseTransport``), the N ``TextDeltaFrame``\\ s and the completion checked.

The server is written here rather than taken from the tests' ``fake_provider``: that one
writes each chunk with its own ``send_all`` in the same trio run, and that per-chunk cost
would land on all three variants alike and flatter the ratios. This server frames the whole
answer beforehand and writes it at once, so a timing is (nearly) the client's work alone.
Each request opens a new connection (the server closes it), for every variant alike.

Per variant: µs per chunk (N = the text deltas) and chunks/s, best round and median; the
ratio against raw (the target for the adapter is at most 1.5x raw); and the time from the
request's start to the first byte (raw), first event (transport) and first text frame
(adapter), with the adapter's difference to raw. The variants' order rotates round by round,
so drift hits them alike. The machine these figures come from has 2 cores shared with other
work: expect them to move by ±20 % from one run to the next. Nothing is asserted beyond the
stream's content.

``--profile`` then runs cProfile over one adapter stream per provider (the largest N) and
prints the functions with the most own time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import h11
import httpx
import msgspec
import trio

from harness_kernel.models import (
    ModelAdapter,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    TextDeltaFrame,
    UserMessage,
)
from harness_models import AnthropicModel, ApiKey, HttpSseTransport, OpenAIChatModel, SseParser, Timeouts

VARIANTS: Final = ("raw", "raw+scope", "raw+sse", "transport", "adapter")
KEY: Final = "sk-bench-0123456789abcdef"
# Short pieces, as a model streams them (a token or two each).
PIECES: Final = (" the", " quick", " brown", " fox", " jumps", " over", " a", " lazy", " dog", ".")
REQUEST: Final = ModelRequest(messages=(UserMessage(content="hi"),))


def _event(data: str, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {data}\n\n".encode()


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def openai_events(chunks: int) -> list[bytes]:
    """A Chat Completions text stream with ``chunks`` content deltas, as OpenAI sends it."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        return _event(
            _json(
                {
                    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
                    "object": "chat.completion.chunk",
                    "created": 1741569952,
                    "model": "gpt-4.1-2025-04-14",
                    "service_tier": "default",
                    "system_fingerprint": "fp_a1102cf978",
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                }
            )
        )

    usage = {"prompt_tokens": 9, "completion_tokens": chunks, "total_tokens": 9 + chunks}
    last: dict[str, object] = {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": "gpt-4.1-2025-04-14",
        "choices": [],
        "usage": usage,
    }
    return [
        chunk({"role": "assistant", "content": "", "refusal": None}),
        *(chunk({"content": PIECES[index % len(PIECES)]}) for index in range(chunks)),
        chunk({}, "stop"),
        _event(_json(last)),
        _event("[DONE]"),
    ]


def anthropic_events(chunks: int) -> list[bytes]:
    """A Messages text stream with ``chunks`` ``text_delta``\\ s, in Anthropic's event framing."""

    def event(kind: str, **fields: object) -> bytes:
        return _event(_json({"type": kind, **fields}), kind)

    message: dict[str, object] = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-test",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 9, "output_tokens": 1},
    }
    return [
        event("message_start", message=message),
        event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        event("ping"),
        *(
            event(
                "content_block_delta", index=0, delta={"type": "text_delta", "text": PIECES[n % len(PIECES)]}
            )
            for n in range(chunks)
        ),
        event("content_block_stop", index=0),
        event(
            "message_delta",
            delta={"stop_reason": "end_turn", "stop_sequence": None},
            usage={"output_tokens": chunks},
        ),
        event("message_stop"),
    ]


@dataclass(frozen=True)
class Answer:
    """One scripted stream: its events, and the chunked HTTP response that carries them."""

    events: list[bytes]
    response: bytes

    @classmethod
    def of(cls, events: list[bytes]) -> Answer:
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        body = b"".join(b"%x\r\n%s\r\n" % (len(event), event) for event in events)
        return cls(events, head + body + b"0\r\n\r\n")


class LoopbackProvider:
    """An HTTP/1.1 server on 127.0.0.1 answering each path with its scripted stream at once."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.answers: dict[str, Answer] = {}

    async def serve(self, stream: trio.SocketStream) -> None:
        try:
            path = await _request_path(stream)
            answer = self.answers.get(path) if path is not None else None
            if answer is not None:
                await stream.send_all(answer.response)
            else:
                await stream.send_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        except (trio.BrokenResourceError, h11.ProtocolError):
            pass  # a client that hung up early has its own error to report
        finally:
            await stream.aclose()


async def _request_path(stream: trio.SocketStream) -> str | None:
    """Read one request to its end (h11 parses it) and return its path."""
    parser = h11.Connection(h11.SERVER)
    path: str | None = None
    while True:
        event = parser.next_event()
        if event is h11.NEED_DATA:
            parser.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Request):
            path = event.target.decode()
        elif isinstance(event, h11.EndOfMessage):
            return path
        elif isinstance(event, h11.ConnectionClosed):
            return None


@dataclass(frozen=True)
class Sample:
    total_s: float
    first_s: float


class Clock:
    """When a run started and when its first item came."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first: float | None = None

    def mark(self) -> None:
        if self.first is None:
            self.first = time.perf_counter()

    def sample(self) -> Sample:
        ended = time.perf_counter()
        return Sample(ended - self.started, (self.first or ended) - self.started)


@dataclass(frozen=True)
class Wire:
    """One provider's endpoint, request and adapter, and how to build its stream."""

    name: str
    path: str
    headers: dict[str, str]
    events: Callable[[int], list[bytes]]
    adapter: Callable[[str, HttpSseTransport], ModelAdapter]


WIRES: Final = (
    Wire(
        "openai",
        "/v1/chat/completions",
        {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json", "Accept": "text/event-stream"},
        openai_events,
        lambda url, transport: OpenAIChatModel(
            "gpt-bench", api_key=ApiKey(KEY), base_url=url + "/v1", transport=transport
        ),
    ),
    Wire(
        "anthropic",
        "/v1/messages",
        {
            "x-api-key": KEY,
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
            "accept": "text/event-stream",
        },
        anthropic_events,
        lambda url, transport: AnthropicModel(
            "claude-bench", api_key=ApiKey(KEY), base_url=url, transport=transport
        ),
    ),
)
BODY: Final = msgspec.json.encode(
    {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
)


class Runner:
    """The three ways to read one stream, each checking it read everything."""

    def __init__(
        self, url: str, wire: Wire, chunks: int, client: httpx.AsyncClient, transport: HttpSseTransport
    ) -> None:
        self.url = url + wire.path
        self.wire = wire
        self.chunks = chunks
        self.answer = Answer.of(wire.events(chunks))
        self.client = client
        self.transport = transport
        self.model = wire.adapter(url, transport)

    async def raw(self) -> Sample:
        clock = Clock()
        size = pieces = 0
        async with self.client.stream("POST", self.url, headers=self.wire.headers, content=BODY) as response:
            async for piece in response.aiter_bytes():
                clock.mark()
                size += len(piece)
                pieces += 1
        sample = clock.sample()
        expected = sum(len(event) for event in self.answer.events)
        # h11 hands on one piece per HTTP chunk, split in two where a chunk straddles a read.
        if size != expected or pieces < len(self.answer.events):
            raise SystemExit(
                f"raw read {size} bytes in {pieces} pieces, expected {expected} in one per event"
            )
        return sample

    async def raw_scoped(self) -> Sample:
        """The raw read with each read under its own ``trio.move_on_at`` (as the transport reads)."""
        clock = Clock()
        deadline = trio.current_time() + 600.0
        pieces = 0
        async with self.client.stream("POST", self.url, headers=self.wire.headers, content=BODY) as response:
            chunks = response.aiter_bytes()
            while True:
                piece: bytes | None = None
                with trio.move_on_at(deadline):
                    piece = await anext(chunks, None)
                if piece is None:
                    break
                clock.mark()
                pieces += 1
        sample = clock.sample()
        if pieces < len(self.answer.events):
            raise SystemExit(f"raw+scope read {pieces} pieces for {len(self.answer.events)} events")
        return sample

    async def raw_parsed(self) -> Sample:
        """The raw read with each piece fed to the public ``SseParser`` (as the transport parses)."""
        clock = Clock()
        parser = SseParser()
        count = 0
        async with self.client.stream("POST", self.url, headers=self.wire.headers, content=BODY) as response:
            async for piece in response.aiter_bytes():
                for _ in parser.feed(piece):
                    clock.mark()
                    count += 1
        sample = clock.sample()
        if count != len(self.answer.events):
            raise SystemExit(f"raw+sse parsed {count} events, expected {len(self.answer.events)}")
        return sample

    async def transport_events(self) -> Sample:
        clock = Clock()
        count = 0
        async with self.transport.stream(self.url, headers=self.wire.headers, body=BODY) as events:
            async for _ in events:
                clock.mark()
                count += 1
        sample = clock.sample()
        if count != len(self.answer.events):
            raise SystemExit(f"transport read {count} events, expected {len(self.answer.events)}")
        return sample

    async def adapter(self) -> Sample:
        clock = Clock()
        texts = 0
        last: ModelEvent | None = None
        async for frame in self.model.stream(REQUEST):
            if type(frame) is TextDeltaFrame:
                clock.mark()  # the first text, what a user waits for
                texts += 1
            last = frame
        sample = clock.sample()
        if texts != self.chunks or type(last) is not ResponseCompletedFrame:
            raise SystemExit(f"{self.wire.name}: {texts} text frames for {self.chunks} deltas, last {last!r}")
        return sample


@dataclass(frozen=True)
class Result:
    samples: dict[str, list[Sample]]

    def per_chunk_us(self, variant: str, chunks: int, pick: Callable[[list[float]], float]) -> float:
        return pick([sample.total_s for sample in self.samples[variant]]) / chunks * 1e6

    def first_ms(self, variant: str, pick: Callable[[list[float]], float]) -> float:
        return pick([sample.first_s for sample in self.samples[variant]]) * 1e3


async def measure(wire: Wire, chunks: int, rounds: int) -> Result:
    """Best and median of each variant over ``rounds`` rounds (after one warm-up round)."""
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        server = LoopbackProvider(listeners[0].socket.getsockname()[1])
        await nursery.start(trio.serve_listeners, server.serve, listeners)
        async with (
            httpx.AsyncClient(follow_redirects=False) as client,
            HttpSseTransport(Timeouts()) as transport,
        ):
            runner = Runner(server.url, wire, chunks, client, transport)
            server.answers[wire.path] = runner.answer
            runs = {
                "raw": runner.raw,
                "raw+scope": runner.raw_scoped,
                "raw+sse": runner.raw_parsed,
                "transport": runner.transport_events,
                "adapter": runner.adapter,
            }
            for run in runs.values():  # warm-up: imports, caches, the first connection
                await run()
            samples: dict[str, list[Sample]] = {variant: [] for variant in VARIANTS}
            for round_number in range(rounds):
                shift = round_number % len(VARIANTS)
                for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                    gc.collect()  # each sample starts from a collected heap, not the last one's garbage
                    samples[variant].append(await runs[variant]())
        nursery.cancel_scope.cancel()
    return Result(samples)


def print_rows(wire: Wire, chunks: int, result: Result) -> None:
    raw_best = result.per_chunk_us("raw", chunks, min)
    raw_median = result.per_chunk_us("raw", chunks, statistics.median)
    for variant in VARIANTS:
        best = result.per_chunk_us(variant, chunks, min)
        median = result.per_chunk_us(variant, chunks, statistics.median)
        print(
            f"{wire.name:<10}{chunks:>7}  {variant:<10}{best:>9.2f}{median:>11.2f}{1e6 / best:>12,.0f}"
            f"{best / raw_best:>9.2f}x{median / raw_median:>9.2f}x"
        )


def print_first(wire: Wire, chunks: int, result: Result) -> None:
    best = {variant: result.first_ms(variant, min) for variant in VARIANTS}
    median = {variant: result.first_ms(variant, statistics.median) for variant in VARIANTS}
    print(
        f"{wire.name:<10}{chunks:>7}  {best['raw']:>8.3f}{best['transport']:>10.3f}{best['adapter']:>10.3f}"
        f"{best['adapter'] - best['raw']:>+10.3f}   {median['raw']:>8.3f}{median['transport']:>10.3f}"
        f"{median['adapter']:>10.3f}{median['adapter'] - median['raw']:>+10.3f}"
    )


def profile(wire: Wire, chunks: int, top: int) -> None:
    """cProfile over one adapter stream (after a warm-up), the top functions by own time."""
    profiler = cProfile.Profile()

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            server = LoopbackProvider(listeners[0].socket.getsockname()[1])
            await nursery.start(trio.serve_listeners, server.serve, listeners)
            async with httpx.AsyncClient() as client, HttpSseTransport(Timeouts()) as transport:
                runner = Runner(server.url, wire, chunks, client, transport)
                server.answers[wire.path] = runner.answer
                await runner.adapter()
                gc.collect()
                profiler.enable()
                await runner.adapter()
                profiler.disable()
            nursery.cancel_scope.cancel()

    trio.run(run)
    print(f"\ncProfile: one {wire.name} adapter stream of {chunks} chunks, top {top} by own time")
    stats = pstats.Stats(profiler)
    stats.sort_stats(pstats.SortKey.TIME).print_stats(top)


def parse_chunks(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of counts: {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("every chunk count must be at least 1")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per stream (default 5)")
    parser.add_argument(
        "--chunks",
        type=parse_chunks,
        default=(5_000, 20_000),
        help="text deltas per stream (default 5000,20000)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="then cProfile one adapter stream per provider"
    )
    parser.add_argument("--top", type=int, default=25, help="functions shown per profile (default 25)")
    arguments = parser.parse_args()
    rounds: int = arguments.rounds
    chunk_counts: tuple[int, ...] = arguments.chunks
    if rounds < 1:
        parser.error("--rounds must be at least 1")

    print(
        f"python {sys.version.split()[0]}, trio {trio.__version__}, httpx {httpx.__version__},"
        f" {platform.machine()}, {os.cpu_count()} cores shared with other work (figures vary by ±20 %"
        f" between runs); {rounds} rounds after a warm-up, variants rotated"
    )
    print("raw: httpx stream + aiter_bytes (one piece per event); transport: HttpSseTransport events;")
    print("adapter: the model's stream() frames. µs and chunks/s per text delta; ratios against raw")
    results: list[tuple[Wire, int, Result]] = [
        (wire, chunks, trio.run(measure, wire, chunks, rounds)) for wire in WIRES for chunks in chunk_counts
    ]
    print(
        f"\n{'wire':<10}{'chunks':>7}  {'variant':<10}{'best µs':>9}{'median µs':>11}{'chunks/s':>12}"
        f"{'best/raw':>10}{'med/raw':>10}"
    )
    for wire, chunks, result in results:
        print_rows(wire, chunks, result)
    print("\ntime to first byte (raw), first event (transport), first text frame (adapter), ms")
    print(
        f"{'wire':<10}{'chunks':>7}  {'best: raw':>9}{'transport':>10}{'adapter':>10}{'adapt-raw':>10}"
        f"   {'med: raw':>8}{'transport':>10}{'adapter':>10}{'adapt-raw':>10}"
    )
    for wire, chunks, result in results:
        print_first(wire, chunks, result)
    if arguments.profile:
        for wire in WIRES:
            profile(wire, max(chunk_counts), arguments.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
