"""The version of the predictors code.

A leaf module, so :mod:`predictors.bundle` can put the version in the key of
a cached models folder without importing the ``predictors`` package that
imports it. Bump it whenever the models or the VASP generator that trains
them change, so ``.cache/cosim-models`` folders trained by older code are not
reused.
"""

__all__ = ["__version__"]

__version__ = "0.4.0"
