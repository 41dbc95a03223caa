"""The benchmark's verdicts: one PASS or FAIL line per expectation, kept for the JSON report.

Beside them, targets (issue #21's figures for the server) are reported as met or missed; a
missed target is a figure to improve, not a failure, so it never changes the exit status.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Verdicts:
    """Every expectation checked and every target compared, in order, with its figures."""

    rows: list[tuple[str, bool, str]] = field(default_factory=list[tuple[str, bool, str]])
    targets: list[tuple[str, bool, str]] = field(default_factory=list[tuple[str, bool, str]])

    def expect(self, name: str, passed: bool, detail: str) -> None:
        """Record one expectation and print its verdict line."""
        self.rows.append((name, passed, detail))
        print(f"  [{'PASS' if passed else 'FAIL'}] {name}: {detail}", flush=True)

    def target(self, name: str, met: bool, detail: str) -> None:
        """Record one target and print how the figure compares (``met`` or ``miss``); never a failure."""
        self.targets.append((name, met, detail))
        print(f"  [target] {name}: {detail} ({'met' if met else 'miss'})", flush=True)

    @property
    def failed(self) -> int:
        """How many expectations failed."""
        return sum(1 for _, passed, _ in self.rows if not passed)
