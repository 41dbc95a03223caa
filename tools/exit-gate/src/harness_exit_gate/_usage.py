"""What both command lines share: their exit codes and a parser that raises instead of exiting."""

from __future__ import annotations

from typing import Final, NoReturn

from harness_exit_gate._cli_help import SuggestingParser

__all__ = ["EXIT_FAILED", "EXIT_OK", "RaisingParser", "UsageError"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1


class UsageError(Exception):
    """A command line the parser refused; the message says why."""


class RaisingParser(SuggestingParser):
    """An ``ArgumentParser`` that raises :class:`UsageError`, so ``main`` picks the exit code.

    Its help shows defaults and examples, and a misspelled option or command names the closest one.
    """

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)
