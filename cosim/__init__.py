"""SimPy co-simulation of HPC users, compute nodes and a batch scheduler.

``import cosim`` is light: it never imports torch or xgboost.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
