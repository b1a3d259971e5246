"""Env wrappers that training and benchmarks put around :class:`cosim.env.SchedulingEnv`.

The teacher's action is the env's own (its ``teacher`` setting, one name or
one per DRAS level), saved with its spec. :class:`VariableLengthEpisodes`
draws each episode's job
count from its reset seed, so training stays exactly resumable;
:class:`PairedReturn` measures an episode against a heuristic's schedule of
the same jobs, and can skip windows where no heuristic order matters.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from cosim.errors import InputError

__all__ = ["VariableLengthEpisodes", "PairedReturn", "PAIRED_METRICS",
           "PAIRED_MODES", "CONTENTION_POLICIES", "heuristic_metric", "paired_advantage"]

#: ``PairedReturn(metric=...)``: the key of the episode metrics (and of
#: :func:`cosim.metrics.headline`, the same vocabulary) it compares.
PAIRED_METRICS = {"bsld": "bsld_mean", "wait": "wait_mean"}

#: ``PairedReturn(mode=...)``: how the episode's advantage is formed and combined.
PAIRED_MODES = {
    "replace": "relative difference (baseline - agent) / max(baseline, 1), in (-inf, 1]; "
               "the per-step rewards become 0",
    "add": "the same relative difference, added to the env's own per-step rewards",
    "log": "log ratio log(max(baseline, 1) / max(agent, 1)), clipped to [-1, 1]; "
           "per-step rewards 0",
    "clip": "the relative difference clipped to [-1, 1]; per-step rewards 0",
}

#: Bound of the ``log`` and ``clip`` advantages: a schedule e times worse (log) or
#: twice as bad (clip) than the baseline's scores -1, no less.
PAIRED_BOUND = 1.0


def paired_advantage(baseline: float, agent: float, mode: str = "replace") -> float:
    """The paired advantage of an episode metric ``agent`` over ``baseline`` (lower is better).

    ``replace`` and ``add`` give the relative difference
    ``(baseline - agent) / max(baseline, 1)``, which is at most 1 but
    unbounded below: one very bad episode outweighs many good ones. ``log``
    gives ``log(max(baseline, 1) / max(agent, 1))``, symmetric (twice as good
    and twice as bad weigh the same), and ``clip`` the relative difference;
    both clipped to ``[-1, 1]``. The floor of 1 keeps a zero-wait window finite.

    Examples:
        >>> paired_advantage(20.0, 10.0), paired_advantage(10.0, 40.0)
        (0.5, -3.0)
        >>> round(paired_advantage(20.0, 10.0, "log"), 6), paired_advantage(10.0, 40.0, "log")
        (0.693147, -1.0)
        >>> paired_advantage(10.0, 40.0, "clip"), paired_advantage(0.0, 0.5, "log")
        (-1.0, 0.0)
    """
    if mode == "log":
        value = math.log(max(baseline, 1.0) / max(agent, 1.0))
    else:
        value = (baseline - agent) / max(baseline, 1.0)
        if mode != "clip":
            return value
    return min(PAIRED_BOUND, max(-PAIRED_BOUND, value))


#: The heuristics whose spread decides whether a window has anything to learn.
CONTENTION_POLICIES = ("fcfs+easy", "sjf+easy", "saf+easy")

#: Job columns :func:`cosim.metrics.headline` reads (as ``SchedulingEnv.episode_metrics``).
_JOB_COLUMNS = ("submit", "start", "end", "run", "procs", "outcome", "killed_seconds",
                "killed_core_seconds")


class VariableLengthEpisodes(gym.Wrapper):
    """Draw each episode's job count uniformly in ``[low, high]`` from its reset seed.

    Deterministic given the seed, so training runs stay exactly resumable.
    """

    def __init__(self, env: gym.Env, low: int, high: int):
        super().__init__(env)
        self.low, self.high = int(low), int(high)
        self._rng = np.random.default_rng(0)

    def reset(self, *, seed=None, options=None):
        """Reset with a job count drawn from ``seed``."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.env.unwrapped.episode_jobs = int(self._rng.integers(self.low, self.high + 1))
        return self.env.reset(seed=seed, options=options)

    def action_masks(self):
        """The wrapped env's mask."""
        return self.env.unwrapped.action_masks()


def heuristic_metric(env: gym.Env, workload, policy: str, metric: str = "bsld") -> float:
    """Episode ``metric`` of heuristic ``policy`` run by the engine on ``workload``.

    The scenario, tau and machine are the env's, and the value is computed by
    the same definition as the env's ``info["episode_metrics"]``
    (:func:`cosim.metrics.headline` over the finished jobs), so an agent that
    reproduces the heuristic's schedule scores exactly the same.
    """
    import simpy

    from cosim import metrics, records
    from cosim.model import build
    from cosim.policies import make_policy

    base = env.unwrapped
    sim_env = simpy.Environment()
    sim = build(sim_env, base.scenario, make_policy(policy, rng=np.random.default_rng(0)),
                workload=workload)
    sim_env.run(until=sim.finished)
    jobs = records.jobs_table(sim.scheduler.jobs, _JOB_COLUMNS)
    value = metrics.headline(jobs, None, cores=base.capacity, tau=base.tau)[PAIRED_METRICS[metric]]
    return math.nan if value is None else float(value)


class PairedReturn(gym.Wrapper):
    """The episode's return measured against a heuristic's schedule of the same jobs.

    At each reset the baseline heuristic is run by the engine on the
    episode's workload; at the episode's end the reward gets the paired
    advantage ``(baseline - agent) / max(baseline, 1)`` of the episode metric
    (lower is better, so a positive value means the agent beat its baseline on
    these very jobs; the floor of 1 keeps a zero-wait baseline finite). The
    advantage over the base heuristic's schedule of the same window is the
    signal of SchedInspector and RLBackfilling: it removes the variance of
    the windows themselves, which dwarfs what a policy changes.

    Args:
        env: a :class:`cosim.env.SchedulingEnv` (possibly wrapped) with
            ``episode_end="completed"`` (a truncated episode has no comparable metric).
        baseline: a heuristic policy name, e.g. ``saf+easy``.
        metric: ``bsld`` (mean bounded slowdown) or ``wait`` (mean wait).
        mode: how the advantage is formed (:data:`PAIRED_MODES`): ``replace``
            (the per-step rewards become 0; the return is the relative
            difference alone), ``add`` (added to the env's own rewards), or the
            bounded ``log`` (log ratio) and ``clip`` (clipped relative
            difference), both in ``[-1, 1]`` and replacing the per-step rewards.
        contention_min: skip windows where the heuristics of :data:`CONTENTION_POLICIES`
            (with the baseline) are within this relative spread,
            ``max / min - 1 < contention_min``: nothing to learn there. None: no filtering.
        max_skips: windows skipped at most per reset; the next one is then
            played anyway (``info["paired_contended"]`` says so).

    ``info`` at reset holds ``paired_baseline`` (the baseline's metric),
    ``paired_skipped`` and ``paired_contended``; the last step's ``info``
    holds ``paired_advantage``.

    This is not the evaluation protocol's paired comparison
    (:meth:`cosim.evaluation.Protocol.compare`), by nature: that one judges a
    policy over many windows at once (ratio of means, median ratio, wins and
    losses, a bootstrap interval), after training; this one is a reward, a
    number per episode at the moment the episode ends, which a learner needs
    while it trains and which has no interval. What they share is the per-job
    definition of the metric (:mod:`cosim.metrics`, by :func:`heuristic_metric`
    as by the env's ``episode_metrics``). The env is a sibling of
    :mod:`cosim.evaluation` in the layers (contract ``cosim-layers``), so it
    runs the baseline itself rather than through the protocol's evaluator.
    """

    def __init__(self, env: gym.Env, baseline: str = "saf+easy", metric: str = "bsld",
                 mode: str = "replace", contention_min: float | None = None,
                 max_skips: int = 32):
        super().__init__(env)
        from cosim.policies import make_policy

        make_policy(baseline, where="paired baseline")     # a bad name fails now
        if metric not in PAIRED_METRICS:
            raise InputError("paired metric", repr(metric), f"one of {', '.join(PAIRED_METRICS)}")
        if mode not in PAIRED_MODES:
            raise InputError("paired mode", repr(mode), f"one of {', '.join(PAIRED_MODES)}")
        if contention_min is not None and not contention_min >= 0:
            raise InputError("contention_min", repr(contention_min), "a relative spread >= 0")
        if not (isinstance(max_skips, int) and max_skips >= 0):
            raise InputError("max_skips", repr(max_skips), "an integer >= 0")
        if getattr(env.unwrapped, "episode_end", "completed") != "completed":
            raise InputError("paired episode_end", repr(env.unwrapped.episode_end),
                             "completed (a truncated episode has no comparable metric)")
        self.baseline, self.metric, self.mode = baseline, metric, mode
        self.contention_min, self.max_skips = contention_min, max_skips
        self.baseline_value = math.nan

    def _window_values(self, workload) -> dict[str, float]:
        names = [self.baseline]
        if self.contention_min is not None:
            names += [n for n in CONTENTION_POLICIES if n != self.baseline]
        return {n: heuristic_metric(self.env, workload, n, self.metric) for n in names}

    def reset(self, *, seed=None, options=None):
        """Reset; with ``contention_min``, draw again past windows with nothing to learn.

        A workload given as ``options={"jobs": ...}`` is played as given.

        The windows skipped follow from the reset seed (the env's own generator
        draws them), so a resumed run replays the same episodes.
        """
        obs, info = self.env.reset(seed=seed, options=options)
        skipped, contended = 0, True
        # A workload given in the options is played as given, never skipped.
        filtering = self.contention_min is not None and "jobs" not in (options or {})
        while True:
            values = self._window_values(self.env.unwrapped.simulation.workload)
            if not filtering:
                break
            low, high = min(values.values()), max(values.values())
            contended = not (high <= low * (1.0 + self.contention_min))
            if contended or skipped >= self.max_skips:
                break
            skipped += 1
            # The next window of the same source: a curriculum moves on by
            # itself, so its fixed index is dropped.
            again = {k: v for k, v in (options or {}).items() if k != "episode"}
            obs, info = self.env.reset(seed=None, options=again or None)
        self.baseline_value = values[self.baseline]
        info.update(paired_baseline=self.baseline_value, paired_skipped=skipped,
                    paired_contended=contended)
        return obs, info

    def step(self, action):
        """Step; the last step's reward gets the paired advantage."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.mode != "add":
            reward = 0.0
        if terminated or truncated:
            agent = float(info["episode_metrics"][PAIRED_METRICS[self.metric]])
            advantage = paired_advantage(self.baseline_value, agent, self.mode)
            info["paired_advantage"] = advantage
            reward = float(reward) + advantage
        return obs, reward, terminated, truncated, info

    def action_masks(self):
        """The wrapped env's mask."""
        return self.env.unwrapped.action_masks()
