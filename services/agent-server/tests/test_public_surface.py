"""agent-server's public surface: exactly these names, each documented."""

from __future__ import annotations

import inspect

import agent_server

EXPECTED = {
    "PROTOCOL_VERSION",
    "AcpError",
    "LimitsConfig",
    "ModelConfig",
    "NetworkConfig",
    "ServerConfig",
    "ServerHandle",
    "StorageConfig",
    "ToolProviderContext",
    "WorkspaceConfig",
    "__version__",
    "embedded_server",
    "serve",
}


def test_the_package_exports_exactly_its_pinned_names() -> None:
    assert set(agent_server.__all__) == EXPECTED
    assert len(agent_server.__all__) == len(EXPECTED)
    public = {name for name in vars(agent_server) if not name.startswith("_")}
    assert public - EXPECTED == {"client"}  # the client module, imported by the server


def test_every_public_callable_and_class_has_a_docstring() -> None:
    for name in EXPECTED:
        value = getattr(agent_server, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name
