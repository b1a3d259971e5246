"""The cluster model inside a larger data-center study: node power states and a power cap.

The SimPy model of ``cosim`` (users, scheduler, nodes) is one component of a
facility model that owns the clock. The facility adds what the cluster
model does not know about:

- **Node power states.** A node draws ``busy_w`` while it runs a job,
  ``idle_w`` while it is on and idle, ``off_w`` when switched off, and
  ``busy_w`` while it boots (``boot_s`` seconds). Every ``check_s`` seconds
  the facility switches off the nodes that stayed idle through the whole
  interval, keeping ``spare`` idle nodes on.
- **Cooling**, as a constant power usage effectiveness: the facility draws
  ``pue`` times what the nodes draw.
- **A facility power cap**, and a lower one in a daily peak window (demand
  response): no job starts, and no node boots, if the facility would then
  draw more than the cap in force.

The scheduler's decisions feed back through a policy that wraps any
heuristic of :mod:`cosim.policies`: before a start is applied it asks the
facility, which says no when the job's nodes are off (it boots them) or when
the cap would be exceeded; the wrapper then stops the pass (a policy may
yield fewer decisions), and the job waits. The facility hears starts and
ends as a :class:`~cosim.actors.scheduler.SchedulerHooks` and asks for a
fresh pass (:meth:`~cosim.actors.scheduler.Scheduler.replan`) when nodes
finish booting, are switched off or the cap rises; job ends wake the
scheduler by themselves.

Everything here uses public names only: ``build(env, scenario, policy,
hooks=[...])``, ``SchedulerHooks``, ``Scheduler.replan``, the cluster's
``capacity`` and ``used_cores``, the jobs' fields, ``cosim.metrics``.

Run it to compare power management and caps on 3,000 Lublin-Feitelson jobs
on 256 nodes (about 10 s)::

    python examples/datacenter.py [--jobs 3000] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import simpy

from cosim import metrics
from cosim.actors.scheduler import Scheduler, SchedulerHooks
from cosim.config import Scenario, load_scenario
from cosim.decisions import START, Decision, SchedulerView
from cosim.job import Job
from cosim.model import Simulation, build
from cosim.policies import make_policy

__all__ = ["FacilityConfig", "Facility", "PowerCappedPolicy", "run_datacenter", "main"]

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "lublin256.yaml"
DAY = 86_400.0


@dataclass(frozen=True)
class FacilityConfig:
    """The facility around the cluster (one node = one unit the jobs ask for).

    Attributes:
        busy_w, idle_w, off_w: a node's draw running a job (and booting), on
            and idle, switched off (W).
        boot_s: seconds from switching a node on to being able to run a job.
        check_s: how often idle nodes are switched off; None: never (all on).
        spare: idle nodes kept on for arriving jobs.
        pue: facility power over IT power (cooling and distribution).
        cap_kw: facility power cap (kW); None: no cap.
        peak_cap_kw: a lower cap from ``peak_start`` to ``peak_end`` (hours of
            each day), as a utility's demand-response window; None: none.
    """

    busy_w: float = 350.0
    idle_w: float = 120.0
    off_w: float = 10.0
    boot_s: float = 180.0
    check_s: float | None = 1800.0
    spare: int = 16
    pue: float = 1.3
    cap_kw: float | None = None
    peak_cap_kw: float | None = None
    peak_start: float = 17.0
    peak_end: float = 20.0


class Facility(SchedulerHooks):
    """Node power states, cooling and the cap, next to the cluster in the same environment.

    Add it with ``build(..., hooks=[facility])``; it starts its own processes
    when the scheduler attaches it. Power is integrated exactly at every
    change (energy in J), and every change is kept in :attr:`samples`.

    Args:
        env: the environment the whole study runs in.
        nodes: nodes of the cluster (all on at time 0).
        config: the facility's parameters.
    """

    def __init__(self, env: simpy.Environment, nodes: int, config: FacilityConfig):
        self.env, self.nodes, self.cfg = env, nodes, config
        self.on = nodes              # nodes on (idle or busy), booting ones not counted
        self.booting = 0
        self.busy = 0
        self.min_idle = nodes        # fewest idle nodes since the last check
        self.energy_j = 0.0
        self.peak_w = 0.0
        self.samples: list[tuple[float, float]] = []   # (time, facility W) after each change
        self.boots = 0
        self.vetoes = {"nodes off": 0, "power cap": 0}
        self.scheduler: Scheduler | None = None
        self._last_t = env.now       # our own bookkeeping, not cosim's
        self._record()

    # -- what the facility draws and allows ----------------------------------------------
    def cap_w(self, t: float | None = None) -> float:
        """The cap in force at time ``t`` (W; inf without a cap)."""
        cfg = self.cfg
        t = self.env.now if t is None else t
        hour = (t % DAY) / 3600.0
        if cfg.peak_cap_kw is not None and cfg.peak_start <= hour < cfg.peak_end:
            return cfg.peak_cap_kw * 1000.0
        return math.inf if cfg.cap_kw is None else cfg.cap_kw * 1000.0

    def power_w(self, busy: int | None = None, on: int | None = None,
                booting: int | None = None) -> float:
        """Facility power now, or with other node counts (W)."""
        cfg = self.cfg
        busy = self.busy if busy is None else busy
        on = self.on if on is None else on
        booting = self.booting if booting is None else booting
        off = self.nodes - on - booting
        it = busy * cfg.busy_w + (on - busy) * cfg.idle_w + booting * cfg.busy_w + off * cfg.off_w
        return cfg.pue * it

    def admit(self, job: Job) -> bool:
        """May ``job`` start now? If its nodes are off, boot them (cap permitting) and say no."""
        idle = self.on - self.busy
        if job.procs > idle:
            missing = job.procs - idle - self.booting
            if missing > 0 and self.power_w(booting=self.booting + missing) <= self.cap_w():
                self.env.process(self._boot(missing))
            self.vetoes["nodes off"] += 1
            return False
        if self.power_w(busy=self.busy + job.procs) > self.cap_w():
            self.vetoes["power cap"] += 1
            return False
        return True

    def check_feasible(self, widest: int) -> None:
        """Raise ``ValueError`` if the idle facility (every node on, as at time 0) is over
        the cap, or if a job of ``widest`` nodes could never start under it.

        With the cap in force outside any peak window, that job must fit with
        nothing else running and the other nodes as low as the facility ever
        takes them (``spare`` idle, the rest off; all idle if nodes stay on).
        Then every job starts eventually: once the machine drains, the facility
        switches idle nodes off and asks for a pass.
        """
        on = widest + (min(self.cfg.spare, self.nodes - widest) if self.cfg.check_s is not None
                       else self.nodes - widest)
        need = self.power_w(busy=widest, on=on, booting=0)
        cap = math.inf if self.cfg.cap_kw is None else self.cfg.cap_kw * 1000.0
        if self.power_w() > cap:
            raise ValueError(f"the facility draws {self.power_w() / 1000:.1f} kW with every node "
                             f"on and idle, above the cap of {self.cfg.cap_kw} kW")
        if need > cap:
            raise ValueError(f"a {widest}-node job needs {need / 1000:.1f} kW with the machine "
                             f"otherwise idle; a cap of {self.cfg.cap_kw} kW would hold it forever")

    # -- hooks: the cluster's side ----------------------------------------------------------
    def attach(self, scheduler: Scheduler) -> None:
        """Start the facility's processes next to the scheduler's."""
        self.scheduler = scheduler
        if scheduler.cluster.capacity != self.nodes:
            raise ValueError(f"the facility has {self.nodes} nodes, the cluster "
                             f"{scheduler.cluster.capacity} units: use one core per node")
        if self.cfg.check_s is not None:
            self.env.process(self._switch_off_idle())
        if self.cfg.peak_cap_kw is not None:
            self.env.process(self._peak_windows())

    def job_started(self, job: Job) -> None:
        """A job took ``job.procs`` idle nodes."""
        self._change(busy=self.busy + job.procs)

    def job_left(self, job: Job, completed: bool) -> None:
        """A job gave its nodes back (they stay on, idle)."""
        self._change(busy=self.busy - job.procs)

    # -- processes --------------------------------------------------------------------------
    def _boot(self, k: int) -> Iterator[simpy.Event]:
        self.boots += k
        self._change(booting=self.booting + k)
        yield self.env.timeout(self.cfg.boot_s)
        self._change(booting=self.booting - k, on=self.on + k)
        self.scheduler.replan()      # the cluster cannot see that nodes came up

    def _switch_off_idle(self) -> Iterator[simpy.Event]:
        while True:
            yield self.env.timeout(self.cfg.check_s)
            excess = self.min_idle - self.cfg.spare
            if excess > 0:
                self._change(on=self.on - excess)
                self.scheduler.replan()  # less power drawn: a capped start may fit now
            self.min_idle = self.on - self.busy

    def _peak_windows(self) -> Iterator[simpy.Event]:
        cfg = self.cfg
        while True:
            hour = (self.env.now % DAY) / 3600.0
            nxt = min((h for h in (cfg.peak_start, cfg.peak_end) if h > hour + 1e-9),
                      default=cfg.peak_start + 24.0)
            yield self.env.timeout((nxt - hour) * 3600.0)
            self._record()
            self.scheduler.replan()      # the cap changed: starts it held back may fit now

    # -- bookkeeping ------------------------------------------------------------------------
    def _change(self, **counts: int) -> None:
        self._accumulate()
        for name, value in counts.items():
            setattr(self, name, value)
        self.min_idle = min(self.min_idle, self.on - self.busy)
        self._record()

    def _accumulate(self) -> None:
        now = self.env.now
        self.energy_j += self.power_w() * (now - self._last_t)
        self._last_t = now

    def _record(self) -> None:
        p = self.power_w()
        self.peak_w = max(self.peak_w, p)
        self.samples.append((self.env.now, p))

    def finish(self) -> None:
        """Account the energy up to now (call when the study stops the clock)."""
        self._accumulate()


class PowerCappedPolicy:
    """A heuristic of :mod:`cosim.policies` whose starts the facility may veto.

    The first vetoed start ends the pass: the heuristic planned its later
    decisions (backfills, reservations) as if that job had started, so they
    are dropped too, and the job keeps its place in the queue.

    Args:
        inner: a policy from :func:`cosim.policies.make_policy`.
        facility: who decides whether a start may happen now.
    """

    def __init__(self, inner, facility: Facility):
        self.inner = inner
        self.facility = facility
        self.name = f"{inner.name}+power"
        # The scheduler keeps its queue in the heuristic's static order.
        self.static_key = getattr(inner, "static_key", None)

    def decide(self, view: SchedulerView) -> Iterator[Decision]:
        """The heuristic's decisions up to the first start the facility refuses."""
        decisions = iter(self.inner.decide(view))
        try:
            for d in decisions:
                if d.action == START and not self.facility.admit(d.job):
                    return
                yield d
        finally:
            close = getattr(decisions, "close", None)
            if close is not None:
                close()


def mean_power_in_hours(samples: list[tuple[float, float]], end: float, start_h: float,
                        end_h: float) -> float:
    """Mean of a step function of power (W) over the hours ``[start_h, end_h)`` of each day.

    ``samples`` are ``(time, power from then on)`` in time order; the last
    lasts until ``end``.
    """
    energy = seconds = 0.0
    times = [t for t, _ in samples[1:]] + [end]
    for (t0, p), t1 in zip(samples, times):
        day = math.floor(t0 / DAY)
        while day * DAY < t1:
            a = max(t0, day * DAY + start_h * 3600.0)
            b = min(t1, day * DAY + end_h * 3600.0)
            if b > a:
                energy += p * (b - a)
                seconds += b - a
            day += 1
    return energy / seconds if seconds > 0 else math.nan


def run_datacenter(scenario: Scenario, policy: str, config: FacilityConfig, *,
                   workload=None) -> dict[str, float]:
    """Simulate the facility and its cluster until every job is done.

    Returns:
        energy (MWh), peak and mean facility power (kW), the scheduling
        metrics of :func:`cosim.metrics.summarize` (wait, bsld, utilization),
        boots, vetoed starts and broken reservations.
    """
    env = simpy.Environment()
    facility = Facility(env, scenario.cluster.nodes * scenario.cluster.cores_per_node, config)
    capped = PowerCappedPolicy(make_policy(policy), facility)
    sim: Simulation = build(env, scenario, capped, workload=workload, hooks=[facility])
    facility.check_feasible(int(sim.workload.procs.max()) if len(sim.workload) else 0)
    env.run(until=sim.finished)
    facility.finish()
    s = metrics.summarize(sim.jobs_table(), sim.events_table(), cores=sim.cluster.capacity)
    span = env.now - facility.samples[0][0]
    return {"energy_mwh": facility.energy_j / 3.6e9, "peak_kw": facility.peak_w / 1000.0,
            "mean_kw": facility.energy_j / span / 1000.0 if span > 0 else math.nan,
            "window_kw": mean_power_in_hours(facility.samples, env.now, config.peak_start,
                                             config.peak_end) / 1000.0,
            "wait_mean": s["wait_mean"], "bsld_mean": s["bsld_mean"],
            "utilization": s["utilization"], "jobs_finished": s["jobs_finished"],
            "boots": facility.boots, "vetoed_nodes_off": facility.vetoes["nodes off"],
            "vetoed_power_cap": facility.vetoes["power cap"],
            "reservations_broken": sim.scheduler.counters.reservations_broken,
            "makespan_h": env.now / 3600.0, "facility": facility, "simulation": sim}


#: What the example compares: power management alone, then a demand-response cap
#: (17:00-20:00 every day) at two levels.
VARIANTS = {
    "all nodes on": FacilityConfig(check_s=None),
    "idle nodes off": FacilityConfig(),
    "off, peak cap 70 kW": FacilityConfig(peak_cap_kw=70.0),
    "off, peak cap 50 kW": FacilityConfig(peak_cap_kw=50.0),
}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Compare the variants on a Lublin-Feitelson workload and print one row each."""
    p = argparse.ArgumentParser(description="cluster model inside a data-center power study")
    p.add_argument("--jobs", type=int, default=3000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--policy", default="fcfs+easy")
    a = p.parse_args(argv)
    scenario = load_scenario(SCENARIO, [f"workload.jobs={a.jobs}", f"seed={a.seed}"])
    rows = {name: run_datacenter(scenario, a.policy, cfg) for name, cfg in VARIANTS.items()}
    cols = [("energy_mwh", "energy MWh", "{:.2f}"), ("mean_kw", "mean kW", "{:.1f}"),
            ("window_kw", "17-20h kW", "{:.1f}"), ("wait_mean", "mean wait s", "{:.0f}"),
            ("bsld_mean", "mean bsld", "{:.1f}"), ("boots", "boots", "{:d}"),
            ("vetoed_power_cap", "capped starts", "{:d}")]
    print(f"{a.policy} on {a.jobs} Lublin-Feitelson jobs, 256 nodes (seed {a.seed})")
    print(f"{'variant':<18}" + "".join(f"{h:>14}" for _, h, _ in cols))
    for name, r in rows.items():
        print(f"{name:<18}" + "".join(f"{fmt.format(r[k]):>14}" for k, _, fmt in cols))
    return rows


if __name__ == "__main__":
    main()
