"""A stand-in for the old loop's module path, which ``harness_kernel.evals`` still imports.

Delete it when the golden scenarios leave the kernel: they import ``run_agent`` from the
kernel root there.
"""

from harness_kernel.legacy._facade import run_agent

__all__ = ["run_agent"]
