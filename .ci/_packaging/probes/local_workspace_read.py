"""Run by a lone harness-workspace install's own Python: LocalWorkspace reads ``note.txt``.

The packaging stage writes ``note.txt`` into the working directory first; this proves the
host adapter works from the installed wheel alone, outside the source tree.
"""

from __future__ import annotations

import trio

from harness_workspace import bind_workspace, invoke_workspace_operation
from harness_workspace.local import LocalWorkspace

_EXPECTED = "from the wheel\n"


async def _main() -> None:
    workspace = LocalWorkspace(".")
    try:
        text = await invoke_workspace_operation(
            bind_workspace(workspace), {"operation": "read_file", "path": "note.txt"}
        )
        if text != _EXPECTED:
            raise SystemExit(f"LocalWorkspace read {text!r}, not {_EXPECTED!r}")
        print(f"  LocalWorkspace ({workspace.resolver}) read note.txt: {text.strip()!r}")
    finally:
        await workspace.dispose()


if __name__ == "__main__":
    trio.run(_main)
