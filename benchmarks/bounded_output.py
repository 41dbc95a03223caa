"""Head-and-tail bounding of tool output, against msgspec encoding the same value.

Run by hand (it is not a test): ``uv run python benchmarks/bounded_output.py`` (``--quick``
for a smoke run). Every figure is measured in this run; the variants of a table are
interleaved round by round so that drift hits them alike, and each round hands them a
fresh copy of the input (msgspec caches a non-ASCII string's UTF-8 form on the string, so
a reused input would flatter whoever runs second). It prints three tables:

1. **Sizing a string.** ``json_string_size`` against the baseline ``msgspec.json.encode``
   (what it must agree with), and the scans one might try instead of encoding: a regular
   expression looking for any character that needs an escape (timed only on text with
   none, where it must read everything; elsewhere it stops at the first newline and the
   count is still to be made), ``str.count`` of newlines alone, and ``bytes.translate``
   keeping only such characters. On ASCII none beats the encoder, which is why
   ``json_string_size`` encodes (in 64 Ki-character slices).
2. **Bounding a text.** ``bound_text(text, 128 KiB)`` against ``msgspec.json.encode(text)``
   on 1 MB and 10 MB of ASCII test output and of mixed text (accents, CJK, emoji, tabs,
   quotes), and on a 100 KB text that fits. Only the ends are encoded, so the ratio falls
   as the input grows; a non-ASCII text still pays one UTF-8 count of the whole.
3. **Bounding a listing.** ``bound_items(paths, 128 KiB)`` against
   ``msgspec.json.encode(paths)`` for 10 000 and 200 000 paths.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from harness_tools._bounded_output import bound_items, bound_text, json_string_size

T = TypeVar("T")

BUDGET = 128 * 1024
ASCII_LINE = "tests/test_module.py::test_case[param-7] PASSED                       [ 42%]\n"
MIXED_LINE = 'naïve café — 日本語の出力 🙂\t"quoted" \\path\\ line\n'
_ESCAPED = re.compile(r'[\x00-\x1f"\\]')
_KEEP_ESCAPED = bytes(byte for byte in range(256) if not (byte < 0x20 or byte in b'"\\'))


def _text(line: str, megabytes: float) -> str:
    size = int(megabytes * 1_000_000)
    return line * (size // len(line.encode()) + 1)


def _fresh(text: str) -> str:
    # A new string object with the same content and no cached UTF-8 form.
    return (text + ".")[:-1]


@dataclass(frozen=True)
class Timing:
    best_ms: float
    median_ms: float


def _race(
    variants: dict[str, Callable[[T], object]], subject: T, rounds: int, fresh: Callable[[T], T]
) -> dict[str, Timing]:
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            argument = fresh(subject)
            started = time.perf_counter()
            run(argument)
            samples[name].append((time.perf_counter() - started) * 1e3)
    return {name: Timing(min(times), statistics.median(times)) for name, times in samples.items()}


def _print_race(label: str, timings: dict[str, Timing], baseline: str) -> None:
    base = timings[baseline].best_ms
    for name, timing in timings.items():
        print(
            f"{label:22} {name:24} {timing.best_ms:9.3f} {timing.median_ms:9.3f} {timing.best_ms / base:8.2f}"
        )


def _header(title: str) -> None:
    print(title)
    print(f"{'input':22} {'variant':24} {'best ms':>9} {'median ms':>9} {'ratio':>8}")


def sizing(sizes: Sequence[float], rounds: int) -> None:
    _header("1. Sizing a string (ratio against msgspec.json.encode, best of rounds)")
    kinds = (
        (ASCII_LINE.replace("\n", " "), "ASCII, no escape"),
        (ASCII_LINE, "ASCII"),
        (MIXED_LINE, "mixed"),
    )
    for line, kind in kinds:
        for megabytes in sizes:
            text = _text(line, megabytes)
            assert json_string_size(text) == len(msgspec.json.encode(text))
            variants: dict[str, Callable[[str], object]] = {
                "msgspec.json.encode": msgspec.json.encode,
                "json_string_size": json_string_size,
                "str.count('\\n') only": lambda subject: subject.count("\n"),
                "bytes.translate": lambda subject: subject.encode().translate(None, _KEEP_ESCAPED),
            }
            if "no escape" in kind:  # elsewhere it stops at the first newline, answering nothing
                variants["regex: any escape?"] = _ESCAPED.search
            _print_race(
                f"{megabytes:g} MB {kind}", _race(variants, text, rounds, _fresh), "msgspec.json.encode"
            )
    print()


def bounding(sizes: Sequence[float], rounds: int) -> None:
    _header(f"2. Bounding a text to {BUDGET} bytes (ratio against msgspec.json.encode)")
    cases = [
        (f"{megabytes:g} MB {kind}", _text(line, megabytes))
        for megabytes in sizes
        for line, kind in ((ASCII_LINE, "ASCII"), (MIXED_LINE, "mixed"))
    ]
    cases.append(("100 KB ASCII (fits)", _text(ASCII_LINE, 0.1)[:100_000]))
    for label, text in cases:
        result = bound_text(text, BUDGET)
        assert result.json_bytes == len(msgspec.json.encode(result.text)) <= BUDGET
        variants: dict[str, Callable[[str], object]] = {
            "msgspec.json.encode": msgspec.json.encode,
            "bound_text": lambda subject: bound_text(subject, BUDGET),
        }
        _print_race(label, _race(variants, text, rounds, _fresh), "msgspec.json.encode")
    print()


def listing(counts: Sequence[int], rounds: int) -> None:
    _header(f"3. Bounding a listing to {BUDGET} bytes (ratio against msgspec.json.encode)")
    for count in counts:
        paths = [f"packages/pkg{index % 97}/src/module_{index}.py" for index in range(count)]
        result = bound_items(paths, BUDGET)
        assert result.json_bytes == len(msgspec.json.encode(list(result.items))) <= BUDGET
        variants: dict[str, Callable[[list[str]], object]] = {
            "msgspec.json.encode": msgspec.json.encode,
            "bound_items": lambda subject: bound_items(subject, BUDGET),
        }
        timings = _race(variants, paths, rounds, list)
        _print_race(f"{count} paths", timings, "msgspec.json.encode")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description="Bounding tool output against msgspec encoding.")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, 1 MB inputs only")
    quick: bool = parser.parse_args().quick
    rounds = 3 if quick else 15
    sizes = (1.0,) if quick else (1.0, 10.0)
    sizing(sizes, rounds)
    bounding(sizes, rounds)
    listing((10_000,) if quick else (10_000, 200_000), rounds)


if __name__ == "__main__":
    main()
