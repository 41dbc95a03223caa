"""The real-time waits as configuration: ``outbound_stall_ms`` and ``close_grace_ms`` (spec §2.4, §9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_server import LimitsConfig, ServerConfig
from agent_server._cli import _parser, build_config, main  # pyright: ignore[reportPrivateUsage]
from agent_server._environment import parse_outbound_stall_ms, read_environment

WAITS = [
    pytest.param("outbound_stall_ms", 10, 600_000, id="outbound_stall_ms"),
    pytest.param("close_grace_ms", 10, 60_000, id="close_grace_ms"),
]
STALL_MESSAGE = "must be an integer from 10 to 600000"
VARIABLE = "HARNESS_AGENT_OUTBOUND_STALL_MS"


def _config_with(name: str, value: object) -> LimitsConfig:
    options: dict[str, Any] = {name: value}
    return ServerConfig(limits=LimitsConfig(**options)).limits


def test_the_waits_default_to_a_five_second_stall_and_a_one_second_grace() -> None:
    config = ServerConfig()
    assert (config.limits.outbound_stall_ms, config.limits.close_grace_ms) == (5_000, 1_000)


@pytest.mark.parametrize(("name", "low", "high"), WAITS)
@given(value=st.integers(min_value=-(10**7), max_value=10**7) | st.sampled_from([9, 10, 60_000, 600_000]))
def test_a_wait_is_accepted_exactly_within_its_range_in_milliseconds(
    name: str, low: int, high: int, value: int
) -> None:
    if low <= value <= high:
        assert getattr(_config_with(name, value), name) == value
    else:
        with pytest.raises(ValueError, match=f"^{name} must be an integer from {low} to {high}$"):
            _config_with(name, value)


@pytest.mark.parametrize(("name", "low", "high"), WAITS)
@given(
    value=st.booleans()
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.none()
    | st.integers(min_value=10, max_value=1000).map(str)
)
def test_a_wait_that_is_not_an_int_is_refused_even_when_its_value_is_in_range(
    name: str, low: int, high: int, value: object
) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be an integer from {low} to {high}$"):
        _config_with(name, value)


@given(
    text=st.text(max_size=12)
    | st.integers(min_value=0, max_value=10**8).map(str)
    | st.tuples(st.text("0", max_size=12), st.integers(min_value=0, max_value=700_000)).map(
        lambda parts: parts[0] + str(parts[1])
    )
)
def test_the_flag_and_the_variable_accept_exactly_ascii_digits_naming_10_to_600000_ms(text: str) -> None:
    usable = text.isascii() and text.isdigit() and 10 <= int(text) <= 600_000
    environ = {VARIABLE: text}
    if usable:
        assert parse_outbound_stall_ms(text) == int(text)
        assert read_environment(environ).outbound_stall_ms == int(text)
    else:
        with pytest.raises(ValueError, match=f"^{STALL_MESSAGE}$"):
            parse_outbound_stall_ms(text)
        with pytest.raises(ValueError, match=f"^{VARIABLE} {STALL_MESSAGE}$"):
            read_environment(environ)


def test_the_flag_overrides_the_variable_which_overrides_the_default(tmp_path: Path) -> None:
    serve = ["serve", "--no-db", "--workspace-root", str(tmp_path)]
    assert build_config(_parser().parse_args(serve), {}).limits.outbound_stall_ms == 5_000
    assert build_config(_parser().parse_args(serve), {VARIABLE: "250"}).limits.outbound_stall_ms == 250
    flagged = _parser().parse_args([*serve, "--outbound-stall-ms", "40"])
    assert build_config(flagged, {VARIABLE: "250"}).limits.outbound_stall_ms == 40
    assert build_config(flagged, {}).limits.outbound_stall_ms == 40


@pytest.mark.parametrize("value", ["9", "600001", "-5", "1.5", "1e3", " 100", "٣٠٠", ""])
def test_serve_refuses_a_bad_stall_flag_or_variable_with_exit_2(
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["serve", "--port", "0", "--no-db", "--workspace-root", str(tmp_path)]
    with pytest.raises(SystemExit) as parse_error:  # argparse exits by itself
        main([*argv, f"--outbound-stall-ms={value}"])
    assert parse_error.value.code == 2
    assert f"argument --outbound-stall-ms: {STALL_MESSAGE}" in capsys.readouterr().err
    monkeypatch.setenv(VARIABLE, value)
    assert main(argv) == 2
    assert f"{VARIABLE} {STALL_MESSAGE}" in capsys.readouterr().err
