"""The command line: ``harness-import-boundary check [PATHS...]`` (spec §1, §9, §10)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from typing import Final

from harness_import_boundary._cli_help import SuggestingParser, examples
from harness_import_boundary._config import ConfigError, load_config
from harness_import_boundary._output import FORMATS, exit_status, render
from harness_import_boundary._scan import TOOL_NAME, scan
from harness_import_boundary._version import __version__

__all__ = ["EXIT_CLEAN", "EXIT_FINDINGS", "EXIT_USAGE", "main"]

EXIT_CLEAN: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_USAGE: Final = 2


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


_EXAMPLES: Final = (
    ("scan the roots pyproject.toml configures", ["harness-import-boundary check"]),
    (
        "scan two folders, without the cache, as SARIF for code scanning",
        [
            "harness-import-boundary check packages/kernel/src packages/tools/src",
            "--no-cache --format sarif --output boundary.sarif",
        ],
    ),
)


def _parser() -> argparse.ArgumentParser:
    parser = SuggestingParser(
        prog=TOOL_NAME,
        description="Report every static path by which kernel and tool code could reach host authority.",
        epilog=examples(*_EXAMPLES),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=SuggestingParser,
        help="what to run; each command has its own --help",
    )
    check = commands.add_parser(
        "check",
        help="scan the configured roots, or the given paths",
        description="Scan the configured roots, or the given files and directories instead. "
        "Exit 0 when clean (warnings allowed), 1 on findings, 2 on usage or configuration errors.",
        epilog=examples(*_EXAMPLES),
    )
    check.add_argument(
        "paths",
        nargs="*",
        metavar="PATHS",
        help="files or directories to scan (default: the configured roots)",
    )
    settings = check.add_argument_group("configuration")
    settings.add_argument(
        "--config", metavar="PYPROJECT", help="the pyproject.toml to read (default: the nearest one)"
    )
    settings.add_argument(
        "--jobs",
        type=_non_negative_int,
        metavar="N",
        help="worker processes, 0 for min(CPU count, 8) (default: the configuration's)",
    )
    settings.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    output = check.add_argument_group("output")
    output.add_argument("--format", choices=tuple(FORMATS), default="text", help="the report's format")
    output.add_argument("--output", metavar="FILE", help="write the report to FILE (default: stdout)")
    return parser


def _fail(message: str) -> int:
    print(f"{TOOL_NAME}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _describe(error: OSError) -> str:
    if error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error)


def _encode(text: str) -> bytes:
    # UTF-8 whatever the locale says. A file name that is not valid UTF-8 carries surrogates;
    # they come out as backslash escapes (in JSON and SARIF, valid string escapes).
    return text.encode("utf-8", "backslashreplace")


def _write_stdout(text: str) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(_encode(text))
    sys.stdout.buffer.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status (0 clean, 1 findings, 2 usage error).

    Args:
        argv: The arguments after the program name; ``sys.argv[1:]`` when omitted.
    """
    try:
        arguments = _parser().parse_args(argv)
    except SystemExit as exit_request:
        # argparse has already printed the usage or the help.
        code = exit_request.code
        return code if isinstance(code, int) else EXIT_USAGE
    try:
        config = load_config(arguments.config)
    except ConfigError as error:
        return _fail(str(error))
    if arguments.jobs is not None:
        config = dataclasses.replace(config, jobs=arguments.jobs)
    try:
        report = scan(arguments.paths, config, use_cache=not arguments.no_cache)
    except OSError as error:
        return _fail(_describe(error))
    except ValueError as error:
        return _fail(str(error))
    text = render(report, arguments.format)
    if arguments.output is None:
        _write_stdout(text)
    else:
        try:
            with open(arguments.output, "wb") as stream:
                stream.write(_encode(text))
        except OSError as error:
            return _fail(f"cannot write the report: {_describe(error)}")
    return exit_status(report)
