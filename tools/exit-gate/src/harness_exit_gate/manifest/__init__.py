"""Task manifests: the pure model of exit-gate.md §2, shared by the gate, the evals and the server.

:func:`load_task_manifest` reads one manifest from YAML text, :func:`decode_task_manifest`
validates an already decoded object; both report every issue at once in a
:class:`ManifestParseError`. The result is deeply immutable, and its ``permissions`` plug
into ``harness_kernel.policy`` through :func:`manifest_permissions`. Nothing here opens,
reads or lists files.
"""

from harness_exit_gate.manifest._model import (
    DELIVERY_TYPES,
    MANIFEST_INVALID,
    MAX_MANIFEST_BYTES,
    RESERVED_ACTIONS,
    Delivery,
    DeliveryType,
    ManifestIssue,
    ManifestParseError,
    TaskBudget,
    TaskManifest,
    decode_task_manifest,
    load_task_manifest,
    manifest_permissions,
)

__all__ = [
    "DELIVERY_TYPES",
    "MANIFEST_INVALID",
    "MAX_MANIFEST_BYTES",
    "RESERVED_ACTIONS",
    "Delivery",
    "DeliveryType",
    "ManifestIssue",
    "ManifestParseError",
    "TaskBudget",
    "TaskManifest",
    "decode_task_manifest",
    "load_task_manifest",
    "manifest_permissions",
]
