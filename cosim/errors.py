"""User-facing errors.

Every error a user can cause (a bad scenario key, a malformed SWF line, a
missing file) is a :class:`CosimError`. The CLIs print ``str(error)`` as one
line and exit with code 2, and so they do for an ``OSError`` naming a path
(the file system refused it: :meth:`InputError.from_os_error`); anything else
escaping is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["CosimError", "InputError", "ScenarioError", "WorkloadError", "did_you_mean"]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """The hint for an unknown name: ``"did you mean 'jobs'?"``, or "" when nothing is close.

    Every "unknown key" message says it the same way (difflib's closest match
    at its default cutoff), so the hint reads alike in every CLI.

    Examples:
        >>> did_you_mean("jbos", ["jobs", "cluster"])
        "did you mean 'jobs'?"
        >>> did_you_mean("zzz", ["jobs"])
        ''
    """
    near = difflib.get_close_matches(word, list(choices), n=1)
    return f"did you mean {near[0]!r}?" if near else ""


class CosimError(Exception):
    """Base class of errors caused by user input, printed as one line."""


class InputError(CosimError):
    """A file or value given by the user is missing or malformed.

    Args:
        where: file and line (``"trace.swf:12"``) or key path (``"cluster.cores"``).
        found: what was found, already formatted for the message.
        expected: what was expected instead.
        hint: an optional suggestion ("did you mean 'jobs'?").
    """

    def __init__(self, where: str, found: str, expected: str, hint: str = ""):
        self.where, self.found, self.expected, self.hint = where, found, expected, hint
        message = f"{where}: expected {expected}, got {found}"
        super().__init__(f"{message}; {hint}" if hint else message)

    @classmethod
    def from_os_error(cls, err: OSError, path: str | os.PathLike | None = None,
                      expected: str = "a path this user can read or write") -> InputError:
        """The error for a path the file system refused (``err``), named by ``path``.

        A path under a file (``--out trace.swf/x``) says so; otherwise the
        system's reason (read-only, no such folder, disk full) is quoted.
        """
        named = err.filename
        name = os.fsdecode(named) if isinstance(named, str | bytes | os.PathLike) else None
        where = Path(path if path is not None else name or "?")
        above = next((p for p in Path(name or where).parents if p.exists()), None)
        if above is not None and not above.is_dir():
            found = f"a path under the file {above}"
        else:
            found = str(err.strerror or err)
            if name and Path(name) != where:
                found += f" ({name})"
        return cls(str(where), found, expected)


class ScenarioError(InputError):
    """A scenario file or ``--set`` override is invalid."""


class WorkloadError(InputError):
    """A workload (trace or generator parameters) is invalid."""
