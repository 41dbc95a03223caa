"""The packaging stage's implementation; ``.ci/packaging_stage.py`` is its entry point.

Standard library only: it runs with the machine's ``python3``, before and outside the
workspace's venv, and reaches uv, pip and pypiserver as subprocesses with argument lists.
"""

from ._stage import run_stage

__all__ = ["run_stage"]
