"""Version information: the distribution's version and the contract's version.

The two move independently. ``WORKSPACE_CONTRACT_VERSION`` changes only when the contract
itself does (an operation, a request or result shape, an error code); see the changelog.
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Final

__all__ = ["WORKSPACE_CONTRACT_VERSION", "__version__"]

WORKSPACE_CONTRACT_VERSION: Final = "0.8"
"""The version of the Workspace contract this distribution implements (major.minor)."""


def _distribution_version() -> str:
    try:
        return version("harness-workspace")
    except PackageNotFoundError:  # pragma: no cover - a source tree without installed metadata
        return "0.0.0+unknown"


__version__: Final = _distribution_version()
