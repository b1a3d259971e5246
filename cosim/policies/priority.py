"""A parametric priority: ``key = weights . features``, smaller runs first, with backfilling.

The features of a queued job (estimate ``e`` in seconds, cores ``p``,
wait so far ``w``, submit time ``s``, machine capacity ``N``)::

    0 log_est        log10(max(e, 1))
    1 log_procs      log10(p)
    2 log_wait       log10(w + 1)                  (changes with time)
    3 log_est_procs  log10(max(e, 1)) * log10(p)
    4 wait_per_est   w / max(e, 1)                 (changes with time)
    5 log_submit     log10(max(s, 1))
    6 f1_area        log10(max(e, 1)) * p / N

Classic orders are points of this space (:func:`heuristic_weights`): SJF is
``log_est``, SAF ``log_est + log_procs`` (the log of the area), FCFS
``log_submit``, F1 (Carastan-Santos and de Camargo, SC'17) exactly
``f1_area + (870 / N) log_submit`` (its published key divided by N), and
WFP3 and UNICEF approximately (in logs). Keys only order jobs, so weights
that differ by a positive factor are the same policy.

A :class:`PriorityWeights` is plain data (a tuple of floats and a backfilling
name): it pickles to worker processes and saves as JSON. Without time-dependent
weights (``log_wait``, ``wait_per_est``) the key is static, computed once per
job, and EASY keeps its incremental arrival passes; otherwise it is
recomputed, vectorized, at every pass. Either way the policy is the existing
:class:`cosim.policies.backfill.QueuePolicy` around a
:class:`cosim.policies.heuristics.Heuristic`.

A second weight vector over the same features, ``backfill_weights``, orders
EASY's backfill candidates on its own (the head and its reservation still
follow ``weights``): "who backfills first" is a choice the classic heuristics
tie to their queue order, and the search may untie it. Such a policy
recomputes both keys at every pass (:class:`TwoOrderEasy`).

A tuned policy folder (``python -m agents tune``) holds ``policy.json``:
``{"kind": "priority", "weights": [...], "features": [...], "backfill": "easy"}``
(plus ``"backfill_weights": [...]`` when the backfill order was searched)
or, when a classic heuristic won on validation, ``{"kind": "heuristic",
"name": "saf+easy"}``. :func:`load_learned` reads it; ``learned:DIR`` in the
policy-name grammar runs it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosim.errors import InputError
from cosim.policies.backfill import BACKFILLS, QueuePolicy, easy_admits
from cosim.policies.heuristics import HEURISTICS, Heuristic

__all__ = ["FEATURES", "PriorityWeights", "TwoOrderEasy", "heuristic_weights",
           "make_priority_policy", "load_learned", "POLICY_FILE"]

#: Feature names, in weight order.
FEATURES = ("log_est", "log_procs", "log_wait", "log_est_procs", "wait_per_est", "log_submit",
            "f1_area")
_DYNAMIC = (2, 4)          # features that change while a job waits
#: The file in a tuned policy folder.
POLICY_FILE = "policy.json"


@dataclass(frozen=True)
class PriorityWeights:
    """One priority policy: weights over :data:`FEATURES` and a backfilling variant.

    Attributes:
        weights: one float per feature.
        capacity: the machine's schedulable units N (``f1_area``'s scale).
        backfill: ``none``, ``greedy``, ``easy`` or ``conservative``.
        name: shown in results (``priority`` by default).
        backfill_weights: EASY only: one float per feature ordering the
            backfill candidates (smaller first); None backfills in the
            ``weights`` order.
    """

    weights: tuple[float, ...]
    capacity: int
    backfill: str = "easy"
    name: str = "priority"
    backfill_weights: tuple[float, ...] | None = None

    def __post_init__(self):
        if len(self.weights) != len(FEATURES):
            raise ValueError(f"weights: {len(self.weights)} values, expected {len(FEATURES)} "
                             f"({', '.join(FEATURES)})")
        if not all(math.isfinite(w) for w in self.weights):
            raise ValueError(f"weights: {list(self.weights)} has a non-finite value")
        if self.backfill not in BACKFILLS:
            raise ValueError(f"backfill: {self.backfill!r}, expected one of {', '.join(BACKFILLS)}")
        bw = self.backfill_weights
        if bw is not None:
            if self.backfill != "easy":
                raise ValueError(f"backfill_weights: only with easy backfilling, not "
                                 f"{self.backfill!r}")
            if len(bw) != len(FEATURES) or not all(math.isfinite(w) for w in bw):
                raise ValueError(f"backfill_weights: {list(bw)}; expected {len(FEATURES)} "
                                 "finite values")

    @property
    def dynamic(self) -> bool:
        """Whether keys are recomputed every pass: a time-dependent feature has a
        weight, or the backfill order is its own."""
        return (self.backfill_weights is not None
                or any(self.weights[i] != 0.0 for i in _DYNAMIC))

    def as_dict(self) -> dict:
        """The JSON form of ``policy.json``."""
        d = {"kind": "priority", "features": list(FEATURES),
             "weights": [float(w) for w in self.weights], "capacity": int(self.capacity),
             "backfill": self.backfill}
        if self.backfill_weights is not None:
            d["backfill_weights"] = [float(w) for w in self.backfill_weights]
        return d


def heuristic_weights(name: str, capacity: int) -> tuple[float, ...] | None:
    """The weights of a classic order in this space (None when it has none).

    Exact (the same order) for ``sjf``, ``saf``, ``fcfs`` (for submit times
    of at least 1 s) and ``f1``; in logs for ``wfp3`` (``-(3 log wait - 3 log
    est + log procs)``) and ``unicef`` (``-(log wait - log est)``).
    """
    w = dict.fromkeys(FEATURES, 0.0)
    if name == "sjf":
        w["log_est"] = 1.0
    elif name == "saf":
        w["log_est"] = w["log_procs"] = 1.0
    elif name == "fcfs":
        w["log_submit"] = 1.0
    elif name == "f1":
        w["f1_area"], w["log_submit"] = 1.0, 870.0 / capacity
    elif name == "wfp3":
        w["log_wait"], w["log_est"], w["log_procs"] = -3.0, 3.0, -1.0
    elif name == "unicef":
        w["log_wait"], w["log_est"] = -1.0, 1.0
    else:
        return None
    return tuple(w[f] for f in FEATURES)


def _static_key(weights: tuple[float, ...], capacity: int):
    w0, w1, _, w3, _, w5, w6 = weights

    def key(job) -> float:
        le = math.log10(max(job.estimate, 1.0))
        lp = math.log10(max(job.procs, 1))
        return (w0 * le + w1 * lp + w3 * le * lp + w5 * math.log10(max(job.submit, 1.0))
                + w6 * le * job.procs / capacity)
    return key


def _dynamic_key(weights: tuple[float, ...], capacity: int):
    w = np.asarray(weights, dtype=np.float64)

    def key(q, slots, now, cluster, rng) -> np.ndarray:
        est = np.maximum(q.estimate[slots], 1.0)
        procs = q.procs[slots].astype(np.float64)
        wait = np.maximum(now - q.submit[slots], 0.0)
        le = np.log10(est)
        lp = np.log10(np.maximum(procs, 1.0))
        out = w[0] * le + w[1] * lp + w[3] * le * lp + w[6] * le * procs / capacity
        if w[5]:
            out = out + w[5] * np.log10(np.maximum(q.submit[slots], 1.0))
        if w[2]:
            out = out + w[2] * np.log10(wait + 1.0)
        if w[4]:
            out = out + w[4] * wait / est
        return out
    return key


class TwoOrderEasy(QueuePolicy):
    """EASY with the head chosen by one key and the backfill candidates tried in another.

    The queue key (``heuristic``, dynamic) picks the head and its
    reservation exactly as in :class:`QueuePolicy`; the candidates EASY may
    backfill around it are then tried smallest ``backfill_key`` first
    (ties: queue order). Candidates are always listed one by one (never the
    queue-order scan), since that scan follows the queue key; for the same
    reason a pass never narrows to the jobs sized between the last pass's free
    units and now (:attr:`QueuePolicy.narrow_passes`) nor to the jobs that just
    arrived (:attr:`QueuePolicy.arrival_passes`): both list them in queue order.
    """

    narrow_passes = False
    arrival_passes = False

    def __init__(self, heuristic: Heuristic, backfill_key):
        super().__init__(heuristic, "easy")
        self._bkey = backfill_key

    def _by_backfill_key(self, q, slots: np.ndarray, now: float, cl) -> np.ndarray:
        if len(slots) < 2:
            return slots
        return slots[np.argsort(self._bkey(q, slots, now, cl, self.rng), kind="stable")]

    def _easy_candidates_list(self, q, cl, now, shadow, extra, extra_mem, head):
        free, free_mem = cl.free, cl.free_mem
        jobs = [j for j in q.live_jobs() if j.procs <= free and j.mem <= free_mem
                and j is not head and easy_admits(j, now, shadow, extra, extra_mem)]
        if len(jobs) < 2:
            return jobs
        key = q.key   # queue order first, so ties in the backfill key keep it
        jobs.sort(key=lambda j: key[j.queue_slot])
        slots = np.array([j.queue_slot for j in jobs])
        return [q.jobs[s] for s in self._by_backfill_key(q, slots, now, cl).tolist()]

    def _easy_candidates_long(self, q, cl, now, shadow, extra, extra_mem):
        lo = q.lo
        rows = self._easy_mask(q, cl, now, shadow, extra, extra_mem, slice(lo, q.hi)).nonzero()[0]
        slots = rows + lo
        if len(slots) > 1:
            slots = slots[np.argsort(q.key[slots], kind="stable")]
        jobs = q.jobs
        return [jobs[s] for s in self._by_backfill_key(q, slots, now, cl).tolist()]


def make_priority_policy(spec: PriorityWeights) -> QueuePolicy:
    """The :class:`QueuePolicy` of ``spec`` (a static or dynamic key, then backfilling)."""
    weights = tuple(float(x) for x in spec.weights)
    doc = "learned priority: " + " ".join(f"{w:+.3g}*{f}" for w, f in zip(weights, FEATURES) if w)
    if spec.dynamic:
        h = Heuristic(spec.name, doc, dynamic=_dynamic_key(weights, spec.capacity))
    else:
        h = Heuristic(spec.name, doc, static=_static_key(weights, spec.capacity))
    if spec.backfill_weights is not None:
        bw = tuple(float(x) for x in spec.backfill_weights)
        policy = TwoOrderEasy(h, _dynamic_key(bw, spec.capacity))
        policy.name = f"{spec.name}+{spec.backfill}"
        return policy
    policy = QueuePolicy(h, spec.backfill)
    policy.name = f"{spec.name}+{spec.backfill}"
    return policy


def load_learned(folder: str | Path, *, where: str = "policy"):
    """The policy of a tuned folder's ``policy.json`` (see the module docstring).

    Raises:
        InputError: no such folder or file, or a file that does not say a
            priority or a heuristic policy; the message names the file.
    """
    path = Path(folder) / POLICY_FILE
    if not path.is_file():
        raise InputError(where, repr(f"learned:{folder}"),
                         f"learned:DIR with DIR a folder holding {POLICY_FILE} "
                         "(written by 'python -m agents tune')")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(str(path), "unreadable JSON", f"a policy file ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(str(path), type(data).__name__, "a JSON object")
    kind = data.get("kind")
    if kind == "heuristic":
        name = data.get("name")
        base, _, backfill = name.partition("+") if isinstance(name, str) else ("", "", "")
        if base not in HEURISTICS or backfill not in BACKFILLS:
            raise InputError(f"{path}: name", repr(name), "HEURISTIC+BACKFILL such as saf+easy")
        return QueuePolicy(HEURISTICS[base], backfill)
    if kind != "priority":
        raise InputError(f"{path}: kind", repr(kind), "priority or heuristic")
    if list(data.get("features") or []) != list(FEATURES):
        raise InputError(f"{path}: features", repr(data.get("features")),
                         f"the features {list(FEATURES)} (this version's)")
    try:
        bw = data.get("backfill_weights")
        spec = PriorityWeights(tuple(float(x) for x in data["weights"]), int(data["capacity"]),
                               str(data.get("backfill", "easy")), name=f"learned:{folder}",
                               backfill_weights=None if bw is None else
                               tuple(float(x) for x in bw))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(str(path), "a bad field", f"weights (7 numbers), capacity, backfill, "
                         f"backfill_weights (7 numbers, easy only): "
                         f"{exc}") from None
    return make_priority_policy(spec)
