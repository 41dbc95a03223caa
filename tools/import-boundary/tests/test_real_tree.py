"""The repository's own production trees are clean (spec §12).

This replaces the interim AST check that harness-tools carried before the checker existed:
a direct host shortcut added to kernel or tools code fails the ordinary test lane as well
as the CI step. It is offline and deterministic, and a symlink in either tree fails it too.
The few reviewed exceptions are suppression comments; they are pinned here, so a new one
cannot slip in without this test changing with it.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from harness_import_boundary import DEFAULT_ROOTS, check_paths, load_config

REPOSITORY = Path(__file__).resolve().parents[3]

REVIEWED_SUPPRESSIONS = [
    # A provider's or a tool's error attribute read without running descriptors (the tool
    # gate's static_attribute, used by both loops); the names are constants.
    ("packages/kernel/src/harness_kernel/_gate.py", "IB002", "dynamic-attribute"),
    ("packages/kernel/src/harness_kernel/_gate.py", "IB002", "dynamic-attribute"),
    # EventPayload is the kernel's own msgspec base class: its direct subclasses are the payloads.
    ("packages/kernel/src/harness_kernel/events/_codec.py", "IB002", "introspection"),
    # The caller's model and permission methods, read by constant names.
    ("packages/kernel/src/harness_kernel/runtime/_input.py", "IB002", "dynamic-attribute"),
    # Tool errors pickle their own instance dictionary, handed out in one place.
    ("packages/tools/src/harness_tools/_errors.py", "IB002", "dynamic-attribute"),
]


def test_the_repository_configuration_scans_the_production_trees_and_extends_the_rules() -> None:
    config = load_config(REPOSITORY / "pyproject.toml")

    assert DEFAULT_ROOTS == ("packages/kernel/src", "packages/tools/src")
    # The exit gate's pure task manifests and golden scenarios are held to the same rules.
    assert config.roots == (
        *DEFAULT_ROOTS,
        "tools/exit-gate/src/harness_exit_gate/evals",
        "tools/exit-gate/src/harness_exit_gate/manifest",
    )
    for entry in (
        "os",
        "subprocess",
        "shutil",
        "io",
        "builtins.open",
        "pathlib:write",
        "tempfile",
        "trio.Path",
        "socket",
        "ssl",
        "http",
        "urllib",
        "httpx",
        "harness_models",
    ):
        assert entry in config.forbidden
    per_file = dict(config.per_file_allow)
    assert per_file["packages/kernel/src/**"] == ("harness_kernel.*", "harness_tools.*")
    assert per_file["packages/tools/src/**"] == ("harness_tools.*",)
    assert "sqlite3" not in config.allow
    assert "sqlite3" in per_file["packages/kernel/src/harness_kernel/store/_sqlite.py"]
    # They reach the kernel by public name only, never a private module.
    for glob in (
        "tools/exit-gate/src/harness_exit_gate/evals/**",
        "tools/exit-gate/src/harness_exit_gate/manifest/**",
    ):
        kernel_names = [entry for entry in per_file[glob] if entry.startswith("harness_kernel")]
        assert kernel_names
        assert not any("._" in entry or entry.endswith("*") for entry in kernel_names), kernel_names


def test_the_real_kernel_and_tools_trees_have_no_findings_but_the_reviewed_suppressions() -> None:
    config = load_config(REPOSITORY / "pyproject.toml")
    roots = [REPOSITORY / root for root in config.roots]

    findings = check_paths([str(root) for root in roots], config, include_suppressed=True)

    assert [finding for finding in findings if finding.suppression is None] == []
    assert [(finding.path, finding.rule, finding.form) for finding in findings] == REVIEWED_SUPPRESSIONS


def copy_of_the_tools_tree(tmp_path: Path) -> Path:
    """A root holding a copy of packages/tools/src, checked with the repository's table."""
    shutil.copytree(
        REPOSITORY / "packages/tools/src",
        tmp_path / "packages/tools/src",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return tmp_path / "packages/tools/src/harness_tools"


def test_a_host_shortcut_in_a_copy_of_the_tools_tree_is_found(tmp_path: Path) -> None:
    package = copy_of_the_tools_tree(tmp_path)
    module = package / "_read_file.py"
    module.write_bytes(module.read_bytes() + b"\nimport subprocess\n")
    config = dataclasses.replace(load_config(REPOSITORY / "pyproject.toml"), root=tmp_path)

    findings = check_paths([], config)

    assert [(finding.path, finding.rule, finding.module, finding.form) for finding in findings] == [
        ("packages/tools/src/harness_tools/_read_file.py", "IB001", "subprocess", "import")
    ]


def test_tools_code_may_not_import_the_kernel_that_depends_on_it(tmp_path: Path) -> None:
    package = copy_of_the_tools_tree(tmp_path)
    (package / "_upward.py").write_text("from harness_kernel import run_agent\n", encoding="utf-8")
    config = dataclasses.replace(load_config(REPOSITORY / "pyproject.toml"), root=tmp_path)

    findings = check_paths([], config)

    assert [(finding.path, finding.rule, finding.module) for finding in findings] == [
        ("packages/tools/src/harness_tools/_upward.py", "IB001", "harness_kernel.run_agent")
    ]
