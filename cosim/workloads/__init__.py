"""Workload sources: SWF traces, Lublin-Feitelson, Mao/DeepRM, VASP; estimate models."""

from cosim.workloads.base import COLUMNS, Workload

__all__ = ["COLUMNS", "Workload"]
