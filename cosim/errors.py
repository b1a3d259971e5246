"""User-facing errors.

Every error a user can cause (a bad scenario key, a malformed SWF line, a
missing file) is a :class:`CosimError`. The CLIs print ``str(error)`` as one
line and exit with code 2; anything else escaping is a bug and keeps its
traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

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


class ScenarioError(InputError):
    """A scenario file or ``--set`` override is invalid."""


class WorkloadError(InputError):
    """A workload (trace or generator parameters) is invalid."""
