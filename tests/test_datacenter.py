"""examples/datacenter.py: the cluster model inside a facility model with power states and caps.

The example runs as a study author would run it; hand-checked small cases
pin its arithmetic; a property test checks that the cap holds and every job
finishes; and the example touches no private name of cosim.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import sys
from pathlib import Path

import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cosim.config import load_scenario, scenario_from_dict
from cosim.model import build
from cosim.policies import make_policy
from cosim.workloads.base import Workload

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "datacenter.py"


def load_example():
    spec = importlib.util.spec_from_file_location("datacenter_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module      # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


dc = load_example()


def tiny(nodes: int):
    return scenario_from_dict({"cluster": {"nodes": nodes},
                               "workload": {"kind": "swf", "path": "unused"}})


def test_the_example_runs_and_compares_its_variants(capsys):
    rows = dc.main(["--jobs", "600", "--seed", "2"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "fcfs+easy on 600 Lublin-Feitelson jobs, 256 nodes (seed 2)"
    assert [line.split("  ")[0] for line in out[2:]] == list(dc.VARIANTS)
    on, off = rows["all nodes on"], rows["idle nodes off"]
    assert all(r["jobs_finished"] == 600 for r in rows.values())
    assert on["boots"] == 0 and off["boots"] > 0
    assert off["energy_mwh"] < on["energy_mwh"]          # idle nodes off save energy
    for name in ("off, peak cap 70 kW", "off, peak cap 50 kW"):
        capped = rows[name]
        assert capped["vetoed_power_cap"] > 0
        assert capped["window_kw"] < 0.8 * off["window_kw"]   # less drawn from 17 to 20 h
        assert capped["wait_mean"] > off["wait_mean"]         # ... paid for in waits
    # Energy is the integral of the recorded power.
    facility = on["facility"]
    samples = facility.samples
    times = [t for t, _ in samples[1:]] + [on["simulation"].env.now]
    integral = sum(p * (t1 - t0) for (t0, p), t1 in zip(samples, times))
    assert facility.energy_j == pytest.approx(integral, rel=1e-9)


@pytest.mark.parametrize("policy", ["fcfs+easy", "sjf+conservative"])
def test_without_cap_or_power_states_the_schedule_is_cosims(policy):
    scenario = load_scenario(dc.SCENARIO, ["workload.jobs=500"])
    rows = dc.run_datacenter(scenario, policy, dc.FacilityConfig(check_s=None))
    ours = [(j.id, j.start, j.end) for j in rows["simulation"].scheduler.jobs]
    env = simpy.Environment()
    sim = build(env, scenario, make_policy(policy))
    env.run(until=sim.finished)
    assert ours == [(j.id, j.start, j.end) for j in sim.scheduler.jobs]
    assert rows["vetoed_nodes_off"] == rows["vetoed_power_cap"] == 0


def test_a_cap_delays_a_start_by_hand():
    # 2 nodes; busy 100 W, idle 50 W, PUE 1, cap 150 W. J0 (0-10) starts at 0:
    # 100 + 50 = 150 W. J1 would make it 200 W: it waits for J0, 10-15.
    w = Workload.from_columns(submit=[0, 0], run=[10, 5], procs=[1, 1])
    cfg = dc.FacilityConfig(busy_w=100, idle_w=50, off_w=0, pue=1.0, cap_kw=0.15, check_s=None)
    rows = dc.run_datacenter(tiny(2), "fcfs", cfg, workload=w)
    jobs = rows["simulation"].scheduler.jobs
    assert [(j.start, j.end) for j in jobs] == [(0.0, 10.0), (10.0, 15.0)]
    assert rows["vetoed_power_cap"] == 1 and rows["peak_kw"] == 0.15
    assert rows["facility"].energy_j == 150.0 * 15
    # Without the cap both start at 0 (200 W).
    rows = dc.run_datacenter(tiny(2), "fcfs", dc.FacilityConfig(
        busy_w=100, idle_w=50, off_w=0, pue=1.0, check_s=None), workload=w)
    assert [j.start for j in rows["simulation"].scheduler.jobs] == [0.0, 0.0]


def test_switched_off_nodes_boot_before_a_job_starts_by_hand():
    # J0 (1 node, 0-10) leaves one node idle all along: switched off at the
    # check at 20 (spare 0). J1 (2 nodes) arrives at 30: one node must boot
    # (7 s), so J1 starts at 37 when the facility asks for a replan.
    w = Workload.from_columns(submit=[0, 30], run=[10, 5], procs=[1, 2])
    cfg = dc.FacilityConfig(busy_w=100, idle_w=50, off_w=10, pue=1.0, boot_s=7, check_s=20,
                            spare=0)
    rows = dc.run_datacenter(tiny(2), "fcfs+easy", cfg, workload=w)
    assert [(j.start, j.end) for j in rows["simulation"].scheduler.jobs] == [(0.0, 10.0),
                                                                             (37.0, 42.0)]
    assert rows["boots"] == 1 and rows["vetoed_nodes_off"] == 1
    # 0-10: 150 W; 10-20: 100; 20-30: 60 (one node off); 30-37: 150 (a boot);
    # 37-40: 200; 40 (check: nothing idle): 200 until 42.
    assert rows["facility"].energy_j == 1500 + 1000 + 600 + 7 * 150 + 5 * 200


def test_a_cap_no_job_could_ever_start_under_is_refused():
    w = Workload.from_columns(submit=[0], run=[10], procs=[2])
    cfg = dc.FacilityConfig(busy_w=100, idle_w=50, off_w=0, pue=1.0, cap_kw=0.15, check_s=None)
    with pytest.raises(ValueError, match="a 2-node job needs 0.2 kW"):
        dc.run_datacenter(tiny(2), "fcfs", cfg, workload=w)
    cfg = dc.FacilityConfig(busy_w=100, idle_w=50, off_w=0, pue=1.0, cap_kw=0.09, check_s=None)
    with pytest.raises(ValueError, match="draws 0.1 kW with every node on and idle"):
        dc.run_datacenter(tiny(2), "fcfs", cfg, workload=w)


@st.composite
def facilities(draw):
    nodes = draw(st.integers(2, 8))
    n = draw(st.integers(1, 25))
    procs = draw(st.lists(st.integers(1, nodes), min_size=n, max_size=n))
    submit = sorted(draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n)))
    run = draw(st.lists(st.integers(1, 3000), min_size=n, max_size=n))
    busy, idle = draw(st.sampled_from([(300.0, 100.0), (200.0, 150.0)]))
    check = draw(st.sampled_from([None, 600.0]))
    cfg = dc.FacilityConfig(busy_w=busy, idle_w=idle, off_w=5.0, boot_s=draw(st.integers(0, 300)),
                            check_s=check, spare=draw(st.integers(0, 2)), pue=1.2)
    # A cap between what the widest job needs alone and what the whole machine draws.
    probe = dc.Facility(simpy.Environment(), nodes, cfg)
    widest = max(procs)
    spare = min(cfg.spare, nodes - widest) if check is not None else nodes - widest
    low = max(probe.power_w(busy=widest, on=widest + spare), probe.power_w())   # all on at 0
    high = probe.power_w(busy=nodes, on=nodes)
    cap = draw(st.floats(low, high)) / 1000.0
    w = Workload.from_columns(submit=submit, run=run, procs=procs)
    return nodes, w, dc.FacilityConfig(**{**cfg.__dict__, "cap_kw": cap}), draw(
        st.sampled_from(["fcfs+easy", "sjf+conservative", "largest+greedy"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(facilities())
def test_the_cap_holds_and_every_job_finishes(case):
    nodes, w, cfg, policy = case
    rows = dc.run_datacenter(tiny(nodes), policy, cfg, workload=w)
    assert rows["jobs_finished"] == len(w)
    cap = cfg.cap_kw * 1000.0
    assert all(p <= cap * (1 + 1e-12) for _, p in rows["facility"].samples)
    assert rows["peak_kw"] <= cfg.cap_kw * (1 + 1e-12)
    assert rows["energy_mwh"] > 0 and math.isfinite(rows["wait_mean"])


def test_a_vetoed_conservative_start_stays_planned():
    # Found by the property above: two 1-node jobs due at 0 on 2 nodes, a cap
    # that allows one busy node. The cap vetoes the second start; conservative
    # backfilling must start it when the first ends (it used to forget it, and
    # the simulation ran out of events with a job queued).
    w = Workload.from_columns(submit=[0, 0], run=[1, 1], procs=[1, 1])
    probe = dc.Facility(simpy.Environment(), 2, dc.FacilityConfig(busy_w=300.0, idle_w=100.0,
                                                                  boot_s=0, check_s=None,
                                                                  spare=0, pue=1.2))
    cap = probe.power_w(busy=1, on=2) / 1000.0
    assert cap == pytest.approx(0.48)
    cfg = dc.FacilityConfig(busy_w=300.0, idle_w=100.0, off_w=5.0, boot_s=0, check_s=None,
                            spare=0, pue=1.2, cap_kw=cap)
    rows = dc.run_datacenter(tiny(2), "sjf+conservative", cfg, workload=w)
    assert rows["jobs_finished"] == 2
    assert rows["wait_mean"] == 0.5   # starts at 0 and at 1
    assert rows["peak_kw"] <= cap * (1 + 1e-12)


def test_the_example_uses_no_private_name_of_cosim():
    tree = ast.parse(EXAMPLE.read_text())
    private = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id == "self"):
                private.append(f"line {node.lineno}: .{node.attr}")
        if isinstance(node, ast.ImportFrom):
            private += [f"line {node.lineno}: import {a.name}" for a in node.names
                        if a.name.startswith("_")]
            if node.module and any(part.startswith("_") and not part.startswith("__")
                                   for part in node.module.split(".")):
                private.append(f"line {node.lineno}: from {node.module}")
    assert private == []
