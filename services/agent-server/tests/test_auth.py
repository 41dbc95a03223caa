"""Tokens, principals, token files and the failed-attempt throttle (``agent_server._auth``)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_server._auth import (
    TOKEN_MAX_CHARS,
    TOKEN_MIN_CHARS,
    Authenticator,
    FailureThrottle,
    check_token,
    ensure_token_file,
    generate_token,
    read_token_file,
)

GOOD = "0123456789abcdef" * 2


@given(st.text(max_size=600))
def test_check_token_accepts_exactly_32_to_512_printable_ascii_characters(text: str) -> None:
    usable = TOKEN_MIN_CHARS <= len(text) <= TOKEN_MAX_CHARS and all("\x21" <= c <= "\x7e" for c in text)
    if usable:
        assert check_token(text) == text
    else:
        with pytest.raises(ValueError, match="auth token must"):
            check_token(text)


@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=32, max_size=64))
def test_a_token_identifies_its_principal_and_nothing_else_does(token: str) -> None:
    other = generate_token()
    authenticator = Authenticator({"alice": token, "bob": other})
    assert authenticator.identify(token) == "alice"
    assert authenticator.identify(other) == "bob"
    assert authenticator.identify(token + "x") is None
    assert authenticator.identify(token[:-1]) is None
    assert authenticator.identify("") is None


def test_generated_tokens_are_fresh_256_bit_values() -> None:
    tokens = {generate_token() for _ in range(100)}
    assert len(tokens) == 100
    assert all(len(token) == 43 and check_token(token) == token for token in tokens)


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        ({}, "at least one auth token"),
        ({"Alice": GOOD}, "principal names"),
        ({"alice": "short"}, 'the token of principal "alice" must be'),
        ({"alice": GOOD, "bob": GOOD}, "the same token is given for two principals"),
    ],
)
def test_an_authenticator_refuses_bad_configuration(tokens: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Authenticator(tokens)


def test_the_throttle_doubles_the_delay_caps_it_forgives_and_forgets() -> None:
    now = [0.0]
    throttle = FailureThrottle(lambda: now[0], max_addresses=2)
    delays = [throttle.record_failure("10.0.0.1") for _ in range(10)]
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0, 10.0]
    assert throttle.failures("10.0.0.1") == 10
    assert throttle.record_failure("10.0.0.2") == 0.1  # another address has its own count
    now[0] = 601.0
    assert throttle.failures("10.0.0.1") == 0
    assert throttle.record_failure("10.0.0.1") == 0.1  # forgiven after ten quiet minutes
    throttle.record_failure("10.0.0.3")
    assert throttle.failures("10.0.0.2") == 0  # the table is bounded: the oldest is forgotten


def _private(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_token_file_names_principals_and_skips_comments(tmp_path: Path) -> None:
    text = f"# team tokens\n\nalice {GOOD}\nbob   {GOOD[::-1]}\n"
    assert read_token_file(str(_private(tmp_path / "tokens", text))) == {"alice": GOOD, "bob": GOOD[::-1]}
    assert read_token_file(str(_private(tmp_path / "one", f"{GOOD}\n"))) == {"default": GOOD}


@pytest.mark.parametrize(
    ("text", "mode", "message"),
    [
        (f"{GOOD}\n", 0o640, "readable by its owner only"),
        (f"{GOOD}\n", 0o604, "readable by its owner only"),
        ("# nothing\n", 0o600, "holds no token"),
        ("alice bob carol\n", 0o600, "a line is TOKEN or PRINCIPAL TOKEN"),
        (f"alice {GOOD}\nalice {GOOD[::-1]}\n", 0o600, 'principal "alice" is given twice'),
        ("alice short\n", 0o600, "the token must be"),
        (f"Bad! {GOOD}\n", 0o600, "principal names"),
    ],
)
def test_a_token_file_that_is_not_private_or_malformed_is_refused(
    tmp_path: Path, text: str, mode: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        read_token_file(str(_private(tmp_path / "tokens", text, mode)))


def test_a_token_file_behind_a_link_or_not_a_file_is_refused(tmp_path: Path) -> None:
    target = _private(tmp_path / "real", f"{GOOD}\n")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(ValueError, match="cannot open token file"):
        read_token_file(str(tmp_path / "link"))
    (tmp_path / "folder").mkdir(mode=0o700)
    with pytest.raises(ValueError, match="not a regular file"):
        read_token_file(str(tmp_path / "folder"))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_a_token_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = _private(tmp_path / "tokens", f"{GOOD}\n")
    os.chown(path, 65534, 65534)
    with pytest.raises(ValueError, match="not owned by this user"):
        read_token_file(str(path))


def test_ensure_creates_one_private_token_that_concurrent_starts_agree_on(tmp_path: Path) -> None:
    path = tmp_path / "state" / "deep" / "token"
    results: list[tuple[dict[str, str], bool]] = []

    def start() -> None:
        results.append(ensure_token_file(str(path)))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({tuple(tokens.items()) for tokens, _ in results}) == 1
    assert [created for _, created in results].count(True) == 1
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert sorted(os.listdir(path.parent)) == ["token"]  # no temporary file left behind
    tokens, created = ensure_token_file(str(path))
    assert not created
    assert tokens == results[0][0]
