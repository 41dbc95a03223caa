"""Choosing the session store: SQLite by default, PostgreSQL by flag or HARNESS_DATABASE_URL (issue #22).

The PostgreSQL store itself is tested against a real server in packages/store-postgres and
by the replica tests; this file pins the choice, its refusals, and that a URL (which may hold
a password) is never echoed in an error or a repr.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

from agent_server import ServerConfig, StorageConfig
from agent_server._cli import _parser, build_config  # pyright: ignore[reportPrivateUsage]
from agent_server._cli_config import build_embedded_config
from agent_server._server import POSTGRES_STORE_MISSING, postgres_store

SECRET_URL = "postgresql://agent:hunter2@127.0.0.1:5432/harness"


def _config(tmp_path: Path, argv: list[str], environ: dict[str, str] | None = None) -> ServerConfig:
    arguments = _parser().parse_args(["serve", "--workspace-root", str(tmp_path), *argv])
    return build_config(arguments, environ or {})


def test_sqlite_stays_the_default(tmp_path: Path) -> None:
    config = _config(tmp_path, [])
    assert config.storage.database_url is None
    assert config.storage.persistence


def test_the_flag_or_the_variable_chooses_postgres(tmp_path: Path) -> None:
    assert (
        _config(tmp_path, ["--store", "postgres", "--database-url", SECRET_URL]).storage.database_url
        == SECRET_URL
    )
    assert _config(tmp_path, [], {"HARNESS_DATABASE_URL": SECRET_URL}).storage.database_url == SECRET_URL
    assert _config(tmp_path, ["--database-url", SECRET_URL]).storage.database_url == SECRET_URL
    # The flag wins over the variable; an explicit --store sqlite ignores the variable.
    other = "postgresql://other@127.0.0.1/db"
    assert (
        _config(
            tmp_path, ["--database-url", other], {"HARNESS_DATABASE_URL": SECRET_URL}
        ).storage.database_url
        == other
    )
    assert (
        _config(tmp_path, ["--store", "sqlite"], {"HARNESS_DATABASE_URL": SECRET_URL}).storage.database_url
        is None
    )


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (["--store", "postgres"], {}, "--store postgres needs --database-url or HARNESS_DATABASE_URL"),
        (["--store", "sqlite", "--database-url", SECRET_URL], {}, "--database-url is for --store postgres"),
        (["--database-url", SECRET_URL, "--db", "x.sqlite"], {}, "--db and --no-db are for --store sqlite"),
        (
            ["--store", "postgres", "--no-db"],
            {"HARNESS_DATABASE_URL": SECRET_URL},
            "--db and --no-db are for",
        ),
        (["--database-url", "mysql://root:hunter2@db/x"], {}, "must start with postgresql:// or postgres://"),
        (["--database-url", "postgresql://a:hunter2@h/d\n"], {}, "must not hold control characters"),
        ([], {"HARNESS_DATABASE_URL": "sqlite:///hunter2"}, "HARNESS_DATABASE_URL: database_url must start"),
    ],
)
def test_contradictions_and_bad_urls_are_refused_without_echoing_the_url(
    tmp_path: Path, argv: list[str], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as refused:
        _config(tmp_path, argv, environ)
    assert "hunter2" not in str(refused.value)


def test_the_config_checks_the_url_and_hides_it() -> None:
    config = ServerConfig(storage=StorageConfig(database_url=SECRET_URL))
    assert "hunter2" not in repr(config)
    with pytest.raises(ValueError, match="excludes db_path"):
        ServerConfig(storage=StorageConfig(database_url=SECRET_URL, db_path="x.sqlite"))
    with pytest.raises(ValueError, match="excludes db_path"):
        ServerConfig(storage=StorageConfig(database_url=SECRET_URL, persistence=False))
    with pytest.raises(ValueError, match="at most 4096"):
        ServerConfig(storage=StorageConfig(database_url="postgresql://" + "h" * 4096))
    with pytest.raises(ValueError, match="must be a str"):
        ServerConfig(storage=StorageConfig(database_url=b"postgresql://x"))  # pyright: ignore[reportArgumentType]


def test_without_the_distribution_the_server_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def missing(name: str, package: str | None = None) -> ModuleType:
        if name == "harness_store_postgres":
            raise ModuleNotFoundError(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(ValueError, match="install agent-server\\[postgres\\]") as refused:
        postgres_store(SECRET_URL)
    assert str(refused.value) == POSTGRES_STORE_MISSING


def test_the_acp_adapters_embedded_server_keeps_sqlite_whatever_the_variable_says(tmp_path: Path) -> None:
    arguments = _parser().parse_args(["acp", "--workspace-root", str(tmp_path)])
    # What `agent-server acp` builds its embedded server from (chat's as well).
    config = build_embedded_config(
        arguments, {"HARNESS_DATABASE_URL": SECRET_URL}, workspace_root=str(tmp_path)
    )
    assert config.storage.database_url is None


def test_the_session_lease_is_a_serve_flag(tmp_path: Path) -> None:
    assert _config(tmp_path, []).limits.session_lease_ms == 30_000
    assert _config(tmp_path, ["--session-lease-seconds", "2"]).limits.session_lease_ms == 2_000
    with pytest.raises(SystemExit):
        _config(tmp_path, ["--session-lease-seconds", "0"])
