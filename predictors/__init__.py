"""Runtime and remaining-time predictors for HPC jobs (XGBoost, PyTorch RNN, user history)."""

__all__: list[str] = []
