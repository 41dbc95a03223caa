"""``python -m harness_import_boundary``: the same command line as ``harness-import-boundary``."""

from harness_import_boundary._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
