"""Glob matching: the linear matcher against the regex translation it replaced.

Run by hand (it is not a test): ``uv run python benchmarks/glob_match.py`` (``--quick`` for a
smoke run). It prints three tables, every figure measured in this run:

1. **Worst cases.** Globs whose regex translation backtracks (``**/*-*-*.yaml``,
   ``*a*a*a*a*a*b``, ``**/**/**/**/x``, ``*?*?*?*?*?/x``) against hostile subjects. The new
   matcher is timed at 1,200 and 4,096 characters. The old regex cannot be: it is run at
   lengths growing by 25 % until one run takes more than ``--cap`` seconds (default 1), and
   the table reports the last length, its time, the growth exponent fitted over the last
   points (time ∝ length^k) and what that exponent extrapolates to at 1,200 and 4,096
   characters. Half the subjects end with the glob's literal suffix, so the new matcher
   cannot reject them from the ends and reads every character.
2. **Common case.** Typical permission and path rules against short real-looking paths:
   µs per test for the old regex (compiled once, ``fullmatch``) and the new
   ``CompiledGlob.test``, with the ratio new/old.
3. **Other regular expressions on hostile input** (the audit of issue #15): each other
   pattern the kernel, tools and agent server run on model, client or tool text is timed at
   n and 4n characters of its worst input found; a ratio near 4 is linear, near 16 would be
   quadratic.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from harness_exit_gate.manifest._model import _ACTION, _ID  # pyright: ignore[reportPrivateUsage]
from harness_kernel.events._model import TIMESTAMP_PATTERN
from harness_kernel.events._redaction import redact_string
from harness_kernel.policy._glob import compile_glob, translate
from harness_tools._arguments import _ERROR_PATH  # pyright: ignore[reportPrivateUsage]

SUBJECT_LENGTHS = (1_200, 4_096)


@dataclass(frozen=True)
class WorstCase:
    pattern: str
    label: str
    make: Callable[[int], str]
    expected: bool


def _pad(unit: str, length: int, tail: str = "") -> str:
    body = length - len(tail)
    return (unit * (body // len(unit) + 1))[:body] + tail


WORST_CASES = (
    WorstCase("**/*-*-*.yaml", '"-" * n', lambda n: "-" * n, False),
    WorstCase("**/*-*-*.yaml", '"-" * (n-6) + "/.yaml"', lambda n: _pad("-", n, "/.yaml"), False),
    WorstCase("*a*a*a*a*a*b", '"a" * (n-2) + "/b"', lambda n: _pad("a", n, "/b"), False),
    WorstCase("**/**/**/**/x", '"a/" * (n/2)', lambda n: _pad("a/", n), False),
    WorstCase("*?*?*?*?*?/x", '"ab" * … + "/y/x"', lambda n: _pad("ab", n, "/y/x"), False),
)

COMMON_PATTERNS = (
    "secrets/**",
    "src/**",
    "packages/kernel/**",
    "tasks/*.yaml",
    "README.md",
    "**/*.py",
    "src/*/test_*.py",
    "**/.env*",
    "packages/**/tests/**",
    "uv run --frozen pytest*",
    "a?c/**",
)
COMMON_SUBJECTS = (
    "src/harness/app.py",
    "secrets/key",
    "packages/kernel/src/harness_kernel/policy/_glob.py",
    "README.md",
    "tasks/kernel-0001.yaml",
    "src/x/test_a.py",
    "uv run --frozen pytest -q",
    "packages/tools/tests/test_paths.py",
)


def _time_once(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def _best(function: Callable[[], object], repeats: int) -> float:
    return min(_time_once(function) for _ in range(repeats))


def _fit_exponent(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(time) against log(length) over the slowest points."""
    usable = [(math.log(n), math.log(t)) for n, t in points if t > 0.002][-6:]
    if len(usable) < 2:
        return float("nan")
    mean_x = statistics.fmean(x for x, _ in usable)
    mean_y = statistics.fmean(y for _, y in usable)
    numerator = sum((x - mean_x) * (y - mean_y) for x, y in usable)
    denominator = sum((x - mean_x) ** 2 for x, _ in usable)
    return numerator / denominator


def _regex_growth(case: WorstCase, cap: float) -> list[tuple[int, float]]:
    fullmatch = re.compile(translate(case.pattern), re.DOTALL).fullmatch
    points: list[tuple[int, float]] = []
    length = 16.0
    while True:
        subject = case.make(int(length))
        elapsed = _time_once(partial(fullmatch, subject))
        points.append((int(length), elapsed))
        if elapsed > cap or int(length) >= SUBJECT_LENGTHS[-1]:
            return points
        length *= 1.25


def worst_cases(cap: float, repeats: int) -> None:
    print("1. Worst cases (new matcher at full length; old regex grown until one run exceeds the cap)")
    header = (
        f"{'pattern':16} {'subject':24} {'new 1200':>10} {'new 4096':>10} "
        f"{'regex: n':>8} {'t(n)':>8} {'k':>5} {'≈1200':>10} {'≈4096':>10} {'≈ratio@1200':>12}"
    )
    print(header)
    for case in WORST_CASES:
        test = compile_glob(case.pattern).test
        new_times: list[float] = []
        for length in SUBJECT_LENGTHS:
            subject = case.make(length)
            assert len(subject) == length
            assert test(subject) is case.expected
            new_times.append(_best(partial(test, subject), repeats))
        points = _regex_growth(case, cap)
        last_length, last_time = points[-1]
        exponent = _fit_exponent(points)
        projected = [last_time * (length / last_length) ** exponent for length in SUBJECT_LENGTHS]
        print(
            f"{case.pattern:16} {case.label:24} {new_times[0] * 1e6:8.1f}µs {new_times[1] * 1e6:8.1f}µs "
            f"{last_length:8} {last_time:7.2f}s {exponent:5.1f} {_duration(projected[0]):>10} "
            f"{_duration(projected[1]):>10} {projected[0] / new_times[0]:12.1e}"
        )
    print()


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "n/a"
    for unit, size in (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g}{unit}"
    return f"{seconds:.3g}s"


def common_case(repeats: int, number: int) -> None:
    print("2. Common case (µs per test, best of rounds; each round tests every subject)")
    print(f"{'pattern':26} {'old regex':>10} {'new':>10} {'new/old':>8}")
    old_total = new_total = 0.0
    for pattern in COMMON_PATTERNS:
        fullmatch = re.compile(translate(pattern), re.DOTALL).fullmatch
        test = compile_glob(pattern).test
        for subject in COMMON_SUBJECTS:
            assert test(subject) is (fullmatch(subject) is not None), (pattern, subject)

        def run_old(fullmatch: Callable[[str], object] = fullmatch) -> None:
            for _ in range(number):
                for subject in COMMON_SUBJECTS:
                    fullmatch(subject)

        def run_new(test: Callable[[str], bool] = test) -> None:
            for _ in range(number):
                for subject in COMMON_SUBJECTS:
                    test(subject)

        # Interleave the two so that drift hits both alike.
        old_rounds: list[float] = []
        new_rounds: list[float] = []
        for _ in range(repeats):
            old_rounds.append(_time_once(run_old))
            new_rounds.append(_time_once(run_new))
        per_test = number * len(COMMON_SUBJECTS)
        old_us = min(old_rounds) / per_test * 1e6
        new_us = min(new_rounds) / per_test * 1e6
        old_total += old_us
        new_total += new_us
        print(f"{pattern:26} {old_us:10.3f} {new_us:10.3f} {new_us / old_us:8.2f}")
    print(f"{'all patterns (sum)':26} {old_total:10.3f} {new_total:10.3f} {new_total / old_total:8.2f}")
    print()


@dataclass(frozen=True)
class AuditCase:
    where: str
    label: str
    run: Callable[[str], object]
    make: Callable[[int], str]


AUDIT_CASES = (
    AuditCase("_redaction", "Bearer + spaces", redact_string, lambda n: _pad("Bearer" + " " * 20 + "!", n)),
    AuditCase("_redaction", "AWS…KEY word", redact_string, lambda n: "AWS" + _pad("KEY", n - 3)),
    AuditCase("_redaction", "AWSKEY + spaces", redact_string, lambda n: "AWSKEY" + " " * (n - 7) + "x"),
    AuditCase("_redaction", "sk- short runs", redact_string, lambda n: _pad("sk-" + "a" * 11 + " ", n)),
    AuditCase("_redaction", "Authorization: spaces", redact_string, lambda n: _pad("Authorization:   ", n)),
    AuditCase("_redaction", "Cookie + spaces", redact_string, lambda n: _pad("Cookie" + " " * 30 + "x", n)),
    AuditCase("_redaction", "token= + spaces", redact_string, lambda n: "token=" + " " * (n - 6)),
    AuditCase("_redaction", "token repeated", redact_string, lambda n: _pad("token", n)),
    AuditCase("_redaction", "x-api- repeated", redact_string, lambda n: _pad("x-api-", n)),
    AuditCase("_redaction", 'password" + spaces', redact_string, lambda n: _pad('password"' + " " * 10, n)),
    AuditCase(
        "_arguments", "' - at `$' + runs", _ERROR_PATH.search, lambda n: _pad(" - at `$" + "a" * 20, n, "`x")
    ),
    AuditCase(
        "_arguments", "' - at `$' + one run", _ERROR_PATH.search, lambda n: " - at `$" + "a" * (n - 10) + "`x"
    ),
    AuditCase("_manifest", "id a-a-a…!", _ID.fullmatch, lambda n: _pad("a-", n, "!")),
    AuditCase("_manifest", "action a.a.a…!", _ACTION.fullmatch, lambda n: _pad("a.", n, "!")),
    AuditCase("_event_schema", "timestamp 0000…", re.compile(TIMESTAMP_PATTERN).fullmatch, lambda n: "0" * n),
)


def audit(repeats: int, size: int) -> None:
    print(f"3. Other regular expressions on hostile input (ms at n={size:,} and 4n; ratio ≈ 4 is linear)")
    print(f"{'module':14} {'input':26} {'n':>9} {'4n':>9} {'ratio':>6}")
    for case in AUDIT_CASES:
        small, large = case.make(size), case.make(4 * size)
        first = _best(partial(case.run, small), repeats)
        second = _best(partial(case.run, large), repeats)
        print(f"{case.where:14} {case.label:26} {first * 1e3:9.2f} {second * 1e3:9.2f} {second / first:6.1f}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description="Glob matching: the linear matcher against the old regex.")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and a lower cap")
    parser.add_argument("--cap", type=float, default=None, help="seconds one old-regex run may take")
    arguments = parser.parse_args()
    quick: bool = arguments.quick
    cap: float = arguments.cap if arguments.cap is not None else (0.1 if quick else 1.0)
    worst_cases(cap, repeats=3 if quick else 7)
    common_case(repeats=3 if quick else 9, number=100 if quick else 2_000)
    audit(repeats=1 if quick else 5, size=10_000 if quick else 50_000)


if __name__ == "__main__":
    main()
