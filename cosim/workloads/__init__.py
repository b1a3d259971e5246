"""Workload sources: SWF traces, Slurm accounting, Lublin-Feitelson, Mao/DeepRM, VASP; estimate models; windows; loading a scenario's workload."""

from cosim.workloads.base import COLUMNS, Workload
from cosim.workloads.estimates import (
    ESTIMATE_MODELS,
    ExactEstimates,
    GaussianEstimates,
    TsafrirEstimates,
    apply_estimates,
)
from cosim.workloads.loading import STREAMS, load_workload, resolve_machine, streams
from cosim.workloads.lublin import lublin
from cosim.workloads.mao import mao
from cosim.workloads.oszicar import format_oszicar, parse_oszicar
from cosim.workloads.slurm import read_sacct
from cosim.workloads.swf import CLEANING_RULES, SwfHeader, read_swf, read_swf_header, write_swf
from cosim.workloads.vasp import VaspJobs, generate_vasp
from cosim.workloads.windows import jobsets, window

__all__ = ["COLUMNS", "Workload", "read_swf", "read_swf_header", "write_swf", "SwfHeader",
           "CLEANING_RULES", "lublin", "mao", "ESTIMATE_MODELS", "apply_estimates",
           "ExactEstimates", "GaussianEstimates", "TsafrirEstimates", "window", "jobsets",
           "generate_vasp", "VaspJobs", "parse_oszicar", "format_oszicar", "load_workload",
           "streams", "STREAMS", "read_sacct", "resolve_machine"]
