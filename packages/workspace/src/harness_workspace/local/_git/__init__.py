"""A read-only git reader for the local workspace: no git program, no repository configuration.

``diff`` and ``snapshot`` of :class:`~harness_workspace.local.LocalWorkspace` read the
repository themselves rather than running ``git``, so nothing the repository configures
(filter, diff and merge drivers, hooks, fsmonitor, pagers, ``core.*`` commands) can choose a
program to run. The modules, from the bottom up:

- ``bounds``: limits, the deadline and the stop flag every long loop checks;
- ``files``: reading inside ``.git`` through descriptors, never following a symlink;
- ``config``: the repository format (the only thing read from ``.git/config``);
- ``objects`` and ``packs``: loose objects, pack files and deltas, every size bounded;
- ``refs``: ``HEAD``, loose refs and ``packed-refs``;
- ``ignore``: ``.gitignore`` matching in time linear in the path;
- ``worktree``: the walk of the work tree and git tree ids computed in memory;
- ``patch``: the unified patch text.
"""
