"""A Gymnasium environment over the same SimPy model the heuristics run in.

The scheduler asks an :class:`~cosim.env.actions.AgentPolicy` at every
decision point; the policy posts the request as a SimPy event and the
environment answers it from :meth:`SchedulingEnv.step`, then runs the
simulation until the next request. Simulated time does not move while the
agent thinks, and heuristics and agents share one code path (the scheduler
validates every decision).

Its settings are an :class:`~cosim.env.spec.EnvSpec` (frozen, validated
once, JSON-safe, saved in checkpoints); the live collaborators (a prepared
workload, the ``predictions`` callable, a factory of base policies) are
given beside it.

The parts, each chosen by name:

- :mod:`~cosim.env.actions`: the action models ``start`` (DBF split window
  with Fwd and kill slots), ``select`` (pick the next job; it starts or is
  reserved, EASY backfills around it) and ``dras`` (DRAS's two levels:
  ready/reserved, then backfill choices), each a flat ``Discrete`` space with
  an ``int8`` mask (also in ``info["action_mask"]`` and
  :meth:`SchedulingEnv.action_masks`), the starvation guard, and in-process
  acting so a trained agent runs as a plain policy.
- :mod:`~cosim.env.observations`: ``compact``, ``kernel``, ``image``, ``dras``.
- :mod:`~cosim.env.rewards`: ``slowdown``, ``slowdown_queued``, ``bsld``,
  ``completion``, ``dbf``, ``capability``, ``capacity`` (SMDP option
  ``smdp_gamma``; ``info["dt"]`` is the time since the previous decision).
- :mod:`~cosim.env.episodes`: random windows of the trace (DBF /
  RLScheduler), DRAS jobsets, or a curriculum; with ``episode_end="placed"``
  (DBF) the episode is truncated once that many jobs were started, with
  ``"completed"`` it terminates when every job has ended.
- :mod:`~cosim.env.teacher`: what a heuristic would do now (imitation).

:data:`ENV_ID` is registered with Gymnasium once, on ``import cosim``
(:func:`cosim.register_env`, also here as :func:`register`).
"""

from cosim import ENV_ID
from cosim import register_env as register  # the one registration (done on import cosim)
from cosim.env.actions import ACTION_MODELS, ActionMap, AgentPolicy
from cosim.env.episodes import EPISODE_SOURCES
from cosim.env.observations import OBSERVATIONS
from cosim.env.rewards import REWARDS
from cosim.env.scheduling import DEFAULT_SCENARIO, SchedulingEnv
from cosim.env.spec import EnvSpec

__all__ = ["SchedulingEnv", "EnvSpec", "AgentPolicy", "ActionMap", "ACTION_MODELS", "OBSERVATIONS",
           "REWARDS", "EPISODE_SOURCES", "ENV_ID", "DEFAULT_SCENARIO", "register"]

