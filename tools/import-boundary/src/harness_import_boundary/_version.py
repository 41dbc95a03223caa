"""The checker's name, and the distribution's version read from its installed metadata."""

from importlib.metadata import PackageNotFoundError, version
from typing import Final

__all__ = ["TOOL_NAME", "__version__"]

TOOL_NAME: Final = "harness-import-boundary"


def _distribution_version() -> str:
    try:
        return version("harness-import-boundary")
    except PackageNotFoundError:  # pragma: no cover - a source tree without installed metadata
        return "0.0.0+unknown"


__version__: Final = _distribution_version()
