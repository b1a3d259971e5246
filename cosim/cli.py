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
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from cosim.errors import CosimError, InputError
from cosim.limits import INT64_MAX

__all__ = ["ArgumentParser", "run_command", "nonnegative_float", "nonnegative_int", "positive_int",
           "positive_float", "output_path", "progress_bar", "stderr_line"]


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


def nonnegative_float(text: str) -> float:
    """argparse ``type=``: a finite number, 0 or more (seconds, budgets).

    >>> nonnegative_float("2.5")
    2.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of 0 or more, got {text!r}") \
            from None
    if not (0 <= value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a number of 0 or more, got {text}")
    return value


def _whole_number(text: str, least: int, words: str) -> int:
    """``int(text)`` when it is at least ``least`` and fits an int64 (numpy's and
    torch's seeds and counts), else argparse's error naming ``words``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {words}, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected {words}, got {text}")
    if value > INT64_MAX:
        raise argparse.ArgumentTypeError(f"expected {words} within int64 (at most 2**63-1), "
                                         f"got {text[:24]}{'...' if len(text) > 24 else ''}")
    return value


def positive_float(text: str) -> float:
    """argparse ``type=``: a finite number above 0 (intervals, periods).

    >>> positive_float("0.5")
    0.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}") from None
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text}")
    return value


def output_path(text: str) -> str:
    """argparse ``type=``: a path to write, not empty (``Path("")`` is the working folder).

    >>> output_path("runs/a")
    'runs/a'
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path to write, got {text!r}")
    return text


def nonnegative_int(text: str) -> int:
    """argparse ``type=``: a whole number, 0 or more (seeds: numpy takes no others).

    >>> nonnegative_int("0")
    0
    """
    return _whole_number(text, 0, "a whole number of 0 or more")


def positive_int(text: str) -> int:
    """argparse ``type=``: a whole number above 0 (steps, episodes, jobs).

    >>> positive_int("3")
    3
    """
    return _whole_number(text, 1, "a whole number above 0")


class _Lines:
    """A stream that turns a progress bar's carriage-return frames into whole lines.

    A log file or a pipe keeps every ``\\r`` frame a bar writes (thousands
    of them in one line); here a frame becomes one plain line at most every
    ``every`` seconds, and the last frame is written when the bar clears or
    closes, so the log ends on the final count.
    """

    def __init__(self, stream: TextIO, every: float = 10.0):
        self.stream, self.every = stream, every
        self.pending: str | None = None
        self.last = -float("inf")

    def write(self, text: str) -> int:
        line = text.replace("\r", "").rstrip()
        if line:
            self.pending = line
            if time.monotonic() - self.last >= self.every or text.endswith("\n"):
                self._emit()
        elif self.pending:      # the bar clears itself: keep its last state in the log
            self._emit()
        return len(text)

    def _emit(self) -> None:
        self.stream.write(self.pending + "\n")
        self.stream.flush()
        self.pending, self.last = None, time.monotonic()

    def flush(self) -> None:
        self.stream.flush()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # no isatty, or a closed stream
        return False


def progress_bar(**kwargs: Any):
    """A ``tqdm`` bar on ``file`` (default stderr) that behaves in logs.

    On a terminal it is tqdm as asked. Elsewhere (a file, a pipe, a CI log)
    it writes whole lines, at most one every 10 s plus the final count, and
    never a carriage return (:class:`_Lines`).
    """
    from tqdm import tqdm

    stream = kwargs.pop("file", None) or sys.stderr
    if not _is_terminal(stream):
        kwargs.update(file=_Lines(stream), dynamic_ncols=False, ncols=100)
    else:
        kwargs["file"] = stream
    return tqdm(**kwargs)


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
    except OSError as exc:
        # The file system refused a path the user named (an output under a
        # file, a read-only folder, a full disk): one line, not a traceback.
        if not isinstance(exc.filename, str | bytes | os.PathLike):
            raise
        print(f"error: {InputError.from_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        return 130
