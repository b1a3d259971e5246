"""A Gymnasium environment over the same SimPy model the heuristics run in.

The scheduler asks an :class:`~cosim.env.actions.AgentPolicy` at every
decision point; the policy posts the request as a SimPy event and the
environment answers it from :meth:`SchedulingEnv.step`, then runs the
simulation until the next request. Simulated time does not move while the
agent thinks, and heuristics and agents share one code path (the scheduler
validates every decision).

The parts, each chosen by name:

- :mod:`~cosim.env.actions`: the flat ``Discrete`` action index map (window
  slots, Wait/Fwd, kill slots), the ``int8`` mask (also in
  ``info["action_mask"]`` and :meth:`SchedulingEnv.action_masks`), the
  starvation guard, and :class:`~cosim.env.actions.ActingPolicy`, which runs a
  trained agent as a plain policy.
- :mod:`~cosim.env.observations`: ``compact``, ``kernel``, ``image``.
- :mod:`~cosim.env.rewards`: ``slowdown``, ``slowdown_window``, ``bsld``,
  ``completion``, ``dbf``, ``capability``, ``capacity`` (SMDP option
  ``smdp_gamma``; ``info["dt"]`` is the time since the previous decision).
- :mod:`~cosim.env.episodes`: random windows of the trace (DBF /
  RLScheduler), DRAS jobsets, or a curriculum; with ``episode_end="placed"``
  (DBF) the episode is truncated once that many jobs were started, with
  ``"completed"`` it terminates when every job has ended.
- :mod:`~cosim.env.teacher`: what a heuristic would do now (imitation).

``import cosim.env`` registers :data:`ENV_ID` with Gymnasium.
"""

from cosim.env.actions import ActingPolicy, ActionMap, AgentPolicy
from cosim.env.episodes import EPISODE_SOURCES
from cosim.env.observations import OBSERVATIONS
from cosim.env.rewards import REWARDS
from cosim.env.scheduling import ENV_ID, SchedulingEnv, register

__all__ = ["SchedulingEnv", "AgentPolicy", "ActingPolicy", "ActionMap", "OBSERVATIONS",
           "REWARDS", "EPISODE_SOURCES", "ENV_ID", "register"]

register()
