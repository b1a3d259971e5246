"""The beliefs ``agents`` can plan with on the evaluation protocol's windows.

The protocol (:mod:`cosim.evaluation`) is on the model side and may not import
``predictors``; ``import agents`` installs the backend of each predictor it can
score there in :data:`cosim.policies.loaders.PREDICTION_BACKENDS`, as it installs
the loader of ``rl:DIR``. ``@history`` is Tsafrir's last-two user history
(:class:`predictors.history.HistoryBackend`), learnt inside each run; ``@xgboost`` on a
trace is the trace model (:class:`predictors.trace_backend.TraceModelBackend`), fitted on
the jobs finished before the window (cached by trace hash) and refitted inside it.
"""

from __future__ import annotations

from cosim.errors import ScenarioError
from cosim.policies.loaders import register_prediction_backend

#: The workload kinds that are traces: the trace model learns from their past.
TRACE_KINDS = ("swf", "slurm")

__all__ = ["TRACE_KINDS", "history_backend", "trace_model_backend", "install"]

#: The whole trace of a window, by its file: loaded once per process.
_WHOLE: dict[str, object] = {}


def history_backend(scenario, window):
    """A fresh last-two history for one run (``predictors`` imported on first use)."""
    from predictors.history import history_backend as fresh

    return fresh(window)


def trace_model_backend(scenario, window):
    """The trace model for one run of ``window``, a cut of the scenario's trace, from the
    model fitted on its past (:func:`predictors.trace_past.window_model`)."""
    from cosim.workloads.loading import load_workload
    from cosim.workloads.windows import source_file
    from predictors.trace_backend import TraceModelBackend
    from predictors.trace_past import window_model

    if scenario.workload.kind not in TRACE_KINDS or scenario.predictor.models:
        raise ScenarioError("@xgboost", f"a {scenario.workload.kind} workload" + (
            " with predictor.models" if scenario.predictor.models else ""),
            "a trace (swf, slurm) without predictor.models in the protocol's windows "
            "(python -m cosim run compares the others)")
    source = source_file(str(window.source))
    if source not in _WHOLE:
        wc = scenario.workload.model_copy(update={"path": source, "jobs": None, "offset": 0})
        _WHOLE[source] = load_workload(scenario.model_copy(update={"workload": wc}))
    model, past = window_model(scenario, _WHOLE[source], window)
    return TraceModelBackend(window, model, past=past)


def install() -> None:
    """Register the predictors the protocol can score (``@history``, ``@xgboost`` on a trace)."""
    register_prediction_backend("history", history_backend)
    register_prediction_backend("xgboost", trace_model_backend)
