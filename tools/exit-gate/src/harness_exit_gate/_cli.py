"""The ``harness-exit-gate`` command line: ``validate MANIFEST...`` and ``run MANIFEST`` (exit-gate.md §4)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Final

from harness_exit_gate._cli_help import examples
from harness_exit_gate._manifest_file import load_task_manifest_file
from harness_exit_gate._run import DEFAULT_TEST_COMMAND, DEFAULT_TIMEOUT_MS, RunOptions, run_gate
from harness_exit_gate._usage import EXIT_FAILED, EXIT_OK, RaisingParser, UsageError
from harness_exit_gate.manifest import ManifestParseError

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main"]

PROG: Final = "harness-exit-gate"
EXIT_USAGE: Final = 2


_VALIDATE_EXAMPLE: Final = (
    "check two manifests against the schema",
    ["harness-exit-gate validate tasks/T-001.yaml tasks/T-002.yaml"],
)
_RUN_EXAMPLES: Final = (
    ("judge the current branch against main, running the tests", ["harness-exit-gate run tasks/T-001.yaml"]),
    (
        "what CI runs: the head ref and both object ids given, nothing discovered",
        [
            "harness-exit-gate run tasks/T-001.yaml --ci-head-ref tasks/T-001",
            "--head-sha 0123456789abcdef0123456789abcdef01234567",
            "--base 89abcdef0123456789abcdef0123456789abcdef",
        ],
    ),
)


def _parser() -> argparse.ArgumentParser:
    parser = RaisingParser(
        prog=PROG,
        description="Task manifests and the changed-path exit gate. Exit 0 ok, 1 failed or invalid, 2 usage.",
        epilog=examples(_VALIDATE_EXAMPLE, *_RUN_EXAMPLES),
    )
    commands = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        parser_class=RaisingParser,
        help="what to run; each command has its own --help",
    )
    validate = commands.add_parser(
        "validate",
        help="check manifests against the schema",
        description="Check task manifests against the schema only; print one line per valid manifest.",
        epilog=examples(_VALIDATE_EXAMPLE),
    )
    validate.add_argument("manifests", nargs="*", metavar="MANIFEST", help="a task manifest file (YAML)")
    run = commands.add_parser(
        "run",
        help="run the exit gate for one task manifest",
        description="Judge the changes of a task branch against its manifest, run the tests, and write"
        " a run report under tasks/runs/.",
        epilog=examples(*_RUN_EXAMPLES),
    )
    run.add_argument("manifest", nargs="?", metavar="MANIFEST", help="the task manifest file (YAML)")
    changes = run.add_argument_group("changes")
    changes.add_argument(
        "--base",
        metavar="REV",
        help="the trusted base to diff against"
        " (default: the repository's main, master, trunk or develop branch)",
    )
    ci = run.add_argument_group("CI mode (either option selects it; give both)")
    ci.add_argument(
        "--ci-head-ref", metavar="REF", help="the head ref under judgement, tasks/ID (default: local mode)"
    )
    ci.add_argument(
        "--head-sha",
        metavar="SHA",
        help="the head commit's full object id, which HEAD must equal (default: local mode)",
    )
    tests = run.add_argument_group("tests")
    tests.add_argument("--test-cmd", default=DEFAULT_TEST_COMMAND, metavar="CMD", help="the test command")
    tests.add_argument(
        "--timeout-ms", default=DEFAULT_TIMEOUT_MS, metavar="N", help="the test command's time limit, ms"
    )
    report = run.add_argument_group("report")
    report.add_argument(
        "--pr-url",
        metavar="URL",
        help="the pull request the report names (default: env HARNESS_PULL_REQUEST_URL)",
    )
    report.add_argument(
        "--allow-gate-in-checkout",
        action="store_true",
        help="local mode only: judge even though this gate is the checkout's own code (advisory)",
    )
    run.add_argument("--branch", help=argparse.SUPPRESS)
    return parser


def _usage(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _validate(paths: Sequence[str]) -> int:
    status = EXIT_OK
    for path in paths:
        try:
            manifest = load_task_manifest_file(path)
        except ManifestParseError as error:
            print(f"{path}: {error}", file=sys.stderr)
            status = EXIT_FAILED
            continue
        print(f'valid task manifest: {manifest.id} "{manifest.title}"')
    return status


def _run(arguments: argparse.Namespace) -> int:
    outcome = run_gate(
        RunOptions(
            manifest=arguments.manifest,
            cwd=os.getcwd(),
            base=arguments.base,
            test_command=arguments.test_cmd,
            timeout_ms=arguments.timeout_ms,
            ci_head_ref=(
                None
                if arguments.ci_head_ref is None and arguments.head_sha is None
                else arguments.ci_head_ref or ""
            ),
            head_sha=(
                None
                if arguments.ci_head_ref is None and arguments.head_sha is None
                else arguments.head_sha or ""
            ),
            pull_request_url=arguments.pr_url or os.environ.get("HARNESS_PULL_REQUEST_URL") or None,
            allow_gate_in_checkout=arguments.allow_gate_in_checkout,
        )
    )
    sys.stdout.write(outcome.report.decode("utf-8"))
    if outcome.report_written:
        print(f"report: {outcome.report_path}")
    else:
        print(f"report was not written; intended path: {outcome.report_path}")
    sys.stdout.flush()
    for code, message in outcome.failures:
        print(f"{code}: {message}", file=sys.stderr)
    return outcome.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed or invalid, 2 usage)."""
    try:
        arguments = _parser().parse_args(argv)
    except UsageError as error:
        return _usage(str(error))
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    if arguments.command is None:
        return _usage("a command is required: validate or run")
    if arguments.command == "validate":
        if not arguments.manifests:
            return _usage("validate needs at least one MANIFEST")
        return _validate(arguments.manifests)
    if arguments.branch is not None:
        return _usage("--branch is refused: branch is not trusted metadata")
    if arguments.manifest is None:
        return _usage("run needs a MANIFEST")
    return _run(arguments)
