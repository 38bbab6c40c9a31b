"""`kubectl-lj`: the kit as a kubectl plugin. kubectl runs an executable named `kubectl-lj` found on
PATH for `kubectl lj ...`, passing the words after `lj` and its own environment (KUBECONFIG), so
`kubectl lj inspect --node n1` is `runtimekit inspect --node n1`. The entry point is installed by
the package (`[project.scripts]`); docs/user-guide/inspect.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from runtimekit.cli.main import main as runtimekit_main

SUBCOMMANDS = ("inspect",)  # the kit's commands that make sense from a user's kubectl


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in SUBCOMMANDS:
        print(f"usage: kubectl lj {{{','.join(SUBCOMMANDS)}}} [options]  (kubectl lj inspect --help)", file=sys.stderr)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    return runtimekit_main(["--log-level", "WARNING", *args])


if __name__ == "__main__":
    sys.exit(main())
