"""An example downstream adapter for the harness Workspace contract."""

from downstream_adapter._read_only import ReadOnlyWorkspace

__all__ = ["ReadOnlyWorkspace"]
