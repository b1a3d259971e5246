"""EnvSpec: every serialisable setting of the scheduling environment, validated once.

A :class:`~cosim.env.SchedulingEnv` is a scenario, an :class:`EnvSpec` and
the live collaborators nothing can save (the prepared workload, the
``predictions`` callable, a factory of base policies). The spec is frozen,
checked when it is made (one :class:`~cosim.errors.ScenarioError` naming the
field, what was found and what is expected), and JSON-safe
(:meth:`EnvSpec.to_dict` / :meth:`EnvSpec.from_dict`), so checkpoints and
studies save it and read it back.

Some defaults depend on the run: the observation's time scale and image row
length on the workload, the DRAS node rows on the machine, ``tau`` on the
scenario. :meth:`EnvSpec.resolved` fills every default against a scenario
and a workload (a resolved spec describes an env completely), and
:meth:`EnvSpec.with_scales` pins only the feature scales, which is what
training saves so that an agent sees the same scales on another workload.

A saved env config (a checkpoint's ``meta.json`` ``env``, a study's
``train.env``) is a spec's :meth:`~EnvSpec.to_dict` plus the front's keys
(:data:`FRONT_KEYS`: the scenario file, its overrides, the predictor and the
paired-training setting), which :func:`split_config` separates.

Examples:
    >>> spec = EnvSpec(actions="select", episode_jobs=64)
    >>> EnvSpec.from_dict(spec.to_dict()) == spec
    True
    >>> EnvSpec(observation="pixels")
    Traceback (most recent call last):
    ...
    cosim.errors.ScenarioError: observation: expected one of compact, kernel, image, dras, kill, backfill, got 'pixels'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from cosim.env.actions import ActionMap, make_action_model
from cosim.env.episodes import EPISODE_SOURCES
from cosim.env.observations import DEFAULT_OBSERVATIONS, OBSERVATIONS
from cosim.env.rewards import REWARDS
from cosim.errors import ScenarioError, did_you_mean
from cosim.model import capacity_of  # re-exported: the env's callers ask it here
from cosim.workloads.mixture import normalise_mixture

__all__ = ["EnvSpec", "FRONT_KEYS", "CURRICULUM_KEYS", "MAX_SLOTS", "split_config", "capacity_of",
           "default_image_slot", "default_max_time", "default_node_rows"]

#: Keys of a saved env config that are the front's, not the env's: the
#: scenario file and its ``--set`` overrides, the predictor the front turns
#: into ``predictions``, and ``agents train --paired``'s wrapper setting.
FRONT_KEYS = ("scenario", "scenario_set", "predictor", "paired")

#: Action models that act over a base policy (it schedules; the agent kills, skips or
#: orders its backfilling).
BASED = ("kill", "inspect", "backfill")

#: The most job or kill slots an action model may have (each is a mask entry).
MAX_SLOTS = 65536

#: Keys of a ``curriculum`` setting (keyword arguments of
#: :func:`cosim.workloads.windows.curriculum`).
CURRICULUM_KEYS = ("sampled", "periods", "synthetic", "load_range", "seed")


@dataclass(frozen=True)
class EnvSpec:
    """The settings of a :class:`~cosim.env.SchedulingEnv` (see that class for each one).

    None means "the default", resolved against the run by :meth:`resolved`
    (``observation`` by action model, ``window`` by action model, ``tau``
    from the scenario, ``max_time``, ``image_slot_s`` from the workload,
    ``node_rows`` from the machine, ``base_policy`` ``sjf+easy`` for
    ``actions="kill"``). Values are normalised when the spec is made: a
    ``window`` list becomes a tuple (one element: an int), numbers become
    ``int`` or ``float``, a renamed reward its new name.

    Raises:
        ScenarioError: a value of the wrong type or out of range, an option
            the action model cannot take, an unknown heuristic name.
    """

    actions: str = "start"
    observation: str | None = None
    window: int | tuple[int, ...] | None = None
    kill_slots: int = 0
    backfill: str = "easy"
    backfill_order: str = "fcfs"
    reserve: str = "easy"
    reward: str = "slowdown"
    episode_jobs: int = 256
    episode_end: str = "completed"
    episode_source: str = "window"
    horizon: int = 8
    image_slots: int = 20
    image_slot_s: float | None = None
    node_rows: int | None = None
    time_scale: float = 3600.0
    smdp_gamma: float | None = None
    reward_weights: tuple[float, ...] = (1 / 3, 1 / 3, 1 / 3)
    tau: float | None = None
    teacher: str | tuple[str, str] | None = None
    max_time: float | None = None
    queue_norm: float = 4096.0
    guard_wait: float | None = None
    curriculum: dict[str, Any] | None = None
    base_policy: str | None = None
    max_skips: int | None = None
    mixture: dict[str, Any] | None = None

    def __post_init__(self):
        set_ = object.__setattr__   # frozen: normalise in place once, here
        for name in ("actions", "backfill", "backfill_order", "reserve", "reward",
                     "episode_end", "episode_source"):
            if not isinstance(getattr(self, name), str):
                raise ScenarioError(name, repr(getattr(self, name)), "a name")
        if self.observation is not None and (not isinstance(self.observation, str)
                                             or self.observation not in OBSERVATIONS):
            raise ScenarioError("observation", repr(self.observation),
                                f"one of {', '.join(OBSERVATIONS)}")
        if self.observation == "backfill" and self.actions != "backfill":
            raise ScenarioError("observation", "'backfill'", "another observation unless "
                                "actions is 'backfill' (its rows are backfill candidates)")
        reward = self.reward
        if self.reward not in REWARDS:
            raise ScenarioError("reward", repr(reward), f"one of {', '.join(REWARDS)}")
        if self.episode_end not in ("placed", "completed"):
            raise ScenarioError("episode_end", repr(self.episode_end), "placed or completed")
        if self.episode_source not in EPISODE_SOURCES:
            raise ScenarioError("episode_source", repr(self.episode_source),
                                "window, jobsets, curriculum or mixture")
        set_(self, "window", _window(self.window))
        if self.kill_slots is not None and not isinstance(self.kill_slots, bool) and isinstance(
                self.kill_slots, int | float) and self.kill_slots > MAX_SLOTS:
            raise ScenarioError("kill_slots", repr(self.kill_slots), f"at most {MAX_SLOTS} slots")
        for name, low, expected in (("kill_slots", 0, "an integer >= 0"),
                                    ("episode_jobs", 1, "a job count >= 1"),
                                    ("horizon", 0, "an integer >= 0"),
                                    ("image_slots", 1, "an integer >= 1"),
                                    ("node_rows", 1, "at least 1")):
            set_(self, name, _integer(name, getattr(self, name), low, expected))
        for name, strict, expected in (("image_slot_s", True, "seconds > 0"),
                                       ("time_scale", True, "seconds > 0"),
                                       ("tau", True, "seconds > 0"),
                                       ("max_time", True, "seconds > 0"),
                                       ("guard_wait", False, "seconds >= 0")):
            set_(self, name, _seconds(name, getattr(self, name), strict, expected))
        if self.smdp_gamma is not None:
            gamma = _number("smdp_gamma", self.smdp_gamma, "a discount in (0, 1]")
            if not 0 < gamma <= 1:
                raise ScenarioError("smdp_gamma", repr(self.smdp_gamma), "a discount in (0, 1]")
            set_(self, "smdp_gamma", gamma)
        norm = _number("queue_norm", self.queue_norm, "a job count >= 1")
        if not norm >= 1:
            raise ScenarioError("queue_norm", repr(self.queue_norm), "a job count >= 1")
        set_(self, "queue_norm", norm)
        weights = self.reward_weights
        if isinstance(weights, str | bytes) or not hasattr(weights, "__len__") or len(weights) != 3:
            raise ScenarioError("reward_weights", repr(weights), "three weights w1, w2, w3")
        set_(self, "reward_weights", tuple(_number("reward_weights", w, "three weights w1, w2, w3")
                                           for w in weights))
        set_(self, "curriculum", _curriculum(self.curriculum))
        if self.curriculum is not None and self.episode_source != "curriculum":
            raise ScenarioError("curriculum", "given", "a non-empty list of workloads exactly "
                                "when episode_source is 'curriculum'")
        if self.episode_source == "mixture":
            # Filled with every default: a checkpoint states the whole mixture.
            set_(self, "mixture", normalise_mixture(self.mixture))
        elif self.mixture is not None:
            raise ScenarioError("mixture", "given", "a mixture exactly when episode_source "
                                "is 'mixture'")
        self._check_policies()
        # The action model owns its options' rules (window shape, kill slots,
        # guard, backfill): a model built once here checks them, and its index
        # map is kept for the env (not a field: not saved, not compared).
        from cosim.policies import make_policy

        base = make_policy("fcfs+easy") if self.actions in BASED else None
        model = make_action_model(self.actions, window=self.window, kill_slots=self.kill_slots,
                                  guard_wait=self.guard_wait, backfill=self.backfill,
                                  backfill_order=self.backfill_order, reserve=self.reserve,
                                  base=base, max_skips=self.max_skips)
        set_(self, "_amap", model.amap)

    def _check_policies(self) -> None:
        from cosim.policies import make_policy, parse_policy

        teacher = self.teacher
        if isinstance(teacher, list | tuple) and len(teacher) == 1:
            teacher = teacher[0]
        if isinstance(teacher, list | tuple):   # (level 1, level 2): DRAS's two levels
            if len(teacher) != 2 or not all(isinstance(t, str) for t in teacher):
                raise ScenarioError("teacher", repr(self.teacher), "a heuristic policy name, or "
                                    "two: [level-1 teacher, level-2 teacher]")
            teacher = tuple(teacher)
        object.__setattr__(self, "teacher", teacher)
        if teacher is not None and not (self.actions == "kill" and teacher == "rule"):
            if not isinstance(teacher, str | tuple):
                raise ScenarioError("teacher", repr(teacher), "a heuristic policy name")
            for name in (teacher,) if isinstance(teacher, str) else teacher:
                make_policy(name, where="teacher")
        base = self.base_policy
        if base is None:
            return
        if self.actions not in BASED:
            raise ScenarioError("base_policy", repr(base), "nothing unless actions is 'kill', "
                                "'inspect' or 'backfill' (the policy that schedules while the "
                                "agent decides kills, skips or backfills)")
        if not isinstance(base, str):
            raise ScenarioError("base_policy", repr(base), "a policy name such as sjf+easy")
        # A trained base (rl:DIR) is loaded by the front; a heuristic is checked now.
        policy = None    # a trained agent has no EASY backfilling to order
        if parse_policy(base, where="base_policy").kind != "agent":
            policy = make_policy(base, where="base_policy")
        if self.actions == "backfill" and getattr(policy, "backfill", None) != "easy":
            raise ScenarioError("base_policy", repr(base), "a policy with EASY backfilling "
                                "under actions='backfill' (e.g. saf+easy or learned:DIR)")

    # -- reading and writing -------------------------------------------------------------
    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The settings' names, in declaration order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "") -> EnvSpec:
        """The spec of a JSON/YAML mapping (absent keys take their defaults).

        Args:
            data: setting name -> value (a :meth:`to_dict`, a study's ``train.env``).
            where: a key path prefixed to error locations (``"train.env"``).

        Raises:
            ScenarioError: an unknown key (with a "did you mean"), or a bad value.
        """
        if not isinstance(data, Mapping):
            raise ScenarioError(where or "env", type(data).__name__, "a mapping of env settings")
        names = cls.names()
        for key in data:
            if key not in names:
                raise ScenarioError(_at(where, str(key)), f"unknown key {key!r}",
                                    "a setting of cosim.env.EnvSpec", did_you_mean(str(key), names))
        try:
            return cls(**data)
        except ScenarioError as exc:
            if not where:
                raise
            raise ScenarioError(_at(where, exc.where), exc.found, exc.expected, exc.hint) from None

    def to_dict(self) -> dict[str, Any]:
        """Every setting as JSON values (tuples become lists); :meth:`from_dict` reads it back."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, dict):
                value = {k: list(v) if isinstance(v, tuple) else v for k, v in value.items()}
            out[f.name] = value
        return out

    def replace(self, **changes: Any) -> EnvSpec:
        """A copy with ``changes`` applied (validated like a new spec)."""
        return replace(self, **changes)

    # -- resolving against a run -----------------------------------------------------------
    @property
    def action_map(self) -> ActionMap:
        """Where each kind of action lives in the flat index space (from the action model)."""
        return self._amap

    def resolved(self, scenario, workload) -> EnvSpec:
        """This spec with every default filled for ``scenario`` and ``workload``.

        ``observation`` and ``window`` by action model (``kill_slots`` as the
        model counts them), ``tau`` from the scenario's metrics,
        ``max_time`` and ``image_slot_s`` from the workload's requests,
        ``node_rows`` from the machine, ``base_policy`` ``sjf+easy`` for
        ``actions="kill"``. Values already set are kept.
        """
        amap = self._amap
        window = (amap.m_head, amap.m_tail) if self.actions == "start" else amap.window
        return replace(
            self, observation=self.observation or DEFAULT_OBSERVATIONS.get(self.actions, "compact"),
            window=window, kill_slots=amap.kill_slots,
            tau=float(scenario.metrics.tau) if self.tau is None else self.tau,
            max_time=self.max_time or default_max_time(workload),
            image_slot_s=(default_image_slot(workload, self.image_slots)
                          if self.image_slot_s is None else self.image_slot_s),
            node_rows=self.node_rows or default_node_rows(capacity_of(scenario)),
            base_policy=(self.base_policy or "sjf+easy") if self.actions in BASED else None)

    def with_scales(self, resolved: EnvSpec) -> EnvSpec:
        """This spec with the feature scales of ``resolved`` pinned where unset.

        ``max_time`` always, ``image_slot_s`` for the image observation,
        ``node_rows`` for the dras one: the scales an env derives from its own
        workload and machine, so a saved agent sees the same ones elsewhere
        (transfer, seed 003).
        """
        changes: dict[str, Any] = {}
        if self.max_time is None:
            changes["max_time"] = resolved.max_time
        if resolved.observation == "image" and self.image_slot_s is None:
            changes["image_slot_s"] = resolved.image_slot_s
        if resolved.observation == "dras" and self.node_rows is None:
            changes["node_rows"] = resolved.node_rows
        return replace(self, **changes) if changes else self


def split_config(env_config: Mapping[str, Any] | None, *, where: str = "env"
                 ) -> tuple[EnvSpec, dict[str, Any]]:
    """A saved env config as ``(spec, front)``: the env's settings and the :data:`FRONT_KEYS`.

    Raises:
        ScenarioError: an unknown key or a bad setting (located under ``where``).
    """
    config = dict(env_config or {})
    front = {k: config.pop(k) for k in FRONT_KEYS if k in config}
    return EnvSpec.from_dict(config, where=where), front


def default_image_slot(workload, image_slots: int) -> float:
    """Image slot length (s) that lets the workload's longest request span 3/4 of the rows.

    DeepRM's image has 20 rows for jobs of up to 15 time units; keeping that
    proportion sizes the image to any workload (1 s for the DeepRM jobs, whose
    requests are 1-15 s, instead of a fixed half hour that put every job in the
    first row).
    """
    longest = float(workload.req_time.max()) if len(workload) else 1.0
    return max(longest / (0.75 * image_slots), 1e-9)


def default_max_time(workload) -> float:
    """The time (s) that maps to 1.0 in time features: twice the longest request, at least 1e5 s.

    Training pins it in the saved env config (:meth:`EnvSpec.with_scales`),
    so an agent sees the same scale on any other workload.
    """
    return max(1e5, 2.0 * float(workload.req_time.max()))


def default_node_rows(capacity: int) -> int:
    """Node rows of the ``dras`` observation: the machine's nodes (or cores), at most 256."""
    return min(capacity, 256)


# -- value checks (each raises the field's one-line error) ------------------------------------
def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _number(name: str, value: Any, expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScenarioError(name, repr(value), expected)
    return float(value)


def _integer(name: str, value: Any, low: int, expected: str) -> int | None:
    if value is None and name == "node_rows":
        return None
    number = _number(name, value, expected)
    if number != int(number) or number < low:
        raise ScenarioError(name, repr(value), expected)
    return int(number)


def _seconds(name: str, value: Any, strict: bool, expected: str) -> float | None:
    if value is None and name != "time_scale":
        return None
    number = _number(name, value, expected)
    if not (number > 0 if strict else number >= 0):
        raise ScenarioError(name, repr(value), expected)
    return number


def _window(window: Any):
    """``window`` as the action models take it: None, an int, or a tuple (JSON gives lists)."""
    expected = "a number of job slots, or (M_head, M_tail)"
    if window is None:
        return None
    if isinstance(window, bool):
        raise ScenarioError("window", repr(window), expected)
    if isinstance(window, int | float):
        values: tuple = (window,)
    elif isinstance(window, list | tuple) and window:
        values = tuple(window)
    else:
        raise ScenarioError("window", repr(window), expected)
    values = tuple(_integer("window", w, -2**62, expected) for w in values)
    # The action model allocates a mask per slot: a huge count is a typo, not a window.
    if any(v > MAX_SLOTS for v in values):
        raise ScenarioError("window", repr(window), f"at most {MAX_SLOTS} job slots")
    return values[0] if len(values) == 1 else values


def _curriculum(curriculum: Any) -> dict[str, Any] | None:
    """A ``curriculum`` setting as a plain dict (None when empty), keys checked."""
    if curriculum is None:
        return None
    if not isinstance(curriculum, Mapping):
        raise ScenarioError("curriculum", repr(curriculum),
                            f"keys among {', '.join(CURRICULUM_KEYS)} (a list of workloads "
                            "is given to SchedulingEnv, not saved)")
    unknown = [k for k in curriculum if k not in CURRICULUM_KEYS]
    if unknown:
        raise ScenarioError("curriculum", repr(dict(curriculum)),
                            f"keys among {', '.join(CURRICULUM_KEYS)}",
                            did_you_mean(str(unknown[0]), CURRICULUM_KEYS))
    out = {k: list(v) if isinstance(v, tuple) else v for k, v in curriculum.items()}
    if not out:
        return None
    counts = [out.get(k, 0) for k in ("sampled", "periods", "synthetic")]
    if (any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts)
            or not sum(counts)):
        raise ScenarioError("curriculum", repr(dict(curriculum)), "episode counts sampled, "
                            "periods, synthetic >= 0 with at least one episode")
    seed = out.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ScenarioError("curriculum.seed", repr(seed), "an integer >= 0")
    if "load_range" in out:
        lr = out["load_range"]
        ok = isinstance(lr, list) and len(lr) == 2 and all(
            not isinstance(x, bool) and isinstance(x, int | float) and math.isfinite(x) and x > 0
            for x in lr) and lr[0] <= lr[1]
        if not ok:
            raise ScenarioError("curriculum.load_range", repr(lr), "[LOW, HIGH] with 0 < LOW <= HIGH")
    return out
