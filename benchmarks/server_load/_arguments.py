"""The benchmark's command line: phases, client modes, counts (smaller with ``--quick``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ._flame import py_spy

PHASES: Final = ("idle", "levels", "mixed", "tasks", "stalled", "flood", "cycles", "sigterm")
CLIENT_MODES: Final = ("processes", "in-process")
STORES: Final = ("sqlite", "postgres")


def _choices(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    """A comma-separated list of names from ``allowed``, each once, in the order of ``allowed``."""

    def parse(text: str) -> list[str]:
        names = [part.strip() for part in text.split(",") if part.strip()]
        unknown = [name for name in names if name not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(allowed)}")
        return [name for name in allowed if name in names]

    return parse


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: at least 1")
    return value


def _counts(text: str) -> list[int]:
    """A comma-separated list of positive counts, each once, in ascending order."""
    try:
        return sorted({_positive(part) for part in text.split(",") if part.strip()})
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None


def _output_path(parser: argparse.ArgumentParser, option: str, value: str | None) -> str | None:
    """``value`` made absolute; fail before the run rather than after it, with nowhere to write."""
    if value is None:
        return None
    path = Path(value).resolve()
    if not path.parent.is_dir():
        parser.error(f"{option}: no such directory for {path}")
    return str(path)


def _parser(description: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--phases",
        type=_choices(PHASES),
        default=None,
        help=f"phases to run, comma-separated, from {','.join(PHASES)} (default all)",
    )
    parser.add_argument(
        "--levels",
        type=lambda text: [int(part) for part in text.split(",")],
        default=None,
        help="concurrent sessions per level, comma-separated (default 1,100,500)",
    )
    parser.add_argument(
        "--lone-rounds",
        type=int,
        default=None,
        help="how many times the level of one session runs in a row (default 50, 5 with --quick)",
    )
    parser.add_argument(
        "--clients",
        type=_choices(CLIENT_MODES),
        default=["processes"],
        help="where the levels' clients run: 'processes' (worker processes, the server alone in a"
        " subprocess), 'in-process' (beside the server, in its trio thread: the old way), or both,"
        " comma-separated, one pass each and a comparison (default processes)",
    )
    parser.add_argument(
        "--client-processes",
        type=_positive,
        default=1,
        help="client worker processes for --clients processes (default 1: one core for the"
        " server, one for the clients, on a two-core machine)",
    )
    parser.add_argument(
        "--store",
        type=_choices(STORES),
        default=["sqlite"],
        help="the levels' store, with --clients processes: 'sqlite' (one server, a file), 'postgres'"
        " (--replicas servers on one PostgreSQL database), or both, comma-separated: one pass each,"
        " SQLite first as the baseline, then a comparison (default sqlite)",
    )
    parser.add_argument(
        "--replicas",
        type=_counts,
        default=[1],
        help="with --store postgres: how many servers share the database, the sessions spread over"
        " them round robin; comma-separated for one pass each (default 1)",
    )
    parser.add_argument(
        "--database-url",
        metavar="URL",
        default=None,
        help="with --store postgres: a postgresql:// server to use (every pass shares its database)"
        " instead of a throwaway cluster started here",
    )
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    parser.add_argument(
        "--profile",
        metavar="PATH",
        default=None,
        help="run only the levels phase (default one level: 100, 20 with --quick) with the server"
        " under cProfile and write its sorted profile (pstats text) to PATH",
    )
    parser.add_argument(
        "--flame",
        metavar="PATH",
        default=None,
        help="sample the levels' server subprocess with py-spy (on PATH) and write its flame graph"
        " (SVG) to PATH; needs --clients processes",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="upper bound per phase, seconds")
    parser.add_argument("--serve-stalled", nargs=2, metavar=("DB", "ROOT"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--serve-levels",
        nargs=4,
        metavar=("DIRECTORY", "DB", "CONNECTIONS", "SESSIONS"),
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--client-worker", metavar="URL", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    return parser


def _check_modes(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> None:
    """Refuse combinations that cannot run: a profile of two modes, a flame graph without a subprocess."""
    if arguments.profile is not None:
        if arguments.phases not in (None, ["levels"]):
            parser.error("--profile runs the levels phase alone: leave out --phases or say --phases levels")
        if len(arguments.clients) != 1:
            parser.error(
                "--profile profiles one client mode: say --clients processes or --clients in-process"
            )
        arguments.phases = ["levels"]
    if arguments.flame is not None:
        if "processes" not in arguments.clients:
            parser.error("--flame samples the levels' server subprocess: it needs --clients processes")
        if py_spy() is None:
            parser.error("--flame: no py-spy on PATH (uv tool install py-spy; it lands in ~/.local/bin)")
    if arguments.phases is None:
        arguments.phases = list(PHASES)
    _check_stores(parser, arguments)


def _check_stores(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> None:
    """Refuse store options that cannot apply: replicas without PostgreSQL, PostgreSQL in-process."""
    postgres = "postgres" in arguments.store
    if not postgres:
        if arguments.replicas != [1]:
            parser.error("--replicas needs --store postgres (SQLite is one server on one file)")
        if arguments.database_url is not None:
            parser.error("--database-url needs --store postgres")
        return
    if arguments.clients != ["processes"]:
        parser.error("--store postgres: the levels' servers run as subprocesses, say --clients processes")
    if arguments.database_url is not None and not arguments.database_url.startswith(
        ("postgresql://", "postgres://")
    ):
        parser.error("--database-url must start with postgresql:// or postgres://")
    passes = ("sqlite" in arguments.store) + len(arguments.replicas)
    if (arguments.profile is not None or arguments.flame is not None) and (
        passes > 1 or arguments.replicas != [1]
    ):
        parser.error("--profile and --flame follow one server: say one --store and --replicas 1")


def parse_arguments(description: str | None) -> argparse.Namespace:
    """The command line, with the phases' counts (smaller with ``--quick``)."""
    parser = _parser(description)
    arguments = parser.parse_args()
    quick = arguments.quick
    arguments.profile = _output_path(parser, "--profile", arguments.profile)
    arguments.flame = _output_path(parser, "--flame", arguments.flame)
    _check_modes(parser, arguments)
    if arguments.levels is None and arguments.profile is not None:
        arguments.levels = [20] if quick else [100]
    if arguments.levels is None:
        arguments.levels = [1, 20] if quick else [1, 100, 500]
    if arguments.lone_rounds is None:
        arguments.lone_rounds = 5 if quick else 50
    arguments.idle = 20 if quick else 200
    arguments.mixed_sessions = 20 if quick else 100
    arguments.offenders = 2 if quick else 10
    arguments.task_cycles = 100 if quick else 1000
    arguments.stalled = 4 if quick else 32
    arguments.flood = 1100
    arguments.cycles = 500 if quick else 10_000
    arguments.sigterm_sessions = 10 if quick else 64
    return arguments
