"""The limits on what an input may ask for, in one place.

A well-formed input can still be unbounded: a cluster of 10^12 nodes, a
3 MB gzip that inflates to 3 GiB, a document nested 100,000 levels deep, a
grid of millions of runs. Each such value is checked once, where it enters
(the scenario loader, the trace reader, the JSON reader, the study planner,
the model loaders), against a :class:`Limit` of this module, and refused
with one line that names the limit and how to raise it: every limit but
the integer range is raised with an environment variable
``COSIM_MAX_<NAME>`` (``COSIM_MAX_NODES=5000000``).

The table of limits is ``docs/reference/limits.md``; :data:`LIMITS` is the
same list in code (a test checks the page against it).

Examples:
    >>> NODES.check(256, "cluster.nodes")
    256
    >>> NODES.check(10**12, "cluster.nodes")
    Traceback (most recent call last):
    ...
    cosim.limits.LimitError: cluster.nodes: expected at most 1,000,000 (the limit on nodes in a cluster; raise it with COSIM_MAX_NODES=N), got 1,000,000,000,000
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cosim.errors import InputError

__all__ = ["Limit", "LimitError", "LIMITS", "NODES", "CORES_PER_NODE", "SCENARIO_BYTES",
           "JSON_BYTES", "TRACE_BYTES", "DEPTH", "STUDY_RUNS", "BOOTSTRAP", "NODE_FAILURES", "NETWORK_PARAMS", "check_network", "INT64_MIN", "INT64_MAX", "MIN_MTBF", "MAX_START_LIMIT",
           "MAX_RELAXED_SLACK", "MAX_PRIORITY_WEIGHT",
           "MIN_UPDATE_INTERVAL", "check_int64", "out_of_int64", "read_bytes",
           "gunzip", "parse_json", "read_json", "load_yaml", "deeper_than"]

ENV_PREFIX = "COSIM_MAX_"

#: The range of a 64-bit signed integer: numpy's int64 columns, seeds, counts.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Smallest ``faults.mtbf`` (s) but 0 (no failures). Below it a node fails
#: faster than any scheduler pass could react; every node failing each
#: minute is already a machine that never runs a wide job.
MIN_MTBF = 60.0

#: The default ``faults.start_limit`` is ``10 x mttr`` but at most this (7 days):
#: finite whatever ``mttr`` is (``.inf``: nodes never repaired).
MAX_START_LIMIT = 7 * 86400.0

#: Smallest ``predictor.update_interval`` (s): progress checks of every
#: running job more often than this cost wall time, not accuracy.
MIN_UPDATE_INTERVAL = 1.0

#: Largest relaxed EASY slack (``+relaxed=SLACK``, a policy file's ``slack``):
#: the head may wait SLACK more of its own estimates. Past this the promise
#: is no promise (1e308 x an estimate overflows to infinity): greedy
#: backfilling, which has its own name.
MAX_RELAXED_SLACK = 1000.0

#: Largest absolute priority weight (a ``learned:DIR`` policy file). Keys
#: only order jobs, so a weight vector means the same scaled down; past this
#: a key overflows (1e308 x a feature is infinite) and the order is arbitrary.
MAX_PRIORITY_WEIGHT = 1e6


class LimitError(InputError):
    """An input asked for more than a :class:`Limit` allows."""


@dataclass(frozen=True)
class Limit:
    """One limit: its name, default, what it counts and where it is checked.

    Attributes:
        name: the suffix of its environment variable (``COSIM_MAX_<NAME>``).
        default: the value when the variable is unset.
        what: what it counts, for messages ("nodes in a cluster").
        checked: where it is checked, for the table of limits.
    """

    name: str
    default: int
    what: str
    checked: str

    @property
    def env(self) -> str:
        """The environment variable that raises it."""
        return ENV_PREFIX + self.name.upper()

    @property
    def value(self) -> int:
        """The limit now: the environment variable's whole number, else the default."""
        text = os.environ.get(self.env)
        if text is None or not text.strip():
            return self.default
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise InputError(self.env, repr(text), "a whole number above 0") from None
        if value <= 0:
            raise InputError(self.env, text, "a whole number above 0")
        return value

    def error(self, found: Any, where: str) -> LimitError:
        """The one-line error for ``found`` past this limit at ``where``."""
        shown = f"{found:,}" if isinstance(found, int) else str(found)
        return LimitError(where, shown, f"at most {self.value:,} (the limit on {self.what}; "
                                        f"raise it with {self.env}=N)")

    def check(self, value: int, where: str) -> int:
        """``value`` when it is within the limit, else :class:`LimitError`."""
        if value > self.value:
            raise self.error(value, where)
        return value


LIMITS: dict[str, Limit] = {}


def _limit(name: str, default: int, what: str, checked: str) -> Limit:
    LIMITS[name] = Limit(name, default, what, checked)
    return LIMITS[name]


MiB = 2**20
NODES = _limit("nodes", 1_000_000, "nodes in a cluster",
               "cluster.nodes; the machine a trace states (SWF MaxProcs/MaxNodes, sacct peak)")
CORES_PER_NODE = _limit("cores_per_node", 1_000_000, "cores on one node", "cluster.cores_per_node")
SCENARIO_BYTES = _limit("scenario_bytes", 4 * MiB, "bytes of a scenario or study file",
                        "the scenario loader (cosim run/validate/sweep/study, agents --scenario)")
JSON_BYTES = _limit("json_bytes", 256 * MiB, "bytes of a JSON file",
                    "the JSON reader (summary, comparison, policy.json, meta.json, history)")
TRACE_BYTES = _limit("trace_bytes", 256 * MiB,
                     "bytes of a trace, on disk and after decompression",
                     "the trace reader (SWF, sacct; gzip inflated in bounded steps)")
DEPTH = _limit("depth", 64, "levels of nesting of a YAML or JSON document",
               "the YAML loader and the JSON reader")
STUDY_RUNS = _limit("study_runs", 100_000, "runs of one study (settings x seeds x policies)",
                    "the study planner, before any run (--dry-run too)")
BOOTSTRAP = _limit("bootstrap", 1_000_000, "bootstrap resamples of a study", "study.bootstrap")
NODE_FAILURES = _limit("node_failures", 100_000, "node failures in one run",
                       "a run with faults: at the bound, failures stop and queued jobs are "
                       "given up (with one warning)")

NETWORK_PARAMS = _limit("network_params", 50_000_000,
                        "parameters of a network a checkpoint or model folder describes",
                        "an agent's network spec (checkpoint meta.json, --hidden) and a run-time "
                        "RNN's meta.json, counted before the network is built")


def check_network(layers: list[tuple[int, int]], where: str) -> int:
    """The parameter count of fully connected ``(inputs, outputs)`` layers, within :data:`NETWORK_PARAMS`.

    Counted from the shapes alone (weights and a bias per output), so a
    description asking for a 40 GB network or 10**6 layers is refused
    before torch allocates anything. Recurrent and convolutional layers are
    passed as the fully connected layers with the same weights.

    Raises:
        LimitError: more parameters than the limit; InputError: a width below 1.
    """
    total = 0
    for inputs, outputs in layers:
        if inputs < 1 or outputs < 1:
            raise InputError(where, f"a layer of {inputs} x {outputs}", "layer widths of at least 1")
        total += (inputs + 1) * outputs
        if total > NETWORK_PARAMS.value:   # stop counting a 10**6-layer description early
            raise NETWORK_PARAMS.error(f"more than {NETWORK_PARAMS.value:,} parameters", where)
    return total


def out_of_int64(value: Any) -> bool:
    """Whether ``value`` is an integer (not a bool) outside the int64 range."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and not INT64_MIN <= value <= INT64_MAX)


def check_int64(value: int, where: str) -> int:
    """``value`` when it fits an int64 (numpy's columns, seeds), else one :class:`LimitError`."""
    if out_of_int64(value):
        text = str(value)
        shown = text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"
        raise LimitError(where, shown, "a whole number within int64 (-2**63 to 2**63-1)")
    return value


# ------------------------------------------------------------------ files ----

def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bytes(path: str | os.PathLike, expected: str, limit: Limit) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    A FIFO, a device, a socket or a directory is refused before it is
    opened (reading ``/dev/zero`` never ends; opening a FIFO waits for a
    writer), and so is a file larger than the limit.

    Raises:
        InputError: missing, unreadable, not a regular file; LimitError: too large.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(str(path), "no such file", expected) from None
    except OSError as exc:
        raise InputError(str(path), f"an unreadable file ({exc.strerror or exc})",
                         expected) from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(str(path), _kind_of(st.st_mode), expected)
    if st.st_size > limit.value:
        raise limit.error(f"{st.st_size:,} bytes", str(path))
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit.value + 1)
    except OSError as exc:
        raise InputError(str(path), f"an unreadable file ({exc.strerror or exc})",
                         expected) from None
    if len(data) > limit.value:  # it grew since stat
        raise limit.error(f"more than {limit.value:,} bytes", str(path))
    return data


_STEP = 8 * MiB


def gunzip(raw: bytes, where: str, limit: Limit,
           error: type[InputError] = InputError) -> bytes:
    """``raw`` inflated (every gzip member), refused once it passes ``limit`` bytes.

    Inflates twice: once counting and discarding, so a small file that would
    inflate to gigabytes is refused holding one step (8 MiB), then keeping
    the pieces of a file within the limit. A trace's gzip inflates at
    hundreds of MB/s, so the first pass costs little beside parsing it.

    Raises:
        error: a corrupt gzip stream; LimitError: too large inflated.
    """
    _inflate(raw, where, limit, error, keep=None)
    pieces: list[bytes] = []
    _inflate(raw, where, limit, error, keep=pieces)
    return b"".join(pieces)


def _inflate(raw: bytes, where: str, limit: Limit, error: type[InputError],
             keep: list[bytes] | None) -> None:
    most = limit.value
    held = 0
    data = raw
    try:
        while data:
            d = zlib.decompressobj(wbits=31)
            chunk = data
            while chunk and not d.eof:
                # Steps of at most 8 MiB: inflating more at once makes zlib grow
                # (and copy) one buffer, twice the memory held.
                piece = d.decompress(chunk, min(_STEP, most + 1 - held))
                held += len(piece)
                if held > most:
                    raise limit.error(f"more than {most:,} bytes inflated", where)
                if keep is not None:
                    keep.append(piece)
                chunk = d.unconsumed_tail
            if not d.eof:
                raise error(where, "a corrupt gzip stream (it ends before its end marker)",
                            "a valid .gz file")
            data = d.unused_data
            if data.strip(b"\x00") == b"":   # zero padding after the last member
                break
    except zlib.error as exc:
        raise error(where, f"a corrupt gzip stream ({exc})", "a valid .gz file") from None


# ------------------------------------------------------------ documents ----

def deeper_than(doc: Any, limit: int) -> bool:
    """Whether lists and mappings in ``doc`` nest more than ``limit`` levels.

    Iterative (the point is not to recurse); a container shared by YAML
    aliases is walked again only when reached deeper than before, so a
    "billion laughs" document costs its size, not its expansion.
    """
    stack = [(doc, 1)]
    seen: dict[int, int] = {}
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list | tuple):
            if depth > limit:
                return True
            if seen.get(id(value), 0) >= depth:
                continue
            seen[id(value)] = depth
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)
    return False


def _too_deep(where: str, kind: str) -> LimitError:
    return LimitError(where, f"{kind} nested too deeply",
                      f"a {kind} document nested at most {DEPTH.value} levels "
                      f"(raise it with {DEPTH.env}=N)")


def parse_json(text: str | bytes, where: str, expected: str = "a JSON document") -> Any:
    """``json.loads(text)`` with every way it fails as one :class:`InputError` naming ``where``.

    A document nested deeper than :data:`DEPTH` is refused (the parser
    itself recurses once per level), and so is an integer past Python's
    digit limit.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}:{exc.lineno}", f"invalid JSON ({exc.msg})", expected) from None
    except RecursionError:
        raise _too_deep(where, "JSON") from None
    except UnicodeDecodeError as exc:
        raise InputError(where, f"a byte that is not UTF-8 at offset {exc.start}",
                         "a UTF-8 JSON file") from None
    except ValueError as exc:  # an integer too long to convert (Python's digit limit)
        raise InputError(where, f"invalid JSON ({exc})", expected) from None
    if deeper_than(doc, DEPTH.value):
        raise _too_deep(where, "JSON")
    return doc


def read_json(path: str | os.PathLike, expected: str = "a JSON document") -> Any:
    """Read and parse the JSON file ``path`` (a regular file within :data:`JSON_BYTES`).

    Raises:
        InputError: missing, unreadable, not a regular file, too large, not
            UTF-8, invalid or too deeply nested; the message names the file.
    """
    path = Path(path)
    data = read_bytes(path, expected, JSON_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"a byte that is not UTF-8 at offset {exc.start}",
                         "a UTF-8 JSON file") from None
    return parse_json(text, str(path), expected)


def load_yaml(text: str, where: str) -> Any:
    """``yaml.safe_load(text)``, a document nested deeper than :data:`DEPTH` refused.

    Raises:
        LimitError: too deep (PyYAML's composer recurses once per level).
        yaml.YAMLError: malformed YAML (the caller words it).
    """
    import yaml

    try:
        doc = yaml.safe_load(text)
    except RecursionError:
        raise _too_deep(where, "YAML") from None
    if deeper_than(doc, DEPTH.value):
        raise _too_deep(where, "YAML")
    return doc
