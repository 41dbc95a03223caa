"""``python -m agent_server``: the same CLI as the ``agent-server`` script."""

from agent_server._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
