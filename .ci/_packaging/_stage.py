"""The packaging stage in order, with its temp folder and server cleaned up on every exit."""

from __future__ import annotations

import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

from ._contract_pin import check_contract_pin, contract_lines
from ._distributions import by_name, load_distributions
from ._downstream import check_downstream_example
from ._index import private_index, publish_all
from ._installs import check_lone_installs
from ._metadata import build_all, check_metadata
from ._shell import StageFailure, isolate_pip_environment, run, step

_STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class _Stopped(BaseException):
    """SIGTERM or SIGHUP arrived: unwind like Ctrl-C, so every cleanup runs."""

    def __init__(self, signal_number: int) -> None:
        super().__init__(signal_number)
        self.signal_number = signal_number


def _stop(signal_number: int, frame: FrameType | None) -> None:
    raise _Stopped(signal_number)


def _all_steps(repo: Path, work: Path) -> None:
    distributions = load_distributions(repo)
    workspace = by_name(distributions, "harness-workspace")
    lines = contract_lines(repo, workspace)  # read now: a malformed file fails before the builds

    step("internal dependency ranges include the siblings' versions")
    ranges = repo / ".ci" / "check_dependency_ranges.py"
    run([sys.executable, ranges, "--self-test"], cwd=repo)
    run([sys.executable, ranges], cwd=repo)

    dist = work / "dist"
    build_all(repo, dist)
    check_metadata(dist, distributions)
    with private_index(repo, work) as index:
        publish_all(index, dist, workspace)
        check_lone_installs(repo, work, index, distributions)
        check_downstream_example(repo, work, index)
        check_contract_pin(repo, work, index, distributions, lines)


def run_stage(repo: Path) -> int:
    """Run every step of the packaging stage for the checkout at ``repo``; the exit status.

    0 when every check passed; 1 when one failed (``packaging: FAILED: ...`` says which);
    128 plus the signal's number when interrupted. The temp folder and pypiserver are gone
    on every exit.
    """
    started = time.monotonic()
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if callable(reconfigure):
        reconfigure(line_buffering=True)  # our lines stay in order with the commands' and stderr's
    isolate_pip_environment()
    previous = {number: signal.signal(number, _stop) for number in _STOPPING_SIGNALS}
    try:
        with tempfile.TemporaryDirectory(prefix="harness-packaging.") as folder:
            _all_steps(repo, Path(folder))
    except StageFailure as failure:
        print(f"packaging: FAILED: {failure}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("packaging: interrupted; the temp folder and pypiserver are cleaned up", file=sys.stderr)
        return 128 + signal.SIGINT
    except _Stopped as stopped:
        print(f"packaging: stopped by signal {stopped.signal_number}; cleaned up", file=sys.stderr)
        return 128 + stopped.signal_number
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    step(f"packaging passed in {time.monotonic() - started:.0f} s")
    return 0
