"""An XGBoost tree ensemble compiled to one Python function, evaluated without XGBoost.

Inside a simulation the trace model is asked about one or two jobs at each
decision point, tens of thousands of times per replay. XGBoost's own
``inplace_predict`` costs about 0.4 ms a call whatever the batch (setting
up its proxy matrix and threads; ten times that with a ``base_margin``),
which made a replay on the trace model a hundred times slower than one on
requests. :class:`CompiledForest` reads the booster's JSON model once per
fit and writes its trees as nested ``if``/``else`` statements of one Python
function (only numbers from the model go into the source: float and int
literals and frozensets of ints), so one row costs a few hundred comparisons.

The decisions are XGBoost's own (``src/tree/``): a numerical split sends a
value ``x < split_condition`` left, both in float32 (rows are rounded to
float32 first, so the float64 comparison is exact); a missing value (NaN)
goes the node's ``default_left`` way (written as ``not x >= t`` for a node
whose default is left, ``x < t`` otherwise: NaN fails every comparison); a
categorical (partition) split sends the categories listed for the node right,
every other category left. Leaves hold their value (the learning rate
applied) in ``split_conditions``. The answer is the margin: ``base_score``
(or the given base margin) plus the leaves reached, which is the prediction
of the identity-link objectives the trace model uses (``reg:squarederror``,
``reg:quantileerror``); the leaves are summed in float64, where XGBoost sums
in float32 (a difference of about 1e-5 in log time).
``tests/test_trace_forest.py`` checks it against XGBoost.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

__all__ = ["CompiledForest"]

_IDENTITY_OBJECTIVES = ("reg:squarederror", "reg:quantileerror", "reg:absoluteerror")


class CompiledForest:
    """The trees of a fitted ``xgboost.Booster`` as one compiled Python function.

    Args:
        booster: a fitted booster with one output and an identity link.

    Attributes:
        base_score: the margin every row starts from without a base margin.
        n_trees: the trees compiled.
    """

    def __init__(self, booster: Any):
        model = json.loads(booster.save_raw("json"))
        learner = model["learner"]
        objective = learner["objective"]["name"]
        if objective not in _IDENTITY_OBJECTIVES:
            raise ValueError(f"objective {objective!r} has a link; expected one of "
                             f"{', '.join(_IDENTITY_OBJECTIVES)}")
        score = learner["learner_model_param"]["base_score"]
        self.base_score = float(json.loads(score)[0] if score.startswith("[") else score)
        trees = learner["gradient_booster"]["model"]["trees"]
        n_features = int(learner["learner_model_param"]["num_feature"])
        self.n_trees = len(trees)
        self._sets: list[frozenset[int]] = []
        lines = [f"def forest({', '.join(f'x{k}' for k in range(n_features)) or '_'}):",
                 "    s = 0.0"]
        for tree in trees:
            self._tree(tree, 0, 1, lines)
        lines.append("    return s")
        namespace: dict[str, Any] = {f"C{k}": c for k, c in enumerate(self._sets)}
        exec(compile("\n".join(lines), "<xgboost forest>", "exec"), namespace)  # noqa: S102
        self._forest = namespace["forest"]

    def _tree(self, tree: dict[str, Any], node: int, depth: int, lines: list[str]) -> None:
        """Append the statements of ``node`` (and below it) at indentation ``depth``."""
        pad = "    " * depth
        left, right = tree["left_children"][node], tree["right_children"][node]
        if left < 0:
            lines.append(f"{pad}s += {_literal(tree['split_conditions'][node])}")
            return
        x = f"x{int(tree['split_indices'][node])}"
        default_left = bool(tree["default_left"][node])
        if tree["split_type"][node] == 1:   # categorical: the listed categories go right
            k = len(self._sets)
            self._sets.append(frozenset(_categories(tree, node)))
            test = f"{x} in C{k}" if default_left else f"{x} != {x} or {x} in C{k}"
            first, second = right, left
        else:
            t = _literal(np.float32(tree["split_conditions"][node]))
            test = f"not {x} >= {t}" if default_left else f"{x} < {t}"
            first, second = left, right
        lines.append(f"{pad}if {test}:")
        self._tree(tree, first, depth + 1, lines)
        lines.append(f"{pad}else:")
        self._tree(tree, second, depth + 1, lines)

    def margin(self, X: np.ndarray, base_margin: np.ndarray | None = None) -> np.ndarray:
        """Each row's margin: its base (``base_score`` or ``base_margin``) plus its leaves.

        Args:
            X: ``(n, features)`` as the booster was fitted on (categoricals as
                codes, NaN missing).
            base_margin: per-row start, or None.
        """
        rows = np.asarray(X, dtype=np.float32).tolist()
        forest = self._forest
        leaves = np.fromiter((forest(*row) for row in rows), dtype=np.float64, count=len(rows))
        start = self.base_score if base_margin is None else np.asarray(base_margin, np.float64)
        return leaves + start


def _categories(tree: dict[str, Any], node: int) -> list[int]:
    k = tree["categories_nodes"].index(node)
    seg, size = tree["categories_segments"][k], tree["categories_sizes"][k]
    return [int(c) for c in tree["categories"][seg: seg + size]]


def _literal(value: Any) -> str:
    """A float as a Python literal that reads back exactly (no names, no expressions)."""
    v = float(value)
    if not math.isfinite(v):
        return "float('inf')" if v > 0 else ("float('-inf')" if v < 0 else "float('nan')")
    return repr(v)
