"""Workload mixtures for training: each episode's jobs drawn from a mixture of sources.

A mixture setting (JSON-safe, saved in an env spec and so in checkpoints) is a
mapping with these keys, every one optional:

- ``lublin`` (default 1) and ``trace`` (default 0): relative weights of the
  two components. A ``lublin`` episode is ``n`` jobs of the Lublin-Feitelson
  model (:func:`cosim.workloads.lublin.lublin`) with parameters drawn for
  that episode; a ``trace`` episode is ``n`` consecutive jobs of the
  scenario's own workload from a uniform random offset (as
  ``episode_source="window"``).
- ``load``: ``[LOW, HIGH]``, the offered load each Lublin episode is made to
  reach, uniform in the range (default ``[0.5, 1.0]``); the model's arrival
  rate is solved for it, its daily cycle kept.
- ``params``: ``{name: [LOW, HIGH]}`` for fields of
  :class:`~cosim.workloads.lublin.LublinParams`, each drawn uniformly per
  episode (and the hour of the day the episode starts at, uniform); a
  name given here replaces its default range (``[x, x]`` pins
  it), the others keep :data:`DEFAULT_RANGES`; fields in neither are the
  published values of ``kind``.
- ``kind``: the parameter set the unrandomised fields come from
  (``typeless``, ``batch`` or ``interactive``; default ``typeless``).
- ``procs``: the Lublin machine size (default: the workload's ``max_procs``,
  else its largest job).
- ``seed``: an integer >= 0 mixed into every draw (default 0).

The meaning of the parameters is Lublin & Feitelson's (U. Lublin and
D. G. Feitelson, "The workload on parallel supercomputers: modeling the
characteristics of rigid jobs", JPDC 63(11), 2003): ``serial_prob`` the share
of serial jobs, ``pow2_prob`` of power-of-two sizes, ``ulow``/``umed_offset``/
``uprob`` the two-stage uniform of ``log2(size)``, ``a1``/``b1`` the Gamma of
log run time of the short-job component and ``pa``/``pb`` its weight
``pa * size + pb``, ``anum``/``bnum`` the daily arrival cycle. The default
ranges span the paper's three fits (batch, interactive, typeless): each
default range runs from the smallest to the largest of the three published
values, so every drawn workload lies between workloads the paper observed.

Episodes are reproducible: one integer drawn from the env's generator (the
trainer seeds every reset) and the mixture's ``seed`` seed everything else,
so the same seeds give the same episodes.

Examples:
    >>> spec = normalise_mixture({"trace": 1, "load": [0.7, 0.9]})
    >>> spec["lublin"], spec["trace"], spec["load"], spec["kind"]
    (1.0, 1.0, [0.7, 0.9], 'typeless')
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

import numpy as np

from cosim.errors import ScenarioError, did_you_mean
from cosim.workloads.base import Workload
from cosim.workloads.lublin import LUBLIN_PARAMS, MAX_LOG_GAP, MAX_LOG_RUN, LublinParams, lublin

__all__ = ["MIXTURE_KEYS", "DEFAULT_RANGES", "DEFAULT_LOAD", "normalise_mixture",
           "draw_params", "MixtureDraw", "draw_episode"]

#: Keys of a mixture setting.
MIXTURE_KEYS = ("lublin", "trace", "load", "params", "kind", "procs", "seed")

#: Offered-load range of Lublin episodes when none is given.
DEFAULT_LOAD = (0.5, 1.0)

#: Default per-episode ranges: from the smallest to the largest of the
#: batch, interactive and typeless fits (Lublin & Feitelson 2003, Table values
#: as in m_lublin99.c). The long-job Gamma (a2, b2) and the gap Gamma
#: (aarr, barr, arar) are left out: drawn apart, their shapes and scales from
#: different fits give run times or gaps the model itself would redraw
#: forever (mean log run time past MAX_LOG_RUN).
DEFAULT_RANGES: dict[str, tuple[float, float]] = {
    name: (min(getattr(p, name) for p in LUBLIN_PARAMS.values()),
           max(getattr(p, name) for p in LUBLIN_PARAMS.values()))
    for name in ("serial_prob", "pow2_prob", "ulow", "umed_offset", "uprob",
                 "a1", "b1", "pa", "pb", "anum", "bnum")
}

_FIELDS = tuple(f.name for f in fields(LublinParams))
_PROBABILITIES = ("serial_prob", "pow2_prob", "uprob")
_POSITIVE = ("a1", "b1", "a2", "b2", "aarr", "barr", "arar", "anum", "bnum")
_KINDS = ("typeless", "batch", "interactive")


def _finite(where: str, value: Any, expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScenarioError(where, repr(value), expected)
    return float(value)


def _range(where: str, value: Any, expected: str) -> list[float]:
    if (not isinstance(value, list | tuple) or len(value) != 2):
        raise ScenarioError(where, repr(value), expected)
    lo, hi = (_finite(where, v, expected) for v in value)
    if lo > hi:
        raise ScenarioError(where, repr(value), expected)
    return [lo, hi]


def normalise_mixture(mixture: Any, where: str = "mixture") -> dict[str, Any]:
    """A mixture setting checked and with every default filled (JSON values only).

    Raises:
        ScenarioError: an unknown key, a weight < 0 or all weights 0, a range
            that is not ``[LOW, HIGH]`` with LOW <= HIGH, a parameter range
            outside its meaning (a probability outside [0, 1], a Gamma shape
            or scale <= 0, Gammas whose mean log run time or gap could pass
            the model's cut-off), a bad kind, procs or seed.
    """
    if mixture is None:
        mixture = {}
    if not isinstance(mixture, Mapping):
        raise ScenarioError(where, repr(mixture), f"a mapping with keys among {', '.join(MIXTURE_KEYS)}")
    for key in mixture:
        if key not in MIXTURE_KEYS:
            raise ScenarioError(f"{where}.{key}", "an unknown key",
                                f"keys among {', '.join(MIXTURE_KEYS)}",
                                did_you_mean(str(key), MIXTURE_KEYS))
    out: dict[str, Any] = {}
    for key, default in (("lublin", 1.0), ("trace", 0.0)):
        w = _finite(f"{where}.{key}", mixture.get(key, default), "a weight >= 0")
        if w < 0:
            raise ScenarioError(f"{where}.{key}", repr(mixture[key]), "a weight >= 0")
        out[key] = w
    if out["lublin"] + out["trace"] <= 0:
        raise ScenarioError(f"{where}", "weights lublin=0, trace=0", "a positive total weight")
    load = _range(f"{where}.load", mixture.get("load", list(DEFAULT_LOAD)),
                  "[LOW, HIGH] offered loads with 0 < LOW <= HIGH")
    if load[0] <= 0:
        raise ScenarioError(f"{where}.load", repr(mixture["load"]),
                            "[LOW, HIGH] offered loads with 0 < LOW <= HIGH")
    out["load"] = load
    kind = mixture.get("kind", "typeless")
    if kind not in _KINDS:
        raise ScenarioError(f"{where}.kind", repr(kind), f"one of {', '.join(_KINDS)}")
    given = mixture.get("params", {})
    if not isinstance(given, Mapping):
        raise ScenarioError(f"{where}.params", repr(given), "a mapping NAME: [LOW, HIGH]")
    ranges = {k: list(v) for k, v in DEFAULT_RANGES.items()}
    for name, value in given.items():
        if name not in _FIELDS:
            raise ScenarioError(f"{where}.params.{name}", "an unknown parameter",
                                "a field of cosim.workloads.lublin.LublinParams",
                                did_you_mean(str(name), _FIELDS))
        ranges[name] = _range(f"{where}.params.{name}", value, "[LOW, HIGH] with LOW <= HIGH")
    for name, (lo, hi) in ranges.items():
        if name in _PROBABILITIES and not (0 <= lo and hi <= 1):
            raise ScenarioError(f"{where}.params.{name}", repr([lo, hi]),
                                "a probability range within [0, 1]")
        if name in _POSITIVE and lo <= 0:
            raise ScenarioError(f"{where}.params.{name}", repr([lo, hi]),
                                "a Gamma shape or scale range above 0")
    _check_gammas(where, ranges, LUBLIN_PARAMS[kind])
    out["params"] = {k: ranges[k] for k in sorted(ranges)}
    out["kind"] = kind
    procs = mixture.get("procs")
    if procs is not None and (isinstance(procs, bool) or not isinstance(procs, int) or procs < 1):
        raise ScenarioError(f"{where}.procs", repr(procs), "a machine size >= 1 (or null)")
    out["procs"] = procs
    seed = mixture.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ScenarioError(f"{where}.seed", repr(seed), "an integer >= 0")
    out["seed"] = seed
    return out


def _check_gammas(where: str, ranges: dict[str, list[float]], base: LublinParams) -> None:
    """Refuse ranges whose largest Gamma mean passes the model's redraw cut-off.

    The model redraws a log run time above MAX_LOG_RUN (a log gap above
    MAX_LOG_GAP); with a mean past the cut-off almost every draw is redrawn
    and generation would not end.
    """
    def top(name: str) -> float:
        return ranges[name][1] if name in ranges else getattr(base, name)

    for a, b, limit in (("a1", "b1", MAX_LOG_RUN), ("a2", "b2", MAX_LOG_RUN)):
        if top(a) * top(b) >= limit:
            raise ScenarioError(f"{where}.params", f"{a} * {b} up to {top(a) * top(b):.3g}",
                                f"a mean log run time below {limit:g} (narrow {a} or {b})")
    mean_gap = top("aarr") * top("arar") * top("barr")
    if mean_gap >= MAX_LOG_GAP:
        raise ScenarioError(f"{where}.params", f"aarr * arar * barr up to {mean_gap:.3g}",
                            f"a mean log gap below {MAX_LOG_GAP:g} (narrow aarr, arar or barr)")


def draw_params(mixture: Mapping[str, Any], rng: np.random.Generator) -> LublinParams:
    """One episode's Lublin parameters: each ranged field uniform in its range (sorted order)."""
    base = LUBLIN_PARAMS[mixture["kind"]]
    drawn = {name: float(rng.uniform(lo, hi)) if hi > lo else float(lo)
             for name, (lo, hi) in sorted(mixture["params"].items())}
    return replace(base, **drawn)


class MixtureDraw:
    """What one mixture episode is: its component and, for Lublin, its parameters and load."""

    def __init__(self, component: str, params: LublinParams | None = None,
                 load: float | None = None, seed: int | None = None, start: int | None = None,
                 start_hour: int = 0):
        self.component, self.params, self.load = component, params, load
        self.seed, self.start, self.start_hour = seed, start, start_hour


def draw_episode(mixture: Mapping[str, Any], rng: np.random.Generator,
                 n_trace_jobs: int, n: int) -> MixtureDraw:
    """Choose one episode of a normalised mixture with ``rng`` (no jobs generated yet).

    The draws come in a fixed order (component, then parameters, load and
    model seed, or the window's offset), so a generator in the same state
    gives the same episode.
    """
    total = mixture["lublin"] + mixture["trace"]
    if rng.random() * total < mixture["trace"]:
        return MixtureDraw("trace", start=int(rng.integers(0, n_trace_jobs - n + 1)))
    params = draw_params(mixture, rng)
    lo, hi = mixture["load"]
    load = float(rng.uniform(lo, hi)) if hi > lo else float(lo)
    return MixtureDraw("lublin", params=params, load=load, seed=int(rng.integers(2**31)),
                       start_hour=int(rng.integers(24)))


def lublin_episode(draw: MixtureDraw, n: int, procs: int) -> Workload:
    """The jobs of a Lublin draw: ``n`` jobs on ``procs`` processors at the drawn load.

    The load is Lublin's, counted from the episode's first second (its start
    hour), so a short episode starting at night and one at noon reach it alike.
    """
    return lublin(n, procs=procs, seed=draw.seed, load=draw.load, params=draw.params,
                  start_hour=draw.start_hour)
