"""SimPy co-simulation of HPC users, compute nodes and a batch scheduler.

``import cosim`` is light: it never imports torch or xgboost. It registers the
Gymnasium id ``cosim/Scheduling-v0`` (when Gymnasium is installed), so
``gymnasium.make("cosim/Scheduling-v0")`` works after it; the environment's
module itself loads only on ``make``.
"""

__version__ = "0.1.0"
__all__ = ["__version__", "ENV_ID", "register_env"]

#: The Gymnasium id of :class:`cosim.env.SchedulingEnv` (also ``cosim.env.ENV_ID``).
ENV_ID = "cosim/Scheduling-v0"


def register_env() -> None:
    """Register :data:`ENV_ID` by name only: the entry point is imported by ``make``.

    The one registration, done on ``import cosim`` (so also before ``cosim.env``
    loads); calling it again changes nothing.
    """
    try:
        import gymnasium
    except ImportError:  # the simulator runs without Gymnasium; only the env needs it
        return
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="cosim.env:SchedulingEnv",
                           disable_env_checker=True)


register_env()
