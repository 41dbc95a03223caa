"""The key from the environment (named, never shown) and the base URL check (as an attacker would)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_models import (
    MODEL_CONFIG_INVALID,
    ModelError,
    ModelSpec,
    api_key_from_descriptor,
    api_key_from_file,
    model_factory,
)
from harness_models._secrets import api_key_from_environment, check_base_url


def test_the_key_comes_from_the_named_variable() -> None:
    key = api_key_from_environment("OPENAI_API_KEY", {"OPENAI_API_KEY": "sk-abc123"})
    assert key.reveal() == "sk-abc123"


@pytest.mark.parametrize("environ", [{}, {"OPENAI_API_KEY": ""}, {"OPENAI_API_KEY": "  "}])
def test_a_missing_or_empty_key_names_the_variable_to_set(environ: dict[str, str]) -> None:
    with pytest.raises(ModelError) as caught:
        api_key_from_environment("OPENAI_API_KEY", environ)
    assert caught.value.code == MODEL_CONFIG_INVALID
    assert "set the environment variable OPENAI_API_KEY" in caught.value.message


def test_a_malformed_key_is_refused_without_showing_it() -> None:
    with pytest.raises(ModelError) as caught:
        api_key_from_environment("MY_KEY", {"MY_KEY": "sk-secret value"})
    assert "MY_KEY" in caught.value.message
    assert "sk-secret" not in caught.value.message
    assert "sk-secret" not in repr(caught.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("https://api.anthropic.com/", "https://api.anthropic.com"),
        ("HTTPS://API.Example.com/v1/", "https://api.example.com/v1"),
        ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
        ("http://127.8.9.10/v1", "http://127.8.9.10/v1"),
        ("http://localhost:8000/v1", "http://localhost:8000/v1"),
        ("HTTP://LOCALHOST:8000", "http://localhost:8000"),
        ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),
    ],
)
def test_https_anywhere_and_http_to_loopback_are_accepted(url: str, expected: str) -> None:
    assert check_base_url(url, allow_insecure_http=False) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://api.openai.com/v1",
        "http://127.0.0.1.evil.com/v1",
        "http://localhost.evil/v1",
        "http://localhost./v1",
        "http://evil.com#@127.0.0.1/",
        "http://127.0.0.1@evil.com/",
        "http://127.0.0.1:80@evil.com/",
        "http://user:pass@127.0.0.1/",
        "https://user:pass@api.openai.com/",
        "http://127.0.0.1\\@evil.com/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::2]/",
        "http://128.0.0.1/",
        "http://0.0.0.0/",
        "http://127.1/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://127.0.0.1 .evil.com/",
        "http://127.0.0.1\t/",
        "https://api.openai.com/v1?key=x",
        "ftp://127.0.0.1/",
        "file:///etc/passwd",
        "127.0.0.1:8000",
        "//127.0.0.1/",
        "https://",
        "",
    ],
)
def test_anything_else_is_refused(url: str) -> None:
    with pytest.raises(ModelError) as caught:
        check_base_url(url, allow_insecure_http=False)
    assert caught.value.code == MODEL_CONFIG_INVALID


def test_the_operators_flag_allows_plain_http_to_a_remote_host_but_nothing_else() -> None:
    assert (
        check_base_url("http://gpu-box.lan:8000/v1", allow_insecure_http=True) == "http://gpu-box.lan:8000/v1"
    )
    with pytest.raises(ModelError):
        check_base_url("http://user@gpu-box.lan/", allow_insecure_http=True)
    with pytest.raises(ModelError):
        check_base_url("ftp://gpu-box.lan/", allow_insecure_http=True)


_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
_LOOPBACK_SPELLINGS = st.sampled_from(["127.0.0.1", "localhost", "127.255.0.9", "[::1]", "LocalHost"])


@given(
    prefix=_LOOPBACK_SPELLINGS,
    joiner=st.sampled_from([".", "@", ".@", "-", ""]),
    labels=st.lists(_LABEL, min_size=1, max_size=3),
    scheme=st.sampled_from(["http", "HTTP", "Http"]),
)
def test_a_remote_host_dressed_as_loopback_never_passes_plain_http(
    prefix: str, joiner: str, labels: list[str], scheme: str
) -> None:
    url = f"{scheme}://{prefix}{joiner}{'.'.join(labels)}/v1"
    refused: str | None = None
    try:
        accepted = check_base_url(url, allow_insecure_http=False)
    except ModelError as error:
        refused = error.code
        accepted = ""
    if refused is not None:
        assert refused == MODEL_CONFIG_INVALID
        return
    # Whatever passed must really be a loopback host after httpx parsed it.
    host = accepted.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
    assert host == "localhost" or ipaddress.ip_address(host).is_loopback


@given(
    octets=st.tuples(*[st.integers(min_value=0, max_value=255)] * 4),
    port=st.one_of(st.none(), st.integers(min_value=1, max_value=65535)),
)
def test_plain_http_to_an_ipv4_address_passes_exactly_for_127_slash_8(
    octets: tuple[int, int, int, int], port: int | None
) -> None:
    host = ".".join(map(str, octets))
    url = f"http://{host}{'' if port is None else f':{port}'}/v1"
    if octets[0] == 127:
        assert check_base_url(url, allow_insecure_http=False).startswith(f"http://{host}")
    else:
        with pytest.raises(ModelError):
            check_base_url(url, allow_insecure_http=False)


# ---------------------------------------------------------------- the key from a file or descriptor

SECRET = "sk-from-a-file-0123456789"


def key_file(tmp_path: Path, content: bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "key"
    path.write_bytes(content)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("content", [SECRET.encode(), SECRET.encode() + b"\n", SECRET.encode() + b"\r\n"])
def test_the_key_comes_from_its_file_without_one_line_ending(tmp_path: Path, content: bytes) -> None:
    assert api_key_from_file(str(key_file(tmp_path, content))).reveal() == SECRET


def test_a_key_file_reached_through_a_link_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(key_file(tmp_path, SECRET.encode()))
    with pytest.raises(ModelError, match="cannot be opened") as caught:
        api_key_from_file(str(link))
    assert caught.value.code == MODEL_CONFIG_INVALID


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_key_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = key_file(tmp_path, SECRET.encode())
    os.chown(path, 4242, -1)
    with pytest.raises(ModelError, match="is not owned by this user"):
        api_key_from_file(str(path))


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        (b"", 0o600, "is empty"),
        (b"\n", 0o600, "is empty"),
        (SECRET.encode() + b"\n\n", 0o600, "does not hold an API key"),
        (SECRET.encode() + b" more", 0o600, "does not hold an API key"),
        ("sk-ключ-0123456789".encode(), 0o600, "does not hold an API key"),
        (b"x" * 20_000, 0o600, "holds more than 16384 bytes"),
        (SECRET.encode(), 0o644, "open to group or others (mode 0644)"),
        (SECRET.encode(), 0o640, "open to group or others (mode 0640)"),
        (SECRET.encode(), 0o602, "open to group or others"),
    ],
)
def test_a_bad_key_file_is_refused_naming_the_path_never_the_content(
    tmp_path: Path, content: bytes, mode: int, message: str
) -> None:
    path = key_file(tmp_path, content, mode)
    with pytest.raises(ModelError) as caught:
        api_key_from_file(str(path))
    assert caught.value.code == MODEL_CONFIG_INVALID
    assert message in caught.value.message
    assert str(path) in caught.value.message
    assert "sk-" not in caught.value.message.replace(str(path), "")


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo", "device"])
def test_a_key_path_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / kind
    if kind == "directory":
        path.mkdir(mode=0o700)
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "device":
        path = Path("/dev/zero")
    with pytest.raises(ModelError) as caught:
        api_key_from_file(str(path))
    assert caught.value.code == MODEL_CONFIG_INVALID
    expected = "cannot be opened" if kind == "missing" else "is not a regular file"
    assert f"the API key file {str(path)!r} {expected}" in caught.value.message


def test_the_key_comes_from_an_inherited_descriptor_which_is_then_closed() -> None:
    reader, writer = os.pipe()
    os.write(writer, SECRET.encode() + b"\n")
    os.close(writer)
    assert api_key_from_descriptor(reader).reveal() == SECRET
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(reader)


@pytest.mark.parametrize("descriptor", [0, 1, 2, 987])
def test_a_standard_stream_or_closed_descriptor_is_refused(descriptor: int) -> None:
    with pytest.raises(ModelError) as caught:
        api_key_from_descriptor(descriptor)
    assert caught.value.code == MODEL_CONFIG_INVALID
    assert f"descriptor {descriptor}" in caught.value.message


def test_the_model_spec_takes_the_key_from_a_file_and_reads_no_variable(tmp_path: Path) -> None:
    path = key_file(tmp_path, SECRET.encode() + b"\n")
    spec = ModelSpec(provider="openai", model="gpt-test", api_key_file=str(path))
    model = model_factory(spec, {})()  # no OPENAI_API_KEY: the file is enough
    assert SECRET not in repr(model)
    both = ModelSpec(
        provider="openai", model="gpt-test", api_key_file=str(path), api_key_env="OPENAI_API_KEY"
    )
    with pytest.raises(ModelError, match="one way"):
        model_factory(both, {"OPENAI_API_KEY": "sk-abcdefgh"})
