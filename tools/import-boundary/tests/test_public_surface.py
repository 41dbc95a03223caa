"""Pins the public surface of harness_import_boundary: names and signatures.

A change here is a change of the contract that CI and downstream teams rely on; it comes
with a version bump and a changelog entry.
"""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys

import harness_import_boundary

EXPECTED_NAMES = {
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
}


def test_all_lists_exactly_the_public_names() -> None:
    assert set(harness_import_boundary.__all__) == EXPECTED_NAMES
    assert len(harness_import_boundary.__all__) == len(EXPECTED_NAMES), "duplicate entries in __all__"


def test_no_unlisted_public_module_attributes() -> None:
    public = {name for name in vars(harness_import_boundary) if not name.startswith("_")}
    assert public == EXPECTED_NAMES - {"__version__"}


def test_public_callables_keep_their_signatures() -> None:
    assert str(inspect.signature(harness_import_boundary.check_paths)) == (
        "(paths: 'Sequence[str | os.PathLike[str]]', config: 'BoundaryConfig', *, "
        "include_suppressed: 'bool' = False) -> 'list[Finding]'"
    )
    assert str(inspect.signature(harness_import_boundary.load_config)) == (
        "(pyproject: 'str | Path | None' = None) -> 'BoundaryConfig'"
    )


def test_records_keep_their_fields_in_order() -> None:
    finding_fields = [field.name for field in dataclasses.fields(harness_import_boundary.Finding)]
    config_fields = [field.name for field in dataclasses.fields(harness_import_boundary.BoundaryConfig)]

    assert finding_fields == [
        "path",
        "line",
        "column",
        "module",
        "form",
        "message",
        "rule",
        "severity",
        "suppression",
    ]
    assert config_fields == [
        "root",
        "roots",
        "forbidden",
        "unverifiable",
        "exclude",
        "cache_dir",
        "jobs",
        "allow",
        "per_file_allow",
        "adapters",
    ]


def test_the_six_rules_are_listed_in_order() -> None:
    assert list(harness_import_boundary.RULES) == ["IB001", "IB002", "IB003", "IB004", "IB005", "IB006"]
    assert [rule.suppressible for rule in harness_import_boundary.RULES.values()] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]


def test_importing_the_package_does_not_import_libcst() -> None:
    program = "import sys, harness_import_boundary; print('libcst' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)

    assert result.stdout == "False\n"
