"""The version of the predictors code.

A leaf module, so :mod:`predictors.bundle` can put the version in the key of
a cached models folder without importing the ``predictors`` package that
imports it.
"""

__all__ = ["__version__"]

__version__ = "0.2.0"
