"""What the three command lines (``cosim``, ``predictors``, ``agents``) share.

Every user error, from argparse or from a :class:`~cosim.errors.CosimError`
raised deeper down, prints one line and exits with code 2; Ctrl-C exits with
130 and a short word; anything else keeps its traceback (it is a bug).

Examples:
    >>> parser = ArgumentParser(prog="demo")
    >>> _ = parser.add_argument("--n", type=int)
    >>> run_command(lambda argv: parser.parse_args(argv).n or 0, ["--n", "3"])
    3
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from cosim.errors import CosimError

__all__ = ["ArgumentParser", "run_command", "stderr_line"]


def stderr_line(text: str) -> None:
    """Print ``text`` as one line on stderr at once (progress and notices, never the results)."""
    print(text, file=sys.stderr, flush=True)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors are one line and exit code 2.

    Sub-parsers made with ``add_subparsers(parser_class=ArgumentParser)`` behave
    the same way.
    """

    def error(self, message: str):  # noqa: D102 - argparse's hook
        self.exit(2, f"{self.prog}: error: {message}\n")


def run_command(handler: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None,
                *, interrupted: str = "interrupted") -> int:
    """Run a CLI ``handler(argv) -> exit code``, turning user errors into one line.

    Args:
        handler: parses ``argv`` and does the work.
        argv: the arguments (None: ``sys.argv[1:]``).
        interrupted: what to print on Ctrl-C (exit code 130).
    """
    try:
        return handler(argv)
    except CosimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        return 130
