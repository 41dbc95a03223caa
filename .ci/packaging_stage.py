#!/usr/bin/env python3
"""The packaging stage: ``python3 .ci/packaging_stage.py`` (called by .ci/run after the exit gate).

 1. internal dependency ranges: every range a member declares for a sibling must include
    the sibling's version (uv ignores those ranges inside the workspace; pip does not);
 2. build an sdist and a wheel of every distribution and check the built metadata;
 3. start a private index (pypiserver on 127.0.0.1, no fallback to the public index), fill
    it with the locked third-party wheels and *publish* the project's dists to it over HTTP;
    publishing a file that already exists must be refused;
 4. in a fresh venv per distribution, install it alone from that index only and prove it
    works on its own, from the installed wheel and a temp working directory;
 5. examples/downstream-adapter, copied to a temp folder and pointed at the index, passes
    its tests and pyright strict against the published harness-workspace wheel;
 6. with a test-only harness-workspace at the next contract published too, the pin holds:
    harness-tools alone still gets the current line, and a requirement set mixing contract
    versions fails at resolution time with a message that names the pin.

Versions come from each member's pyproject.toml (and the contract from harness-workspace's
_version.py), so a version bump needs no edit here. PyPI is reached only for the build
backend (hatchling), pypiserver itself, the locked third-party wheels and the example's own
third-party dependencies; every install under test sees the private index and nothing else.
Any failure exits non-zero. Everything lives in a temp folder removed on every exit,
Ctrl-C and SIGTERM included. The implementation is in .ci/_packaging/.
"""

from pathlib import Path

from _packaging import run_stage

if __name__ == "__main__":
    raise SystemExit(run_stage(Path(__file__).resolve().parent.parent))
