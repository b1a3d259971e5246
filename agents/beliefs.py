"""The beliefs ``agents`` can plan with on the evaluation protocol's windows.

The protocol (:mod:`cosim.evaluation`) is on the model side and may not import
``predictors``; ``import agents`` installs the backend of each predictor it can
score there in :data:`cosim.policies.loaders.PREDICTION_BACKENDS`, as it installs
the loader of ``rl:DIR``. ``@history`` is Tsafrir's last-two user history
(:class:`predictors.history.HistoryBackend`), learnt inside each run.
"""

from __future__ import annotations

from cosim.policies.loaders import register_prediction_backend

__all__ = ["history_backend", "install"]


def history_backend(workload):
    """A fresh last-two history for one run (``predictors`` imported on first use)."""
    from predictors.history import history_backend as fresh

    return fresh(workload)


def install() -> None:
    """Register the predictors the protocol can score (``@history``)."""
    register_prediction_backend("history", history_backend)
