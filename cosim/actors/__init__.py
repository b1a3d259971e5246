"""The SimPy actors: users submit jobs, nodes run them, the scheduler decides."""

from cosim.actors.nodes import Cluster, Killed, Node, NodeFailure
from cosim.actors.scheduler import Scheduler
from cosim.actors.users import Users

__all__ = ["Cluster", "Killed", "Node", "NodeFailure", "Scheduler", "Users"]
