"""The benchmark's verdicts: one PASS or FAIL line per expectation, kept for the JSON report."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Verdicts:
    """Every expectation checked, in order, with its figures."""

    rows: list[tuple[str, bool, str]] = field(default_factory=list[tuple[str, bool, str]])

    def expect(self, name: str, passed: bool, detail: str) -> None:
        """Record one expectation and print its verdict line."""
        self.rows.append((name, passed, detail))
        print(f"  [{'PASS' if passed else 'FAIL'}] {name}: {detail}", flush=True)

    @property
    def failed(self) -> int:
        """How many expectations failed."""
        return sum(1 for _, passed, _ in self.rows if not passed)
