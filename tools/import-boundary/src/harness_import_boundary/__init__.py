"""harness-import-boundary: keeps host authority out of kernel and tool code.

The checker parses production sources with libcst, without importing or running them. Kernel
and tools sources may import and name only what an allow-list admits; the checker reports
every static path by which they could reach the host filesystem or processes directly, or
anything not on the allow-list (IB001), the dynamic forms it cannot resolve (IB002), refused
entries such as symbolic links and compiled files (IB003), unparsable sources (IB004) and
faulty suppression comments (IB005, IB006).
"""

from harness_import_boundary._config import ConfigError, load_config
from harness_import_boundary._model import (
    DEFAULT_ALLOW,
    DEFAULT_FORBIDDEN,
    DEFAULT_PER_FILE_ALLOW,
    DEFAULT_ROOTS,
    RULES,
    BoundaryConfig,
    Finding,
)
from harness_import_boundary._scan import check_paths
from harness_import_boundary._version import __version__

__all__ = [
    "DEFAULT_ALLOW",
    "DEFAULT_FORBIDDEN",
    "DEFAULT_PER_FILE_ALLOW",
    "DEFAULT_ROOTS",
    "RULES",
    "BoundaryConfig",
    "ConfigError",
    "Finding",
    "__version__",
    "check_paths",
    "load_config",
]
