"""Slurm's scheduling knobs by their slurm.conf names: parsing, defaults, the policy-name form.

``slurm`` alone is Slurm's documented defaults; ``slurm:KEY=VALUE,KEY=VALUE``
sets knobs in the policy name, and a scenario's ``scheduler.slurm`` mapping
sets them for every ``slurm`` policy it runs (the name wins where both say
a knob). Keys are slurm.conf's, matched case-insensitively as slurm.conf
matches them ("The contents of the file are case insensitive except for the
names of nodes and partitions", slurm.conf(5)).

Priority (priority/multifactor, https://slurm.schedmd.com/priority_multifactor.html):

- ``PriorityWeightAge``, ``PriorityWeightJobSize``, ``PriorityWeightFairshare``,
  ``PriorityWeightPartition``, ``PriorityWeightQOS``: integers >= 0, default 0
  (slurm.conf(5): "The default value is 0"). Every weight 0 makes every
  priority equal, and Slurm then evaluates jobs by submit time, then job id
  (the evaluation order in priority_multifactor.html): first in, first out.
- ``PriorityMaxAge``: the wait at which the age factor reaches 1; default
  ``7-0`` (7 days).
- ``PriorityFavorSmall``: ``YES`` makes the job-size factor favour small
  jobs; default ``NO``.
- ``PriorityFlags``: ``SMALL_RELATIVE_TO_TIME`` bases the job-size factor on
  the job's size divided by its time limit (slurm.conf(5)): here its share of
  the machine over its estimate in minutes (at most 1), so short wide jobs
  rank high (its complement with ``PriorityFavorSmall=YES``); ``NO_FAIR_TREE``
  (the classic fair-share, which is what this model computes) is accepted
  and changes nothing; default none.
- ``PriorityDecayHalfLife``: the half-life of past usage in the fair-share
  factor; default ``7-0``; ``0`` disables decay.
- ``PriorityUsageResetPeriod``: ``NONE`` (default), ``NOW`` (a reset at start:
  the same as NONE for a run that starts without usage), ``DAILY``,
  ``WEEKLY``, ``MONTHLY``, ``QUARTERLY``, ``YEARLY``: usage is cleared at
  every such boundary of simulated time (counted from the workload's time 0;
  a month is 30 days, a quarter 91, a year 365).

Time values take slurm.conf's forms: minutes, ``MM:SS``, ``HH:MM:SS``,
``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``.

Backfill (sched/backfill, ``SchedulerParameters`` in slurm.conf(5) and
https://slurm.schedmd.com/sched_config.html):

- ``bf_window``: minutes ahead in which a job may be planned; default 1440
  (one day).
- ``bf_max_job_test``: how many jobs the backfill pass plans, in priority
  order; default 500 (Slurm before 20.11: 100); at most 1,000,000.
- ``bf_resolution``: seconds; planned times are whole multiples of it from
  the pass's start; default 60.
- ``bf_interval``: seconds between backfill cycles; default 30. The main
  scheduler (jobs in priority order while the first fits) runs at every
  event; a backfill cycle runs at an event when ``bf_interval`` has passed
  since the last cycle, else once that much time has passed, provided
  something changed since the last cycle (sched/backfill's agent: it sleeps
  ``bf_interval`` and skips a cycle when no job, node or partition changed).
  ``0`` (hpc-cosim's own; Slurm takes 1..10800) runs a cycle at every event,
  as textbook EASY and conservative backfilling do.

Scenario-only (mappings have no policy-name form): ``partitions``, a mapping
from a partition (or queue) label to its ``PriorityJobFactor``, and ``qos``, a
mapping from a QOS label to its ``Priority``; factors are normalised by the
largest (slurm.conf's PartitionName=... PriorityJobFactor; sacctmgr's QOS
Priority). A label the mapping lacks has factor 0; without a mapping every
job's factor is 1 (no effect on the order). And ``shares``, the fair-share
``Fairshare=`` of associations (``sacctmgr modify account NAME set
Fairshare=N``, ``sacctmgr modify user NAME set Fairshare=N``; ``RawShares`` in
``sshare``): a mapping from an account (the workload's ``account`` column) or
a user (its id) to a whole number >= 1; ``account:NAME`` and ``user:NAME``
say which where a name is both. An association it does not name has 1 (equal
shares); a name no account or user of the workload has is refused when the
policy is bound to the workload.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from cosim.errors import ScenarioError

__all__ = ["SlurmParams", "parse_slurm_params", "parse_slurm_time", "format_slurm_time",
           "RESET_PERIODS", "SLURM_KEYS", "SLURM_PREFIX", "SLURM_SPACE", "slurm_space",
           "slurm_candidates", "slurm_conf", "CLASSIC_POINTS", "AGED_POINTS", "classic_points",
           "anchor_points"]

SLURM_PREFIX = "slurm"
#: PriorityUsageResetPeriod values and their length in seconds (0: never).
RESET_PERIODS = {"NONE": 0.0, "NOW": 0.0, "DAILY": 86400.0, "WEEKLY": 7 * 86400.0,
                 "MONTHLY": 30 * 86400.0, "QUARTERLY": 91 * 86400.0,
                 "YEARLY": 365 * 86400.0}
#: The PriorityFlags values this model takes (one per name: commas separate knobs there).
PRIORITY_FLAGS = ("SMALL_RELATIVE_TO_TIME", "NO_FAIR_TREE")
_WEIGHT_MAX = 4294967295          # slurm.conf weights are 32-bit unsigned integers
_DEPTH_MAX = 1_000_000            # bf_max_job_test's documented upper bound
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_slurm_time(text: str) -> float:
    """Seconds of a slurm.conf time string (a bare number is minutes).

    Examples:
        >>> parse_slurm_time("7-0"), parse_slurm_time("90"), parse_slurm_time("1-12:30")
        (604800.0, 5400.0, 131400.0)

    Raises:
        ValueError: not one of the forms (see the module docstring).
    """
    m = _TIME.match(str(text).strip())
    if not m:
        raise ValueError(text)
    days, a, b, c = m.groups()
    a, b, c = int(a), None if b is None else int(b), None if c is None else int(c)
    if days is not None:             # D-HH[:MM[:SS]]
        return float(int(days) * 86400 + a * 3600 + (b or 0) * 60 + (c or 0))
    if c is not None:                # HH:MM:SS
        return float(a * 3600 + b * 60 + c)
    if b is not None:                # MM:SS
        return float(a * 60 + b)
    return float(a * 60)             # minutes


def format_slurm_time(seconds: float) -> str:
    """The slurm.conf form of whole seconds (``D-HH:MM:SS``, trimmed).

    Examples:
        >>> format_slurm_time(604800), format_slurm_time(5400), format_slurm_time(90061)
        ('7-0', '1:30:00', '1-01:01:01')
    """
    s = int(round(seconds))
    days, rest = divmod(s, 86400)
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    if days and not (m or sec):
        return f"{days}-{h}"
    if days:
        return f"{days}-{h:02d}:{m:02d}:{sec:02d}"
    return f"{h}:{m:02d}:{sec:02d}"


@dataclass(frozen=True)
class SlurmParams:
    """The knobs of a ``slurm`` policy (see the module docstring); times in seconds."""

    PriorityWeightAge: int = 0
    PriorityWeightJobSize: int = 0
    PriorityWeightFairshare: int = 0
    PriorityWeightPartition: int = 0
    PriorityWeightQOS: int = 0
    PriorityMaxAge: float = 7 * 86400.0
    PriorityFavorSmall: bool = False
    PriorityDecayHalfLife: float = 7 * 86400.0
    PriorityUsageResetPeriod: str = "NONE"
    PriorityFlags: str = ""
    bf_window: int = 1440
    bf_max_job_test: int = 500
    bf_resolution: int = 60
    bf_interval: int = 30
    partitions: tuple[tuple[str, float], ...] = ()
    qos: tuple[tuple[str, float], ...] = ()
    shares: tuple[tuple[str, float], ...] = ()

    @property
    def weights(self) -> tuple[int, int, int, int, int]:
        """(age, job size, fair-share, partition, QOS)."""
        return (self.PriorityWeightAge, self.PriorityWeightJobSize, self.PriorityWeightFairshare,
                self.PriorityWeightPartition, self.PriorityWeightQOS)

    def name_items(self) -> list[tuple[str, str]]:
        """``(key, value)`` of every knob that differs from Slurm's default, in
        slurm.conf spelling (the mappings, which have no name form, left out)."""
        default = SlurmParams()
        out = []
        for f in fields(self):
            if f.name in MAPPINGS:
                continue
            value = getattr(self, f.name)
            if value != getattr(default, f.name):
                out.append((f.name, _format_value(f.name, value)))
        return out

    def policy_name(self) -> str:
        """The canonical policy name: ``slurm`` or ``slurm:KEY=VALUE,...``."""
        items = self.name_items()
        return SLURM_PREFIX + (":" + ",".join(f"{k}={v}" for k, v in items) if items else "")


_FIELDS = {f.name.lower(): f.name for f in fields(SlurmParams)}
#: The knobs that are mappings (scenario-only: no policy-name form).
MAPPINGS = ("partitions", "qos", "shares")
#: The knob names, in slurm.conf spelling.
SLURM_KEYS = tuple(f.name for f in fields(SlurmParams))
#: The knobs a policy name may set.
NAME_KEYS = tuple(k for k in SLURM_KEYS if k not in MAPPINGS)
_EXPECTED = {
    "PriorityWeightAge": f"an integer 0..{_WEIGHT_MAX}",
    "PriorityMaxAge": "a slurm.conf time above 0 (minutes, D-HH, D-HH:MM[:SS], HH:MM:SS)",
    "PriorityFavorSmall": "YES or NO",
    "PriorityDecayHalfLife": "a slurm.conf time (0: no decay)",
    "PriorityUsageResetPeriod": ", ".join(RESET_PERIODS),
    "PriorityFlags": "one of " + ", ".join(PRIORITY_FLAGS) + " (or nothing)",
    "bf_window": "whole minutes 1..43200",
    "bf_max_job_test": f"an integer 1..{_DEPTH_MAX}",
    "bf_resolution": "whole seconds 1..3600",
    "bf_interval": "whole seconds 0..10800 (0: a backfill cycle at every event)",
    "partitions": "a mapping of partition label to PriorityJobFactor (a number >= 0)",
    "qos": "a mapping of QOS label to Priority (a number >= 0)",
    "shares": "a mapping of account or user to its Fairshare (a whole number >= 1)",
}
for _w in ("JobSize", "Fairshare", "Partition", "QOS"):
    _EXPECTED[f"PriorityWeight{_w}"] = _EXPECTED["PriorityWeightAge"]


def _format_value(key: str, value) -> str:
    if key in ("PriorityMaxAge", "PriorityDecayHalfLife"):
        return format_slurm_time(value)
    if key == "PriorityFavorSmall":
        return "YES" if value else "NO"
    return str(value)


def _integer(text, lo: int, hi: int) -> int:
    if isinstance(text, bool):
        raise ValueError(text)
    if isinstance(text, float):
        if not text.is_integer():
            raise ValueError(text)
        text = int(text)
    value = int(str(text).strip())
    if not lo <= value <= hi:
        raise ValueError(text)
    return value


def _mapping(value) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, Mapping):
        raise ValueError(value)
    out = []
    for label, factor in value.items():
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) \
                or not (math.isfinite(factor) and factor >= 0):
            raise ValueError(value)
        out.append((str(label), float(factor)))
    return tuple(sorted(out))


def _shares(value) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, Mapping):
        raise ValueError(value)
    out = []
    for name, share in value.items():
        if isinstance(share, bool) or not isinstance(share, (int, float)) \
                or not (math.isfinite(share) and share >= 1 and float(share).is_integer()):
            raise ValueError(name, share)
        out.append((str(name), float(share)))
    return tuple(sorted(out))


def _convert(key: str, value):
    """The typed value of one knob; ValueError when it is not what the knob takes."""
    if key.startswith("PriorityWeight"):
        return _integer(value, 0, _WEIGHT_MAX)
    if key == "PriorityMaxAge":
        seconds = parse_slurm_time(value)
        if seconds <= 0:
            raise ValueError(value)
        return seconds
    if key == "PriorityDecayHalfLife":
        return parse_slurm_time(value)
    if key == "PriorityFavorSmall":
        word = str(value).strip().upper()
        if isinstance(value, bool):
            return value
        if word not in ("YES", "NO", "1", "0", "TRUE", "FALSE"):
            raise ValueError(value)
        return word in ("YES", "1", "TRUE")
    if key == "PriorityUsageResetPeriod":
        word = str(value).strip().upper()
        if word not in RESET_PERIODS:
            raise ValueError(value)
        return word
    if key == "PriorityFlags":
        word = str(value).strip().upper()
        if word in ("", "NONE", "NO_FAIR_TREE"):
            return ""
        if word not in PRIORITY_FLAGS:
            raise ValueError(value)
        return word
    if key == "bf_window":
        return _integer(value, 1, 43200)
    if key == "bf_max_job_test":
        return _integer(value, 1, _DEPTH_MAX)
    if key == "bf_resolution":
        return _integer(value, 1, 3600)
    if key == "bf_interval":
        return _integer(value, 0, 10800)
    if key == "shares":
        return _shares(value)
    return _mapping(value)


def parse_slurm_params(items: Mapping | str | None, *, base: SlurmParams | None = None,
                       where: str = "scheduler.slurm", name: bool = False) -> SlurmParams:
    """``base`` (Slurm's defaults when None) with the knobs ``items`` sets.

    Args:
        items: a mapping (a scenario's ``scheduler.slurm``) or the text after
            ``slurm:`` in a policy name (``KEY=VALUE,KEY=VALUE``).
        where: the file and key path or flag, for messages.
        name: ``items`` came from a policy name (the mappings are refused there).

    Raises:
        ScenarioError: an unknown key, a bad value, a key given twice; the
            message names the key, what was found and what is expected.
    """
    base = base or SlurmParams()
    if items is None or items == "":
        return base
    pairs: list[tuple[str, object]] = []
    if isinstance(items, str):
        for part in items.split(","):
            key, eq, value = part.partition("=")
            if not eq or not key.strip():
                raise ScenarioError(where, repr(part), "KEY=VALUE with KEY a slurm.conf name "
                                    f"({', '.join(NAME_KEYS)})")
            pairs.append((key.strip(), value.strip()))
    elif isinstance(items, Mapping):
        pairs = [(str(k), v) for k, v in items.items()]
    else:
        raise ScenarioError(where, type(items).__name__, "a mapping of slurm.conf names to values")
    changes: dict[str, object] = {}
    for key, value in pairs:
        canonical = _FIELDS.get(key.lower())
        if canonical is None or (name and canonical in MAPPINGS):
            known = SLURM_KEYS if not name else NAME_KEYS
            raise ScenarioError(f"{where}: {key}", "an unknown key",
                                f"one of {', '.join(known)}")
        if canonical in changes:
            raise ScenarioError(f"{where}: {key}", "a key given twice", "each key once")
        try:
            changes[canonical] = _convert(canonical, value)
        except (ValueError, TypeError) as err:
            if canonical == "shares" and len(err.args) == 2:     # one share is wrong
                raise ScenarioError(f"{where}: shares: {err.args[0]}", repr(err.args[1]),
                                    "a Fairshare: a whole number >= 1") from None
            raise ScenarioError(f"{where}: {canonical}", repr(value),
                                _EXPECTED[canonical]) from None
    return _replace(base, changes)


def _replace(base: SlurmParams, changes: dict) -> SlurmParams:
    values = {f.name: getattr(base, f.name) for f in fields(base)}
    values.update(changes)
    return SlurmParams(**values)


#: The search space over Slurm's knobs: candidate values per knob, in slurm.conf
#: spelling. Weights only matter relative to each other (the order is that of a
#: weighted sum), so three decades with 0 cover them; ``bf_max_job_test=1`` is EASY.
SLURM_SPACE: dict[str, tuple[str, ...]] = {
    "PriorityWeightAge": ("0", "100", "1000", "10000"),
    "PriorityWeightJobSize": ("0", "100", "1000", "10000"),
    "PriorityWeightFairshare": ("0", "100", "1000", "10000"),
    "PriorityMaxAge": ("0:30:00", "6:00:00", "1-0", "7-0", "14-0"),
    "PriorityDecayHalfLife": ("1-0", "7-0", "14-0"),
    "PriorityFavorSmall": ("NO", "YES"),
    "PriorityFlags": ("", "SMALL_RELATIVE_TO_TIME"),
    "bf_window": ("720", "1440", "4320"),
    "bf_max_job_test": ("1", "10", "100", "500"),
}


def slurm_space() -> dict[str, tuple[str, ...]]:
    """The search space over Slurm's knobs (a fresh copy of :data:`SLURM_SPACE`)."""
    return {k: tuple(v) for k, v in SLURM_SPACE.items()}


def slurm_candidates(count: int, seed: int = 0,
                     space: Mapping[str, tuple[str, ...]] | None = None) -> list[SlurmParams]:
    """``count`` distinct points of the space: Slurm's defaults first, then uniform
    random draws (seeded), duplicates skipped (fewer when the space is smaller).

    Examples:
        >>> [p.policy_name() for p in slurm_candidates(1)]
        ['slurm']
    """
    import numpy as np

    space = dict(space or SLURM_SPACE)
    rng = np.random.default_rng(seed)
    out, seen = [SlurmParams()], {SlurmParams()}
    size = math.prod(len(v) for v in space.values())
    tries = 0
    while len(out) < min(count, size) and tries < 100 * count:
        tries += 1
        point = {k: v[int(rng.integers(len(v)))] for k, v in space.items()}
        params = parse_slurm_params(point, where="slurm space")
        if params not in seen:
            seen.add(params)
            out.append(params)
    return out[:count]


#: The points of :data:`SLURM_SPACE` nearest each classic heuristic with EASY, all with
#: ``bf_max_job_test=1`` (EASY: one reservation). Only FCFS's order is in Slurm's space
#: exactly (every weight 0: submit order; with Slurm's ``bf_interval`` its backfill runs in
#: cycles, so the schedule is FCFS+EASY's only at ``bf_interval=0``); the others are the nearest orders Slurm's factors can
#: express: SJF's short jobs first by ``SMALL_RELATIVE_TO_TIME`` (size over time limit:
#: of two jobs of one width the shorter first), SAF's small jobs first by
#: ``PriorityFavorSmall``, F1's small and early by size over a slow age, WFP3's long
#: waits and wide jobs and UNICEF's long waits and small jobs by age over size. WFP3's
#: and UNICEF's wait terms grow without limit, so their ages saturate late (14 days):
#: an age that saturates leaves the order to size alone past it, which starves.
CLASSIC_POINTS: dict[str, str] = {
    "fcfs+easy": "bf_max_job_test=1",
    "sjf+easy": "PriorityWeightJobSize=10000,PriorityFlags=SMALL_RELATIVE_TO_TIME,"
                "bf_max_job_test=1",
    "saf+easy": "PriorityWeightJobSize=10000,PriorityFavorSmall=YES,bf_max_job_test=1",
    "f1+easy": "PriorityWeightAge=1000,PriorityWeightJobSize=10000,PriorityFavorSmall=YES,"
               "PriorityMaxAge=14-0,bf_max_job_test=1",
    "wfp3+easy": "PriorityWeightAge=10000,PriorityWeightJobSize=1000,PriorityMaxAge=14-0,"
                 "bf_max_job_test=1",
    "unicef+easy": "PriorityWeightAge=10000,PriorityWeightJobSize=1000,PriorityFavorSmall=YES,"
                   "PriorityMaxAge=14-0,bf_max_job_test=1",
}
#: SJF's and SAF's orders of :data:`CLASSIC_POINTS` with an age beside them that has not
#: saturated: while the age grows, a job can be passed only by jobs whose size factor
#: outweighs its extra wait, at most ``PriorityWeightJobSize / PriorityWeightAge x
#: PriorityMaxAge`` of waiting (7-14 days here for the shortest widest jobs only, 0.7
#: days for SAF's order), which bounds how long the size order can starve a job where
#: SJF and SAF alone starved jobs for months on real traces.
AGED_POINTS: tuple[str, ...] = (
    "PriorityWeightAge=10000,PriorityWeightJobSize=10000,"
    "PriorityFlags=SMALL_RELATIVE_TO_TIME,PriorityMaxAge=14-0,bf_max_job_test=1",
    "PriorityWeightAge=10000,PriorityWeightJobSize=10000,"
    "PriorityFlags=SMALL_RELATIVE_TO_TIME,PriorityMaxAge=7-0,bf_max_job_test=1",
    "PriorityWeightAge=10000,PriorityWeightJobSize=1000,PriorityFavorSmall=YES,"
    "PriorityMaxAge=7-0,bf_max_job_test=1",
)


def classic_points() -> dict[str, str]:
    """The canonical ``slurm`` policy name nearest each classic heuristic
    (:data:`CLASSIC_POINTS`).

    Examples:
        >>> classic_points()["fcfs+easy"]
        'slurm:bf_max_job_test=1'
    """
    return {h: parse_slurm_params(text, where=f"CLASSIC_POINTS[{h}]", name=True).policy_name()
            for h, text in CLASSIC_POINTS.items()}


def anchor_points() -> list[str]:
    """The points a search scores first, before any random draw: those nearest the
    classic heuristics, then their aged variants (:data:`AGED_POINTS`), canonical names.

    Examples:
        >>> len(anchor_points()) == len(CLASSIC_POINTS) + len(AGED_POINTS)
        True
    """
    aged = [parse_slurm_params(t, where="AGED_POINTS", name=True).policy_name()
            for t in AGED_POINTS]
    return list(dict.fromkeys(list(classic_points().values()) + aged))


def slurm_conf(policy: str | SlurmParams) -> str:
    """The slurm.conf lines of a ``slurm`` policy (a name or its knobs): the
    multifactor priority with the classic fair-share this model computes,
    and the backfill scheduler with its ``SchedulerParameters``.

    Partition and QOS factors go in partition lines and the accounting
    database, not in these lines: they are written as comments.

    Raises:
        ScenarioError: the name is not a ``slurm`` policy or has a bad knob.

    Examples:
        >>> print(slurm_conf("slurm:PriorityWeightAge=1000,bf_max_job_test=100"))  # doctest: +ELLIPSIS
        # slurm.conf lines for slurm:PriorityWeightAge=1000,bf_max_job_test=100 (hpc-cosim)
        PriorityType=priority/multifactor
        PriorityFlags=NO_FAIR_TREE
        PriorityWeightAge=1000
        ...
        SchedulerParameters=bf_window=1440,bf_max_job_test=100,bf_resolution=60
    """
    if isinstance(policy, SlurmParams):
        p = policy
    else:
        name = str(policy).strip()
        order = name.rpartition("@")[0] if "@" in name else name   # @PREDICTOR: not Slurm's
        word, _, text = order.partition(":")
        if word.lower() != SLURM_PREFIX:
            raise ScenarioError("policy", repr(policy), "a slurm policy name (slurm or "
                                "slurm:KEY=VALUE,...)")
        p = parse_slurm_params(text, where=f"policy {policy!r}", name=True)
    lines = [f"# slurm.conf lines for {p.policy_name()} (hpc-cosim)",
             "PriorityType=priority/multifactor",
             "PriorityFlags=" + ",".join(["NO_FAIR_TREE"] + ([p.PriorityFlags]
                                                             if p.PriorityFlags else []))]
    for key in ("PriorityWeightAge", "PriorityWeightJobSize", "PriorityWeightFairshare",
                "PriorityWeightPartition", "PriorityWeightQOS"):
        lines.append(f"{key}={getattr(p, key)}")
    for key in ("PriorityMaxAge", "PriorityFavorSmall", "PriorityDecayHalfLife",
                "PriorityUsageResetPeriod"):
        lines.append(f"{key}={_format_value(key, getattr(p, key))}")
    for label, factor in p.partitions:
        lines.append(f"# PartitionName={label} ... PriorityJobFactor={factor:g}")
    for label, factor in p.qos:
        lines.append(f"# sacctmgr modify qos {label} set Priority={factor:g}")
    for name, share in p.shares:
        kind, _, label = name.partition(":") if name.partition(":")[0] in ("account", "user") \
            else ("account or user", "", name)
        lines.append(f"# sacctmgr modify {kind} {label} set Fairshare={share:g}")
    sched = (f"SchedulerParameters=bf_window={p.bf_window},bf_max_job_test={p.bf_max_job_test},"
             f"bf_resolution={p.bf_resolution}")
    if p.bf_interval == 0:        # not a Slurm value: said in a comment
        lines.append("# bf_interval=0: a backfill cycle at every event (hpc-cosim only; "
                     "Slurm takes 1..10800)")
    elif p.bf_interval != SlurmParams.bf_interval:
        sched += f",bf_interval={p.bf_interval}"
    lines += ["SchedulerType=sched/backfill", sched]
    return "\n".join(lines)
