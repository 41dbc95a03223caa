"""What both command lines share: their exit codes and a parser that raises instead of exiting."""

from __future__ import annotations

import argparse
from typing import Final, NoReturn

__all__ = ["EXIT_FAILED", "EXIT_OK", "RaisingParser", "UsageError"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1


class UsageError(Exception):
    """A command line the parser refused; the message says why."""


class RaisingParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises :class:`UsageError`, so ``main`` picks the exit code."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)
