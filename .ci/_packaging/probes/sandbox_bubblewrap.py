"""Run by a lone harness-sandbox install's own Python: a SandboxWorkspace on bubblewrap.

It copies ``source/`` (the packaging stage writes it), runs a command inside that writes a
file, reads it back on the host side, and disposes. It proves the sandbox works from the
installed wheel alone, outside the source tree; CI installs bubblewrap first.
"""

from __future__ import annotations

import trio

from harness_sandbox import BubblewrapEngine, SandboxWorkspace
from harness_workspace import CommandRequest


async def _main() -> None:
    workspace = await SandboxWorkspace.create("source", engine=BubblewrapEngine())
    try:
        ran = await workspace.execute(CommandRequest(argv=("sh", "-c", "cat note.txt > copied.txt; id -u")))
        if ran.exit_code != 0:
            raise SystemExit(f"the sandboxed command failed: {ran}")
        copied = await workspace.read_file("copied.txt")
        if copied != "from the wheel\n":
            raise SystemExit(f"read back {copied!r}")
        print(f"  SandboxWorkspace (bubblewrap, uid {ran.stdout.strip()}) copied and read back note.txt")
    finally:
        await workspace.dispose()


if __name__ == "__main__":
    trio.run(_main)
