"""The repository's own production trees are clean (spec §12).

This replaces the interim AST check that harness-tools carried before the checker existed:
a direct host shortcut added to kernel or tools code fails the ordinary test lane as well
as the CI step. It is offline and deterministic, and a symlink in either tree fails it too.
"""

from __future__ import annotations

from pathlib import Path

from harness_import_boundary import DEFAULT_ROOTS, check_paths, load_config

REPOSITORY = Path(__file__).resolve().parents[3]


def test_the_repository_configuration_scans_the_production_trees_and_extends_the_rules() -> None:
    config = load_config(REPOSITORY / "pyproject.toml")

    assert config.roots == DEFAULT_ROOTS == ("packages/kernel/src", "packages/tools/src")
    for entry in (
        "os",
        "subprocess",
        "shutil",
        "io",
        "builtins.open",
        "pathlib:write",
        "tempfile",
        "trio.Path",
    ):
        assert entry in config.forbidden


def test_the_real_kernel_and_tools_trees_have_no_findings() -> None:
    config = load_config(REPOSITORY / "pyproject.toml")
    roots = [REPOSITORY / root for root in config.roots]

    findings = check_paths([str(root) for root in roots], config, include_suppressed=True)

    assert findings == []


def test_a_host_shortcut_in_a_copy_of_the_tools_tree_is_found(tmp_path: Path) -> None:
    tools_source = REPOSITORY / "packages/tools/src/harness_tools/_read_file.py"
    copy = tmp_path / "_read_file.py"
    copy.write_bytes(tools_source.read_bytes() + b"\nimport subprocess\n")
    config = load_config(REPOSITORY / "pyproject.toml")

    findings = check_paths([str(copy)], config)

    assert [(finding.rule, finding.module, finding.form) for finding in findings] == [
        ("IB001", "subprocess", "import")
    ]
