"""Readable ``--help`` and "did you mean" suggestions for argparse (issue #20).

Python 3.11's argparse neither suggests the closest option (``suggest_on_error`` came in 3.14)
nor shows defaults without also printing ``(default: None)`` for every flag. This module does
both. agent-server, harness-exit-gate and harness-import-boundary each hold an identical copy of
this module; docs/decisions/045-readable-command-lines.md says why no shared distribution holds
it. Change all three together.
"""

from __future__ import annotations

import argparse
import difflib
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any, Final, TypeVar, overload

__all__ = ["ReadableHelpFormatter", "SuggestingParser", "closest", "examples"]

# Close enough that "--workspce-root" finds "--workspace-root" and "--tols" finds "--tools",
# far enough that an unrelated word finds nothing.
_CUTOFF: Final = 0.6

_N = TypeVar("_N")


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word``, or ``None`` when none is close."""
    matches = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=_CUTOFF)
    return matches[0] if matches else None


def examples(*lines: tuple[str, Sequence[str]]) -> str:
    """An epilog of examples: a comment saying what each does, then its command's lines.

    A command given as several lines is joined with shell continuations, so each line of the
    help stays short and the whole still pastes into a shell.
    """
    blocks = [f"  # {purpose}\n  " + " \\\n      ".join(command) for purpose, command in lines]
    return "examples:\n" + "\n\n".join(blocks)


class ReadableHelpFormatter(argparse.HelpFormatter):
    """Help with each option's default; prose wrapped, indented lines (examples) kept as written.

    A default is appended as ``(default: VALUE)`` unless the help already names its default,
    or there is nothing to show (``None``, ``False``, an empty list): those options say in
    words what happens without them.
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines: list[str] = []
        for line in text.splitlines():
            if line[:1].isspace() or not line:
                lines.append(indent + line)
            else:
                lines.extend(
                    textwrap.wrap(
                        line,
                        width,
                        initial_indent=indent,
                        subsequent_indent=indent,
                        break_on_hyphens=False,
                    )
                )
        return "\n".join(lines)

    def _split_lines(self, text: str, width: int) -> list[str]:
        # Never split "--workspace-root" or "openai-compatible" at a hyphen.
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if text is None or "default" in text or action.option_strings == []:
            return text
        default: object = action.default
        if default is None or default is False or default == [] or default is argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"


class SuggestingParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that names the closest option or choice to a misspelled one.

    Unknown arguments are refused by the parser that met them, so a subcommand's misspelled
    option is matched against that subcommand's options, never another's.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", ReadableHelpFormatter)
        super().__init__(*args, **kwargs)

    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, args: Iterable[str] | None, namespace: _N) -> tuple[_N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: object = None
    ) -> tuple[object, list[str]]:
        """Parse ``args``; unlike argparse's, refuse what no option or argument takes.

        Raises:
            SystemExit: through :meth:`error`, naming the unknown arguments and the closest option.
        """
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self._unrecognized(extras))
        return parsed, extras

    def _unrecognized(self, extras: Sequence[str]) -> str:
        message = f"unrecognized arguments: {' '.join(extras)}"
        # A hidden option (help=SUPPRESS) is hidden for a reason: never suggest it.
        options = [
            option
            for action in self._actions
            if action.help is not argparse.SUPPRESS
            for option in action.option_strings
        ]
        for extra in extras:
            if not extra.startswith("-"):
                continue
            match = closest(extra.partition("=")[0], options)
            if match is not None:
                return f"{message}; did you mean {match}?"
        return message

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as error:
            match = None
            if isinstance(value, str) and action.choices is not None:
                match = closest(value, [str(choice) for choice in action.choices])
            if match is None:
                raise
            raise argparse.ArgumentError(action, f"{error.message}; did you mean {match!r}?") from None
