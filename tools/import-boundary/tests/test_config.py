"""``load_config`` (spec §8) and the exclude-glob matcher."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_import_boundary import (
    DEFAULT_ALLOW,
    DEFAULT_FORBIDDEN,
    DEFAULT_PER_FILE_ALLOW,
    DEFAULT_ROOTS,
    BoundaryConfig,
    ConfigError,
    load_config,
)
from harness_import_boundary._config import ExcludeMatcher, find_pyproject, glob_to_regex, validate_glob

TABLE = "[tool.harness-import-boundary]\n"


def write_pyproject(directory: Path, body: str) -> Path:
    path = directory / "pyproject.toml"
    path.write_text(body, encoding="utf-8")
    return path


# ------------------------------------------------------------------ finding the file


def test_without_any_pyproject_the_defaults_apply_with_the_cwd_as_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if find_pyproject(tmp_path) is not None:
        pytest.skip("a pyproject.toml above the temporary directory")
    monkeypatch.chdir(tmp_path)

    assert load_config() == BoundaryConfig(root=Path.cwd())


def test_the_nearest_pyproject_above_the_cwd_is_used_and_its_folder_is_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_pyproject(tmp_path, TABLE + 'unverifiable = "warn"\n')
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)

    config = load_config()

    assert config.root == tmp_path.resolve()
    assert config.unverifiable == "warn"


def test_a_pyproject_without_the_table_gives_the_defaults_rooted_at_its_folder(tmp_path: Path) -> None:
    path = write_pyproject(tmp_path, '[project]\nname = "x"\n')

    assert load_config(path) == BoundaryConfig(root=tmp_path.resolve())


def test_the_defaults_are_those_of_the_specification(tmp_path: Path) -> None:
    config = load_config(write_pyproject(tmp_path, TABLE))

    assert config.roots == DEFAULT_ROOTS == ("packages/kernel/src", "packages/tools/src")
    assert config.forbidden == DEFAULT_FORBIDDEN
    assert DEFAULT_FORBIDDEN == ("os", "subprocess", "shutil", "io", "builtins.open", "pathlib:write")
    assert config.unverifiable == "error"
    assert config.exclude == ()
    assert config.cache_dir == ".cache/harness-import-boundary"
    assert config.jobs == 0
    assert config.allow == DEFAULT_ALLOW
    assert config.per_file_allow == tuple(DEFAULT_PER_FILE_ALLOW.items())
    assert dict(config.per_file_allow) == {
        "packages/kernel/src/**": ("harness_kernel.*", "harness_tools.*"),
        "packages/tools/src/**": ("harness_tools.*",),
    }


def test_a_relative_config_path_is_resolved_from_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_pyproject(tmp_path, TABLE + "jobs = 3\n")
    monkeypatch.chdir(tmp_path)

    config = load_config("pyproject.toml")

    assert (config.root, config.jobs) == (tmp_path.resolve(), 3)


def test_a_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(tmp_path / "nope.toml")


def test_invalid_toml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(write_pyproject(tmp_path, "[tool\n"))


def test_undecodable_toml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_bytes(b'[tool.harness-import-boundary]\njobs = "\xff"\n')

    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(path)


# ------------------------------------------------------------------ a full table


def test_every_key_is_read(tmp_path: Path) -> None:
    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "lib").mkdir()
    path = write_pyproject(
        tmp_path,
        TABLE
        + 'roots = ["src/a", "./lib/", "src/a"]\n'
        + 'forbidden = ["os", "pathlib:write"]\n'
        + 'extend-forbidden = ["tempfile", "os", "trio.run_process"]\n'
        + 'unverifiable = "warn"\n'
        + 'exclude = ["**/generated/**", "*.pyi"]\n'
        + 'cache-dir = "build/ib-cache/"\n'
        + "jobs = 4\n",
    )

    assert load_config(path) == BoundaryConfig(
        root=tmp_path.resolve(),
        roots=("src/a", "lib"),
        forbidden=("os", "pathlib:write", "tempfile", "trio.run_process"),
        unverifiable="warn",
        exclude=("**/generated/**", "*.pyi"),
        cache_dir="build/ib-cache",
        jobs=4,
    )


def test_extend_forbidden_adds_to_the_defaults(tmp_path: Path) -> None:
    path = write_pyproject(tmp_path, TABLE + 'extend-forbidden = ["tempfile", "codecs.open"]\n')

    assert load_config(path).forbidden == (*DEFAULT_FORBIDDEN, "tempfile", "codecs.open")


def test_extend_allow_adds_to_the_defaults_and_allow_replaces_them(tmp_path: Path) -> None:
    extended = write_pyproject(tmp_path, TABLE + 'extend-allow = ["sqlite3", "re", "!json.load"]\n')
    assert load_config(extended).allow == (*DEFAULT_ALLOW, "sqlite3", "!json.load")

    replaced = write_pyproject(tmp_path, TABLE + 'allow = ["re", "trio.*"]\nextend-allow = ["json"]\n')
    assert load_config(replaced).allow == ("re", "trio.*", "json")


def test_per_file_allow_replaces_the_default_table_in_order(tmp_path: Path) -> None:
    body = (
        '[tool.harness-import-boundary.per-file-allow]\n"src/**" = ["mine.*"]\n"src/store.py" = ["sqlite3"]\n'
    )
    config = load_config(write_pyproject(tmp_path, TABLE + body))

    assert config.per_file_allow == (("src/**", ("mine.*",)), ("src/store.py", ("sqlite3",)))


def test_adapters_name_the_files_that_may_use_each_one(tmp_path: Path) -> None:
    body = '[tool.harness-import-boundary.adapters]\n"pkg.store.Sqlite" = ["src/pkg/store/**", "app/*.py"]\n'

    config = load_config(write_pyproject(tmp_path, TABLE + body))

    assert config.adapters == (("pkg.store.Sqlite", ("src/pkg/store/**", "app/*.py")),)
    assert load_config(write_pyproject(tmp_path, TABLE)).adapters == ()


def test_an_empty_forbidden_list_is_allowed(tmp_path: Path) -> None:
    assert load_config(write_pyproject(tmp_path, TABLE + "forbidden = []\n")).forbidden == ()


def test_a_root_that_is_a_symlink_is_left_to_the_scan(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")

    config = load_config(write_pyproject(tmp_path, TABLE + 'roots = ["linked", "dangling"]\n'))

    assert config.roots == ("linked", "dangling")


def test_the_root_itself_may_be_scanned(tmp_path: Path) -> None:
    assert load_config(write_pyproject(tmp_path, TABLE + 'roots = ["."]\n')).roots == (".",)


@pytest.mark.parametrize(
    ("line", "key", "problem"),
    [
        ("colour = 1", "colour", "unknown key"),
        ('roots = "src"', "roots", "must be an array of strings, got string"),
        ("roots = [1]", "roots", "item 0 must be a string, got integer"),
        ("roots = []", "roots", "must list at least one directory"),
        ('roots = [""]', "roots", "must not be empty"),
        ('roots = ["missing"]', "roots", "does not exist"),
        ('roots = ["../elsewhere"]', "roots", "outside the config root"),
        ('roots = ["src/../../elsewhere"]', "roots", "outside the config root"),
        ('roots = ["/usr"]', "roots", "must be relative"),
        ('roots = ["file.txt"]', "roots", "is not a directory"),
        ('forbidden = ["os path"]', "forbidden", "is not a dotted name"),
        ('forbidden = [""]', "forbidden", "is not a dotted name"),
        ('forbidden = ["pathlib:read"]', "forbidden", "is not a dotted name"),
        ("forbidden = [true]", "forbidden", "item 0 must be a string, got boolean"),
        ('forbidden = "os"', "forbidden", "must be an array"),
        ('extend-forbidden = ["os."]', "extend-forbidden", "is not a dotted name"),
        ('unverifiable = "warning"', "unverifiable", 'must be "error" or "warn", got \'warning\''),
        ("unverifiable = true", "unverifiable", "got boolean True"),
        ('exclude = ["/abs/**"]', "exclude", "must be relative"),
        ('exclude = ["a//b"]', "exclude", "empty, '.' or '..' segment"),
        ('exclude = ["a/"]', "exclude", "empty, '.' or '..' segment"),
        ('exclude = ["../a"]', "exclude", "empty, '.' or '..' segment"),
        ('exclude = [""]', "exclude", "must not be empty"),
        ("exclude = [{}]", "exclude", "got table"),
        ('cache-dir = "../cache"', "cache-dir", "outside the config root"),
        ('cache-dir = "."', "cache-dir", "not the root itself"),
        ("cache-dir = 3", "cache-dir", "must be a string, got integer"),
        ("jobs = true", "jobs", "got boolean True"),
        ("jobs = -1", "jobs", "got integer -1"),
        ('jobs = "2"', "jobs", "got '2'"),
        ("jobs = 1.5", "jobs", "got float 1.5"),
        ("jobs = 1979-05-27", "jobs", "got date/time"),
        ('allow = "re"', "allow", "must be an array"),
        ('allow = ["re module"]', "allow", "is not a dotted name"),
        ('allow = ["!re.*"]', "allow", "an exclusion names one module"),
        ('extend-allow = ["*"]', "extend-allow", "is not a dotted name"),
        ('per-file-allow = ["re"]', "per-file-allow", "must be a table of globs to arrays, got array"),
        ('per-file-allow = {"/abs" = ["re"]}', "per-file-allow", "must be relative"),
        ('per-file-allow = {"a" = "re"}', "per-file-allow.a", "must be an array"),
        ('per-file-allow = {"a" = ["re.."]}', "per-file-allow.a", "is not a dotted name"),
        ('adapters = ["x"]', "adapters", "must be a table of names to arrays of globs, got array"),
        ('adapters = {"x y" = ["a"]}', "adapters.x y", "is not a dotted name"),
        ('adapters = {"x.*" = ["a"]}', "adapters.x.*", "not an exclusion or a package"),
        ('adapters = {"x" = "a"}', "adapters.x", "must be an array"),
        ('adapters = {"x" = ["/abs"]}', "adapters.x", "must be relative"),
    ],
)
def test_invalid_settings_are_config_errors_naming_the_key(
    tmp_path: Path, line: str, key: str, problem: str
) -> None:
    (tmp_path / "file.txt").write_text("", encoding="utf-8")
    path = write_pyproject(tmp_path, TABLE + line + "\n")

    with pytest.raises(ConfigError) as caught:
        load_config(path)

    assert caught.value.key == key
    assert caught.value.path == path.resolve()
    assert f"[tool.harness-import-boundary] {key}: " in str(caught.value)
    assert problem in str(caught.value)


def test_a_tool_entry_that_is_not_a_table_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[tool\] must be a table"):
        load_config(write_pyproject(tmp_path, "tool = 3\n"))


def test_a_checker_entry_that_is_not_a_table_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[tool.harness-import-boundary\] must be a table, got array"):
        load_config(write_pyproject(tmp_path, '[tool]\n"harness-import-boundary" = [1]\n'))


def test_the_repository_configuration_loads() -> None:
    repository = Path(__file__).resolve().parents[3]

    config = load_config(repository / "pyproject.toml")

    assert config.root == repository
    # The defaults first (test_real_tree.py pins the roots the repository adds).
    assert config.roots[: len(DEFAULT_ROOTS)] == DEFAULT_ROOTS
    assert config.allow == DEFAULT_ALLOW


# ------------------------------------------------------------------ exclude globs


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("*.py", ["a.py", ".py"], ["d/a.py", "a.pyi"]),
        ("pkg/*/x.py", ["pkg/a/x.py"], ["pkg/x.py", "pkg/a/b/x.py"]),
        ("**/*.py", ["a.py", "d/a.py", "d/e/a.py"], ["a.pyi"]),
        ("a/**/b", ["a/b", "a/x/b", "a/x/y/b"], ["a/xb", "b", "xa/b"]),
        ("a/**", ["a", "a/b", "a/b/c"], ["ab", "b/a"]),
        ("**", ["a", "a/b"], []),
        ("**/**/gen", ["gen", "x/gen", "x/y/gen"], ["x/gen/y"]),
        ("a**", ["a", "abc"], ["a/b"]),
        ("?.py", ["a.py"], ["ab.py", "/.py"]),
        ("a+b(c).py", ["a+b(c).py"], ["aab(c).py"]),
    ],
)
def test_globs_match_whole_root_relative_paths(
    pattern: str, matching: list[str], not_matching: list[str]
) -> None:
    matcher = ExcludeMatcher([pattern])

    assert [path for path in matching if not matcher.matches(path)] == []
    assert [path for path in not_matching if matcher.matches(path)] == []


def test_a_matcher_without_globs_matches_nothing() -> None:
    assert not ExcludeMatcher([]).matches("a.py")


def test_any_of_several_globs_may_match() -> None:
    matcher = ExcludeMatcher(["a/*", "b/**"])

    assert (matcher.matches("a/x"), matcher.matches("b/x/y"), matcher.matches("c/x")) == (True, True, False)


@pytest.mark.parametrize("pattern", ["", "/a", "a//b", "a/", "./a", "a/../b"])
def test_unusable_globs_are_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match="glob"):
        validate_glob(pattern)


def reference_match(pattern: str, path: str) -> bool:
    """Segment by segment: a ``**`` segment takes any number of segments, others fnmatch one."""

    def match(patterns: list[str], segments: list[str]) -> bool:
        if not patterns:
            return not segments
        head, rest = patterns[0], patterns[1:]
        if head == "**":
            return any(match(rest, segments[start:]) for start in range(len(segments) + 1))
        return bool(segments) and fnmatch.fnmatchcase(segments[0], head) and match(rest, segments[1:])

    return match(pattern.split("/"), path.split("/"))


_PATTERN_SEGMENTS = st.one_of(
    st.just("**"),
    st.text(alphabet="ab.*?\n", min_size=1, max_size=4).filter(lambda segment: segment not in (".", "..")),
)
_PATTERNS = st.lists(_PATTERN_SEGMENTS, min_size=1, max_size=4).map("/".join)
_PATHS = st.lists(st.text(alphabet="ab.\n", min_size=1, max_size=4), min_size=1, max_size=5).map("/".join)


@given(pattern=_PATTERNS, path=_PATHS)
def test_globs_agree_with_a_segment_by_segment_reference(pattern: str, path: str) -> None:
    validate_glob(pattern)

    assert ExcludeMatcher([pattern]).matches(path) == reference_match(pattern, path)


@given(path=_PATHS)
def test_a_path_without_wildcards_is_a_glob_matching_only_itself(path: str) -> None:
    matcher = ExcludeMatcher([path])

    assert matcher.matches(path)
    assert not matcher.matches(path + "x")
    assert not matcher.matches("x/" + path)


@given(path=_PATHS)
def test_a_single_star_never_crosses_a_slash(path: str) -> None:
    assert ExcludeMatcher(["*"]).matches(path) == ("/" not in path)


def test_the_translation_is_a_plain_regular_expression() -> None:
    assert glob_to_regex("a/**/*.py") == r"a(?:/[^/]+)*/[^/]*\.py"
