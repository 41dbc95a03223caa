"""The credential deny list and the ``.git/config`` scrubber, by property and by example."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_workspace.credentials import (
    CREDENTIAL_PATTERNS,
    is_credential_path,
    is_git_config_path,
    scrub_git_config,
)

# One concrete path per kind of credential; every one must be withheld in any letter case.
CREDENTIAL_EXAMPLES = (
    ".env",
    ".env.production",
    "server.pem",
    "tls/private.key",
    "cert.p12",
    "id_rsa",
    "ID_RSA",
    "deploy/id_ed25519",
    "id_ecdsa.pub",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".yarnrc.yml",
    ".pgpass",
    ".vault-token",
    "credentials.json",
    "service-account.json",
    "gcp/my-project-service-account.json",
    "ci_service_account_key.json",
    "kubeconfig",
    "terraform.tfstate",
    "infra/terraform.tfstate.backup",
    ".aws/credentials",
    ".aws/config",
    ".docker/config.json",
    ".ssh/config",
    ".ssh/known_hosts",
    ".kube/config",
    ".gnupg/private-keys-v1.d/abc.key",
    ".azure/accessTokens.json",
    "home/.config/gcloud/application_default_credentials.json",
    ".git/credentials",
)
# Ordinary source files that must stay readable.
ORDINARY_EXAMPLES = (
    "README.md",
    "src/app.py",
    "src/id_generator.py",
    "environment.yml",
    "docs/keys.md",
    "src/credentials_check.py",
    ".config/other/settings.json",
    ".github/workflows/ci.yml",
    ".git/HEAD",
    "envfile",
    "config/ssh.py",
)


@pytest.mark.parametrize("path", CREDENTIAL_EXAMPLES)
def test_each_kind_of_credential_path_is_withheld(path: str) -> None:
    assert is_credential_path(path)
    assert is_credential_path(path.upper())
    assert is_credential_path(f"nested/dir/{path}")


@pytest.mark.parametrize("path", ORDINARY_EXAMPLES)
def test_ordinary_source_paths_are_not_withheld(path: str) -> None:
    assert not is_credential_path(path)


def test_everything_below_a_credential_directory_is_withheld() -> None:
    for directory in (".aws", ".ssh", ".docker", ".kube", ".gnupg", ".config/gcloud", "keys.pem"):
        assert is_credential_path(f"{directory}/anything/at/all.txt"), directory
        assert is_credential_path(f"./{directory}//x"), directory


@given(st.sampled_from(CREDENTIAL_EXAMPLES), st.data())
def test_any_letter_case_of_a_credential_path_is_withheld(path: str, data: st.DataObject) -> None:
    flips = data.draw(st.lists(st.booleans(), min_size=len(path), max_size=len(path)))
    varied = "".join(char.upper() if flip else char.lower() for char, flip in zip(path, flips, strict=True))
    prefix = data.draw(st.lists(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), max_size=3))
    assert is_credential_path("/".join([*prefix, varied]))


_SOURCE_NAME = st.from_regex(r"[a-z][a-z0-9]{0,10}\.(py|md|txt|toml)", fullmatch=True)


@given(st.sampled_from(CREDENTIAL_PATTERNS), st.data())
def test_every_pattern_matches_its_instances_in_any_case_and_place(pattern: str, data: st.DataObject) -> None:
    filler = st.from_regex(r"[A-Za-z0-9_-]{0,6}", fullmatch=True)
    instance = "".join(data.draw(filler) if char == "*" else char for char in pattern)
    flips = data.draw(st.lists(st.booleans(), min_size=len(instance), max_size=len(instance)))
    varied = "".join(char.swapcase() if flip else char for char, flip in zip(instance, flips, strict=True))
    above = data.draw(st.lists(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), max_size=3))
    below = data.draw(st.lists(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), max_size=2))
    assert is_credential_path("/".join([*above, varied, *below]))


@given(st.lists(_SOURCE_NAME, min_size=1, max_size=5))
def test_plain_source_names_are_never_withheld(parts: list[str]) -> None:
    assert not is_credential_path("/".join(parts))


def test_the_patterns_are_case_insensitive_and_only_extend_the_old_list() -> None:
    old = (".env", ".env.*", "*.pem", "*.key", ".netrc", ".git-credentials", ".pypirc", ".npmrc")
    assert set(old) <= set(CREDENTIAL_PATTERNS)
    assert is_credential_path("ID_RSA")
    assert is_credential_path(".ENV")


def test_every_git_configuration_file_is_recognised_in_any_case_and_nothing_else() -> None:
    assert is_git_config_path(".git/config")
    assert is_git_config_path("./.GIT/Config")
    assert not is_git_config_path("config")
    assert is_git_config_path("sub/.git/config")
    assert is_git_config_path(".git/modules/lib/config")
    assert is_git_config_path(".git/config.worktree")
    assert not is_git_config_path(".gitconfig")
    assert not is_git_config_path(".git")
    assert not is_git_config_path("src/config")


# -- .git/config ------------------------------------------------------------------------

_SECRET = "XSECRETX"


def _userinfo(user: str, password: str) -> str:
    return f"{user}:{_SECRET}{password}@"


def _url(scheme: str, userinfo: str, host: str, path: str) -> str:
    return f"{scheme}://{userinfo}{host}{path}"


_USERINFO = st.builds(
    _userinfo,
    st.from_regex(r"[a-z0-9._~%!$&'()*+,;=-]{0,12}", fullmatch=True),
    st.from_regex(r"[a-z0-9._~%!$&'()*+,;=:-]{0,12}", fullmatch=True),
)
_URL = st.builds(
    _url,
    st.sampled_from(["https", "http", "ssh", "git+ssh", "HTTPS", "ftp"]),
    _USERINFO,
    st.from_regex(r"[a-z0-9.-]{1,20}(:[0-9]{1,5})?", fullmatch=True),
    st.from_regex(r"(/[a-z0-9._-]{0,10}){0,3}", fullmatch=True),
)


def _placements(url: str) -> st.SearchStrategy[str]:
    return st.sampled_from(
        [
            f"\turl = {url}\n",
            f"\tpushurl={url}\n",
            f'\turl = "{url}"\n',
            f"\tinsteadOf = {url}\n",
            f"\tproxy = {url}\n",
            f'[url "{url}"]\n',
            f'[url "{url}"] insteadOf = https://github.com/\n',
            f'[URL "{url}"]\n\tinsteadOf = git@github.com:\n',
            f'[http "{url}"]\n\tsslVerify = true\n',
            f'[remote "origin"]\n\turl = {url}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n',
            f"\t# mirror at {url}\n",
            f"\turl = {url[:9]}\\\n{url[9:]}\n",
        ]
    )


_PLAIN_LINE = st.sampled_from(
    [
        "[core]\n",
        "\trepositoryformatversion = 0\n",
        "\tbare = false\n",
        '[branch "main"]\n',
        "\tremote = origin\n",
        "[user]\n",
        "\tname = somebody\n",
        "\turl = https://example.invalid/plain.git\n",
    ]
)
_CREDENTIAL_LINE = st.sampled_from(
    [
        f"[credential]\n\thelper = store {_SECRET}\n",
        f'[credential "https://h.invalid"]\n\tusername = {_SECRET}\n',
        f"[Credential.https://h.invalid]\n\thelper = {_SECRET}\n",
        f"[http]\n\textraHeader = Authorization: Bearer {_SECRET}\n",
        f'[http "https://h.invalid/"]\n\tEXTRAHEADER = Cookie: {_SECRET}\n',
        f"[github]\n\ttoken = {_SECRET}\n",
        f"[hub]\n\toauthtoken={_SECRET}\n",
        f"[sendemail]\n\tsmtpPass = {_SECRET}\n\tsmtppassword = {_SECRET}\n",
        f"[http] extraheader = Authorization: {_SECRET}\n",
    ]
)


@given(st.lists(st.one_of(_PLAIN_LINE, _CREDENTIAL_LINE, _URL.flatmap(_placements)), max_size=16))
def test_no_user_information_or_credential_survives_the_scrub_anywhere(chunks: list[str]) -> None:
    text = "".join(chunks)
    cleaned = scrub_git_config(text)
    assert _SECRET.lower() not in cleaned.lower()
    assert scrub_git_config(cleaned) == cleaned


@given(st.lists(_PLAIN_LINE, max_size=12))
def test_a_config_without_credentials_is_kept_as_it_is(lines: list[str]) -> None:
    text = "".join(lines)
    assert scrub_git_config(text) == text


def test_an_instead_of_section_keeps_its_rewrite_without_the_token() -> None:
    text = (
        "[core]\n\tbare = false\n"
        '[url "https://tok:ghp_SECRET123@github.com/"]\n'
        "\tinsteadOf = https://github.com/\n"
        '[remote "origin"]\n\turl = https://github.com/o/r.git\n'
    )
    assert scrub_git_config(text) == (
        "[core]\n\tbare = false\n"
        '[url "https://github.com/"]\n'
        "\tinsteadOf = https://github.com/\n"
        '[remote "origin"]\n\turl = https://github.com/o/r.git\n'
    )
