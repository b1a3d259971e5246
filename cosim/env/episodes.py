"""Where each episode's jobs come from (``episode_source=`` in the environment).

- ``window``: ``episode_jobs`` consecutive jobs from a random offset of the
  scenario's workload, shifted to start at 0 (DBF, RLScheduler).
- ``jobsets``: a DRAS phase-1 jobset, jobs drawn from the whole workload and
  re-timed with Poisson arrivals.
- ``curriculum``: the next workload of a list, cycling (DRAS's three phases
  come from :func:`cosim.workloads.windows.curriculum`).
- ``mixture``: each episode drawn from a mixture of the Lublin model with
  randomised parameters and windows of the scenario's workload
  (:mod:`cosim.workloads.mixture`).

``reset(options={"jobs": workload})`` bypasses the source and plays that workload.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cosim.errors import ScenarioError
from cosim.workloads.base import Workload
from cosim.workloads.mixture import draw_episode, lublin_episode, normalise_mixture
from cosim.workloads.windows import curriculum as dras_curriculum
from cosim.workloads.windows import jobsets, window

__all__ = ["EpisodeSource", "WindowEpisodes", "JobsetEpisodes", "CurriculumEpisodes",
           "MixtureEpisodes", "EPISODE_SOURCES", "make_episode_source"]


class EpisodeSource:
    """Gives the workload of the next episode."""

    def next(self, rng: np.random.Generator, index: int | None = None) -> Workload:
        """The jobs of the next episode (``rng`` is the env's ``np_random``).

        ``index`` is the episode's number in a training run (the trainer's
        count of episodes started, ``reset(options={"episode": k})``); only a
        curriculum uses it, as its position.
        """
        raise NotImplementedError


class WindowEpisodes(EpisodeSource):
    """Random windows of ``n`` consecutive jobs."""

    def __init__(self, workload: Workload, n: int):
        self.workload, self.n = workload, n

    def next(self, rng: np.random.Generator, index: int | None = None) -> Workload:
        """A window from a uniform random offset."""
        start_at = int(rng.integers(0, len(self.workload) - self.n + 1))
        return window(self.workload, self.n, start=start_at)


class JobsetEpisodes(EpisodeSource):
    """DRAS sampled jobsets of ``n`` jobs."""

    def __init__(self, workload: Workload, n: int):
        self.workload, self.n = workload, n

    def next(self, rng: np.random.Generator, index: int | None = None) -> Workload:
        """A fresh jobset."""
        return jobsets(self.workload, 1, self.n, seed=int(rng.integers(2**31)))[0]


class CurriculumEpisodes(EpisodeSource):
    """The workloads of a list in order, cycling; :attr:`position` counts episodes played.

    A trainer that numbers its episodes passes the number as ``index``; the
    position then follows the trainer (several envs share one sequence, and
    a resumed run continues where it stopped) instead of this env's own count.
    """

    def __init__(self, workloads: Sequence[Workload], position: int = 0):
        self.workloads = list(workloads)
        self.position = position

    def next(self, rng: np.random.Generator, index: int | None = None) -> Workload:
        """Workload ``index`` (default: the next one) of the list, cycling."""
        if index is not None:
            if int(index) < 0:
                raise ScenarioError("reset options.episode", repr(index), "an index >= 0")
            self.position = int(index)
        jobs = self.workloads[self.position % len(self.workloads)]
        self.position += 1
        return jobs


class MixtureEpisodes(EpisodeSource):
    """Episodes drawn from a workload mixture (:mod:`cosim.workloads.mixture`).

    Each episode takes one integer from the env's generator and seeds a
    generator of its own with it and the mixture's ``seed``: the same reset
    seed and mixture give the same episode, whichever env plays it.
    :attr:`last` is the latest episode's draw (component, parameters, load).
    """

    def __init__(self, workload: Workload, n: int, mixture):
        self.workload, self.n = workload, n
        self.mixture = normalise_mixture(mixture)
        if self.mixture["trace"] > 0 and n > len(workload):
            raise ScenarioError("mixture.trace", f"windows of {n} jobs",
                                f"at most the workload's {len(workload)} jobs")
        procs = self.mixture["procs"] or workload.max_procs or (
            int(workload.procs.max()) if len(workload) else 1)
        self.procs = int(procs)
        self.last = None

    def next(self, rng: np.random.Generator, index: int | None = None) -> Workload:
        """A Lublin workload with freshly drawn parameters, or a window of the trace."""
        own = np.random.default_rng([self.mixture["seed"], int(rng.integers(2**63))])
        self.last = draw = draw_episode(self.mixture, own, len(self.workload), self.n)
        if draw.component == "trace":
            return window(self.workload, self.n, start=draw.start)
        return lublin_episode(draw, self.n, self.procs)


#: Episode sources by the name the environment's ``episode_source=`` takes.
EPISODE_SOURCES = ("window", "jobsets", "curriculum", "mixture")


def make_episode_source(name: str, workload: Workload, episode_jobs: int,
                        curriculum=None, mixture=None) -> EpisodeSource:
    """The episode source ``name`` over ``workload``.

    Args:
        name: one of :data:`EPISODE_SOURCES`.
        workload: the scenario's workload.
        episode_jobs: jobs per episode.
        curriculum: for ``curriculum``: a list of workloads, or the keyword
            arguments of :func:`cosim.workloads.windows.curriculum` as a dict
            (JSON, so it can live in a saved env config).
        mixture: for ``mixture``: a mixture setting
            (:func:`cosim.workloads.mixture.normalise_mixture`); None takes
            the defaults.

    Raises:
        ScenarioError: an unknown name, or a curriculum given exactly when it
            should not be.
    """
    if name not in EPISODE_SOURCES:
        raise ScenarioError("episode_source", repr(name), "window, jobsets, curriculum or mixture")
    if (name == "curriculum") != bool(curriculum):
        raise ScenarioError("curriculum", "given" if curriculum else "missing",
                            "a non-empty list of workloads exactly when "
                            "episode_source is 'curriculum'")
    if mixture is not None and name != "mixture":
        raise ScenarioError("mixture", "given", "a mixture exactly when episode_source is 'mixture'")
    if name == "window":
        return WindowEpisodes(workload, episode_jobs)
    if name == "jobsets":
        return JobsetEpisodes(workload, episode_jobs)
    if name == "mixture":
        return MixtureEpisodes(workload, episode_jobs, mixture)
    if isinstance(curriculum, dict):
        try:
            workloads = dras_curriculum(workload, int(episode_jobs), **curriculum)
        except TypeError as exc:
            raise ScenarioError("curriculum", repr(curriculum),
                                "keys among sampled, periods, synthetic, load_range, seed") from exc
        return CurriculumEpisodes(workloads)
    return CurriculumEpisodes(curriculum)
