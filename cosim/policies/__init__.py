"""Scheduling policies that need no learning: heuristics, backfilling, knapsack, and their names.

- :mod:`~cosim.policies.heuristics`: queue orders (FCFS, SJF, F1, WFP3, ...).
- :mod:`~cosim.policies.backfill`: a heuristic with a backfilling variant
  (none, greedy, EASY, conservative) as one policy.
- :mod:`~cosim.policies.knapsack`: DRAS's optimization baseline.
- :mod:`~cosim.policies.kill`: RLSchert's kill rule, a wrapper around any
  policy that kills what the rule condemns at each progress check.
- :mod:`~cosim.policies.names`: the policy-name grammar
  (``HEURISTIC[+BACKFILL][@PREDICTOR[+kill]]``, ``knapsack``, ``rl:DIR``).

Trained agents are policies too (``rl:DIR``); they need torch and live in
``agents/``, loaded by :mod:`cosim.compose`.
"""

from cosim.policies.backfill import BACKFILLS, Profile, QueuePolicy, easy_admits
from cosim.policies.heuristics import HEURISTICS, Heuristic
from cosim.policies.kill import KILL_RULES, KillRule, KillRulePolicy
from cosim.policies.knapsack import KnapsackPolicy, knapsack
from cosim.policies.names import (
    PREDICTORS,
    SELECTORS,
    PolicySpec,
    grammar_help,
    make_policy,
    parse_policy,
    policy_names,
)

__all__ = ["HEURISTICS", "Heuristic", "BACKFILLS", "QueuePolicy", "Profile", "easy_admits",
           "KnapsackPolicy", "knapsack", "KillRule", "KILL_RULES", "KillRulePolicy",
           "PREDICTORS", "SELECTORS", "PolicySpec", "parse_policy", "make_policy", "policy_names",
           "grammar_help"]
