"""SimPy co-simulation of HPC users, compute nodes and a batch scheduler.

``import cosim`` is light: it never imports torch or xgboost. It registers the
Gymnasium id ``cosim/Scheduling-v0`` (when Gymnasium is installed), so
``gymnasium.make("cosim/Scheduling-v0")`` works after it; the environment's
module itself loads only on ``make``.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]

#: The id :mod:`cosim.env` registers; kept equal to ``cosim.env.ENV_ID``.
_ENV_ID = "cosim/Scheduling-v0"


def _register_env() -> None:
    """Register :data:`_ENV_ID` by name only: the entry point is imported by ``make``."""
    try:
        import gymnasium
    except ImportError:  # the simulator runs without Gymnasium; only the env needs it
        return
    if _ENV_ID not in gymnasium.registry:
        gymnasium.register(id=_ENV_ID, entry_point="cosim.env:SchedulingEnv",
                           disable_env_checker=True)


_register_env()
