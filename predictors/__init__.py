"""Runtime and remaining-time predictors for HPC jobs (XGBoost, trees or a GRU over progress, user history).

Usable without running a simulation; ``import predictors`` loads neither
torch nor xgboost (they are imported when a model is built or loaded).
"""

from predictors._version import __version__ as __version__  # re-exported, not in __all__
from predictors.bundle import ModelBundle, PrecomputedBackend, ensure_models
from predictors.evaluate import evaluate, evaluate_dir, read_data
from predictors.history import HistoryBackend, UserHistoryRegressor
from predictors.persist import load, read_meta, save
from predictors.remaining import (
    FRACTIONS,
    PROGRESS_COLUMNS,
    Progress,
    RemainingTimeRegressor,
    scf_done_at,
)
from predictors.runtime import FeatureSpec, RuntimeRegressor
from predictors.training import train_model

__all__ = ["RuntimeRegressor", "FeatureSpec", "RemainingTimeRegressor", "Progress", "scf_done_at",
           "PROGRESS_COLUMNS", "FRACTIONS", "UserHistoryRegressor", "HistoryBackend", "save",
           "load", "read_meta", "evaluate", "evaluate_dir", "read_data", "ModelBundle",
           "PrecomputedBackend", "ensure_models", "train_model"]
