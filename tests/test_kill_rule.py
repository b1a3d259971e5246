"""RLSchert's kill rule (seed 001) and the policy wrapper that applies it (cosim.policies.kill).

The schedules are small and hand-checked; the backends and the progress log
are those of ``test_prediction.py`` (fixed answers per job id, one finished
ionic step every 100 s).
"""

from __future__ import annotations

import pytest
from test_prediction import FixedBackend, StepLog, sim_with

from cosim.actors.nodes import NodeFailure
from cosim.compose import parse_policies
from cosim.config import scenario_from_dict
from cosim.errors import ScenarioError
from cosim.job import Job
from cosim.policies import KillRule, KillRulePolicy, PolicySpec, make_policy, parse_policy

REASON = "kill rule (rlschert): run time badly underestimated"


def test_rlschert_rule_thresholds_are_the_papers_in_five_minute_units():
    rule = KillRule.named("rlschert")
    assert (rule.short, rule.long, rule.error) == (3000.0, 3000.0, 300.0)
    assert rule.max_kills == 1 and not rule.need_short_waiting
    # every condition holds: elapsed < len_param < 10 units, run_hat > 10 units, |diff| > 1 unit
    assert rule.should_kill(elapsed=600, len_param=1200, run_hat=3300)
    assert not rule.should_kill(elapsed=1200, len_param=1200, run_hat=5000)   # ran too long
    assert not rule.should_kill(elapsed=600, len_param=3000, run_hat=5000)    # not short
    assert not rule.should_kill(elapsed=600, len_param=2800, run_hat=3000)    # not long
    assert not rule.should_kill(elapsed=100, len_param=2800, run_hat=3050)    # |diff| 250 < 300
    assert not rule.should_kill(elapsed=600, len_param=1200, run_hat=3300, kills=1)
    # arrays in, arrays out (a learned kill agent can score every running job at once)
    got = rule.should_kill([600, 1200], [1200, 1200], [3300, 3300])
    assert got.tolist() == [True, False]
    # another unit scales all three thresholds
    assert KillRule.named("rlschert", unit=60.0).short == 600.0


def test_guarded_rule_needs_a_short_job_waiting_and_overrides_apply():
    rule = KillRule.named("guarded")
    assert (rule.short, rule.long, rule.error, rule.need_short_waiting) == (1800, 7200, 600, True)
    assert rule.should_kill(100, 1000, 8000, short_waiting=True)
    assert not rule.should_kill(100, 1000, 8000, short_waiting=False)
    assert KillRule.named("guarded", long=3600.0, max_kills=0).long == 3600.0
    with pytest.raises(ValueError, match="unknown kill rule 'nope'"):
        KillRule.named("nope")


def test_scenario_chooses_the_rule():
    from cosim.errors import ScenarioError

    def rule_of(kill):
        sc = scenario_from_dict({"workload": {"kind": "lublin", "jobs": 5},
                                 "predictor": {"kill": kill}})
        return KillRule.from_config(sc.predictor.kill)

    assert rule_of({}) == KillRule.named("rlschert")
    assert rule_of({"rule": "guarded"}) == KillRule.named("guarded")
    assert rule_of({"unit": 60, "error": 30}).short == 600.0
    assert rule_of({"unit": 60, "error": 30}).error == 30.0
    with pytest.raises(ScenarioError, match="predictor.kill.rule"):
        rule_of({"rule": "agressive"})



# ------------------------------------------------------------------ the wrapper

def kill_rows(sim):
    """``(time, job id, reason)`` of the kill decisions, in the order they were applied."""
    return [(r[0], r[1], r[4]) for r in sim.scheduler.decisions if r[2] == "kill"]


def test_kills_follow_the_order_the_progress_check_asked_in():
    # 8 cores. J1 (pre-run 1000 s) and J2 (pre-run 900 s), 4 cores each, both
    # really run 20,000 s and start at 0; J2 is expected to end first, so the
    # 300 s check asks about [J2, J1]. It predicts 8000 s left for J2 and 5000 s
    # for J1, which puts J1 first among the expected ends (5300 < 8300). Both are
    # condemned and killed in the check's order, J2 then J1, not the new order.
    rows = [(0, 4, 20000, 30000), (0, 4, 20000, 30000)]
    backend = FixedBackend(runtime={1: 1000.0, 2: 900.0}, remaining={1: 5000.0, 2: 8000.0})
    env, sim, hub = sim_with(rows, 8, backend, policy="fcfs+easy", progress=StepLog(),
                             remaining=True, interval=300.0, min_remaining=1.0,
                             kill_rule=KillRule.named("rlschert"))
    env.run(until=sim.finished)
    j1, j2 = sim.scheduler.jobs
    assert kill_rows(sim) == [(300.0, 2, REASON), (300.0, 1, REASON)]
    requeued = [e[2] for e in sim.scheduler.events if e[1] == "requeue"]
    assert requeued == [2, 1]
    # re-estimated from the killed runs (300 + remaining), so never killed again
    assert (j1.estimate, j2.estimate) == (5300.0, 8300.0)
    assert (j1.start, j1.end, j2.start, j2.end) == (300.0, 20300.0, 300.0, 20300.0)
    assert sim.scheduler.policy.kills == 2 and (j1.kills, j2.kills) == (1, 1)


def test_a_node_failure_is_not_a_kill():
    # 4 cores, SJF. J1 (4 cores, pre-run 1000 s, really 8000 s) starts at 0 and
    # is lost to a node failure at 50 (requeued, re-estimated 1000 s from a
    # fresh pre-run prediction: no progress yet). J2 (100 s) runs 50-150, J1
    # restarts at 150. At the 300 s check (elapsed 150, run_hat 5150) the rule
    # kills it: the failure was not a kill, so max_kills = 1 still allows one.
    # Its re-estimate 150 + 5000 = 5150 s is not short: it runs 300-8300.
    rows = [(0, 4, 8000, 9000), (10, 4, 100, 9000)]
    backend = FixedBackend(runtime={1: 1000.0, 2: 100.0}, remaining={1: 5000.0, 2: 50.0})
    env, sim, hub = sim_with(rows, 4, backend, policy="sjf", progress=StepLog(),
                             remaining=True, interval=300.0, min_remaining=1.0,
                             kill_rule=KillRule.named("rlschert"))
    j1_box = []

    def node_failure():
        yield env.timeout(50)
        job = sim.scheduler.jobs[0]
        j1_box.append(job)
        job.process.interrupt(NodeFailure(node=0))

    env.process(node_failure())
    env.run(until=sim.finished)
    j1, j2 = sim.scheduler.jobs
    assert (j2.start, j2.end) == (50.0, 150.0)
    assert kill_rows(sim) == [(300.0, 1, REASON)]
    assert (j1.attempts, j1.kills, j1.killed_seconds) == (3, 1, 200.0)
    assert (j1.start, j1.end) == (300.0, 8300.0)
    c = sim.scheduler.counters
    assert (c.jobs_lost_to_failures, c.kills, c.requeues) == (1, 1, 2)


@pytest.mark.parametrize("waiting_estimate, killed", [(100.0, True), (4000.0, False)])
def test_guarded_rule_kills_only_when_a_short_job_waits(waiting_estimate, killed):
    # 4 cores. J1 (4 cores, pre-run 1000 s, really 8000 s) runs from 0; J2
    # (100 s) arrives at 10 and waits. At the 300 s check J1 is condemned on
    # the thresholds (run_hat 5300); the guarded rule also needs a job with an
    # estimate below `short` waiting: J2 predicted at 100 s is one (J1 is
    # killed, J2 runs 300-400, J1 400-8400), J2 predicted at 4000 s is not.
    rows = [(0, 4, 8000, 9000), (10, 4, 100, 9000)]
    backend = FixedBackend(runtime={1: 1000.0, 2: waiting_estimate},
                           remaining={1: 5000.0, 2: 50.0})
    rule = KillRule.named("guarded", short=3000.0, long=3000.0, error=300.0)
    env, sim, hub = sim_with(rows, 4, backend, policy="sjf+easy", progress=StepLog(),
                             remaining=True, interval=300.0, min_remaining=1.0, kill_rule=rule)
    env.run(until=sim.finished)
    j1, j2 = sim.scheduler.jobs
    if killed:
        assert kill_rows(sim) == [(300.0, 1, "kill rule (guarded): run time badly "
                                             "underestimated")]
        assert (j2.start, j1.start, j1.end) == (300.0, 400.0, 8400.0)
    else:
        assert kill_rows(sim) == []
        assert (j1.start, j1.end, j2.start) == (0.0, 8000.0, 8000.0)


def test_without_a_hub_the_wrapper_is_its_base_policy():
    rows = [(0, 2, 10, 10), (1, 2, 30, 20), (2, 2, 5, 100)]
    base = make_policy("sjf+easy")
    wrapped = KillRulePolicy(make_policy("sjf+easy"), KillRule.named("rlschert"))
    assert wrapped.name == "sjf+easy" and wrapped.static_key is not None
    assert wrapped.static_key(Job(1, 0, 0.0, 10.0, 2, 10.0, 7.0)) == \
        base.static_key(Job(1, 0, 0.0, 10.0, 2, 10.0, 7.0))
    starts = []
    for policy in (base, wrapped):
        env, sim, hub = sim_with(rows, 2, FixedBackend(runtime={1: 10.0, 2: 30.0, 3: 5.0}))
        sim.scheduler.policy = policy
        env.run(until=sim.finished)
        starts.append([j.start for j in sim.scheduler.jobs])
    assert starts[0] == starts[1] == [0.0, 15.0, 10.0]


def test_the_rule_counts_kills_not_node_failures():
    rule = KillRule.named("rlschert")
    job = Job(1, 0, 0.0, 8000.0, 4, 9000.0, 1000.0)

    class Pred:
        prerun, elapsed, run_hat = 1000.0, 300.0, 5300.0

    view = type("View", (), {"queue": None})()
    job.attempts = 2                 # lost once to a node failure: not a kill
    assert rule.says(view, job, Pred())
    job.kills = 1
    assert not rule.says(view, job, Pred())


# ------------------------------------------------------------------ +kill needs @rnn

def test_kill_needs_rnn_is_checked_in_one_place_for_names_and_scenarios():
    with pytest.raises(ScenarioError, match=r"\+kill only with @rnn.*got 'sjf\+easy@xgboost\+kill'"):
        parse_policy("sjf+easy@xgboost+kill", where="--policy")
    sc = scenario_from_dict({"workload": {"kind": "vasp", "jobs": 5},
                             "predictor": {"runtime": "xgboost", "kill": {"enabled": True}}})
    with pytest.raises(ScenarioError) as err:
        parse_policies(["sjf+easy"], sc)
    assert str(err.value) == ("--policy: expected +kill only with @rnn (it needs in-run "
                              "predictions), got 'sjf+easy' with predictor.kill.enabled "
                              "(+kill) and @xgboost")
    # a name that says its predictor is not overridden by the scenario's default
    assert parse_policies(["sjf+easy@rnn"], sc)[0].kill is False
    with pytest.raises(ScenarioError, match=r"\+kill only with @rnn"):
        PolicySpec(name="x", kind="queue", heuristic="sjf", backfill="easy", predictor="history",
                   kill=True).checked()


def test_the_learned_kill_and_its_teacher_count_kills_as_the_rule_does():
    # The schedule of test_a_node_failure_is_not_a_kill, decided by the learned
    # kill model (acting in process) whose agent kills whatever its teacher,
    # the rule, would: J1, lost to a node failure at 50, is still a candidate
    # at the 300 s check and the rule's verdict on it is "kill", so the agent
    # and the rule wrapper give the same schedule.
    from cosim.env.acting import acting_policy

    rows = [(0, 4, 8000, 9000), (10, 4, 100, 9000)]
    backend = FixedBackend(runtime={1: 1000.0, 2: 100.0}, remaining={1: 5000.0, 2: 50.0})
    env, sim, hub = sim_with(rows, 4, backend, policy="sjf", progress=StepLog(),
                             remaining=True, interval=300.0, min_remaining=1.0)
    asked = []

    def act(obs, mask):
        asked.append((mask.tolist(), float(obs[1, 8])))    # obs[k, 8]: the rule's verdict
        return 1 if mask[1] and obs[1, 8] == 1.0 else 0

    sim.scheduler.policy = acting_policy({"actions": "kill", "kill_slots": 2}, sim.scenario,
                                         sim.workload, act, base=make_policy("sjf"), hub=hub)

    def node_failure():
        yield env.timeout(50)
        sim.scheduler.jobs[0].process.interrupt(NodeFailure(node=0))

    env.process(node_failure())
    env.run(until=sim.finished)
    j1, j2 = sim.scheduler.jobs
    assert asked[0] == ([1, 1, 0], 1.0)          # at 300: keep, or kill J1; the rule says kill
    assert kill_rows(sim) == [(300.0, 1, "learned kill: run time badly underestimated")]
    assert (j1.attempts, j1.kills, j1.start, j1.end) == (3, 1, 300.0, 8300.0)
    assert (j2.start, j2.end) == (50.0, 150.0)


def test_the_scenario_names_exactly_the_named_rules():
    from typing import get_args

    from cosim.config import KillConfig
    from cosim.policies import KILL_RULES

    assert set(get_args(KillConfig.model_fields["rule"].annotation)) == set(KILL_RULES)
