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
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from cosim.errors import CosimError, InputError
from cosim.limits import INT64_MAX

__all__ = ["ArgumentParser", "run_command", "nonnegative_float", "nonnegative_int", "positive_int",
           "positive_float", "output_path", "progress_bar", "stderr_line", "staged_folder",
           "put_in_place"]


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


# -- output folders written whole or not at all ----------------------------------------------
# A command writes into a fresh staging folder beside OUT (``.OUT.partial-PID``) and, when
# everything is written, puts it in place of OUT in one rename (the previous OUT, if any, set
# aside first as ``.OUT.old-PID`` and then deleted); the leftovers of killed runs are cleaned
# up by the next run into the same OUT.
def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _leftovers(out: Path) -> list[tuple[Path, str, int]]:
    """(path, kind, pid) of staging and set-aside folders of runs into ``out``."""
    found = []
    for kind in ("partial", "old"):
        for p in out.parent.glob(f".{out.name}.{kind}-*"):
            pid = p.name.rsplit("-", 1)[-1]
            if pid.isdigit():
                found.append((p, kind, int(pid)))
    return found


def staged_folder(out: Path, *, markers: Sequence[str], kind: str, writer: str) -> Path:
    """Check that ``out`` may be replaced, clean up after killed runs, make the staging folder.

    Args:
        out: the folder the command will write (``--out DIR``).
        markers: files one of which marks a folder the command wrote (and may replace).
        kind: what the folder is, for messages (``a results folder``).
        writer: the command that writes it, for messages (``'cosim run'``).

    Raises:
        InputError: ``out`` is a file, a folder that holds something other
            than such a folder, or cannot be made (its parent is a file,
            read-only, ...).
    """
    for path, left, pid in _leftovers(out):
        if pid == os.getpid() or _pid_alive(pid):
            continue   # another run in progress (or this one)
        if left == "old" and not out.exists():
            os.replace(path, out)   # killed between its two renames: put the folder back
        else:
            shutil.rmtree(path, ignore_errors=True)
    if out.exists():
        if not out.is_dir():
            raise InputError(str(out), "a file", f"{kind} (--out DIR)")
        if any(out.iterdir()) and not any((out / m).exists() for m in markers):
            raise InputError(str(out), f"a folder that is not {kind} (no "
                             f"{' or '.join(markers)})",
                             f"a new or empty folder, or one written by {writer} (it is "
                             "replaced as a whole)", "choose another --out")
    stage = out.parent / f".{out.name}.partial-{os.getpid()}"
    above = next((p for p in out.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise InputError(str(out), f"a path under the file {above}",
                         f"{kind} this user can write (--out DIR)")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir()
    except OSError as err:   # a parent that is a file, read-only or a pseudo file system
        raise InputError.from_os_error(err, out, f"{kind} this user can write "
                                       "(--out DIR)") from None
    return stage


def put_in_place(stage: Path, out: Path) -> None:
    """Replace ``out`` by ``stage``: the old folder is set aside, the new renamed in, the old deleted."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
    os.replace(stage, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
