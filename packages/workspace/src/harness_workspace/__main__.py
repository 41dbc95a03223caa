"""``python -m harness_workspace``: a short tour of the contract on the in-memory fake."""

from harness_workspace._demo import main

if __name__ == "__main__":
    raise SystemExit(main())
