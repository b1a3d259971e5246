"""``agents tune --space slurm``: Slurm's knobs searched, the chosen lines in slurm.conf."""

from __future__ import annotations

import json

import pytest

from agents.__main__ import main
from cosim.errors import InputError
from cosim.evaluation import CLASSIC, Protocol
from cosim.policies import make_policy
from cosim.policies.priority import load_learned
from cosim.policies.slurm_params import parse_slurm_params

BASELINE = "slurm:PriorityWeightAge=1000,bf_max_job_test=100"


def test_slurm_space_writes_slurm_conf_and_the_baseline_row(tmp_path, monkeypatch):
    # The test span is read once: record the protocol that the tuner builds.
    protocols, test = [], Protocol.test

    def recording_test(self, sources, **kw):
        protocols.append(self)
        return test(self, sources, **kw)

    monkeypatch.setattr(Protocol, "test", recording_test)
    out = tmp_path / "tuned"
    code = main(["tune", "scenarios/lublin256.yaml", "--set", "workload.jobs=2000",
                 "--minutes", "5", "--generations", "1", "--keep", "2", "--window-jobs", "80",
                 "--windows", "6", "--processes", "1", "--space", "slurm",
                 "--baseline", BASELINE, "--out", str(out)])
    assert code == 0
    assert len(protocols) == 1 and protocols[0].split.test.read_count == 1
    r = json.loads((out / "results.json").read_text())
    chosen = r["chosen"]
    assert chosen.startswith("slurm") and r["baseline"] == BASELINE
    # the reference is the best of the classic heuristics and Slurm's defaults
    assert r["reference"] in CLASSIC + ("slurm",)
    assert set(CLASSIC) | {"slurm", BASELINE, chosen} <= set(r["test"])
    assert set(CLASSIC) | {"slurm", BASELINE} <= set(r["validation"])
    # slurm.conf: the multifactor priority with the chosen weights
    conf = (out / "slurm.conf").read_text().splitlines()
    assert "PriorityType=priority/multifactor" in conf
    params = parse_slurm_params(chosen.partition(":")[2], name=True)
    for key in ("PriorityWeightAge", "PriorityWeightJobSize", "PriorityWeightFairshare"):
        assert f"{key}={getattr(params, key)}" in conf
    assert (f"SchedulerParameters=bf_window={params.bf_window},bf_max_job_test="
            f"{params.bf_max_job_test},bf_resolution={params.bf_resolution}") in conf
    # the card names the baseline row, the reference and the max waits
    card = (out / "card.md").read_text()
    assert f"| {BASELINE} | baseline |" in card and "reference" in card
    assert "max wait / FCFS+EASY's" in card and all(h in card for h in CLASSIC)
    # the folder runs as the slurm policy it names
    policy = make_policy(f"learned:{out}")
    assert policy.params == params and policy.name == params.policy_name()


@pytest.mark.parametrize("baseline, expected", [
    ("slurm:Foo=1", "error: --baseline: 'slurm:Foo=1': Foo: expected one of PriorityWeightAge"),
    ("fcfs+easy", "error: --baseline: expected a slurm policy name such as "
                  "'slurm:PriorityWeightAge=1000' (the site's current configuration), got "
                  "'fcfs+easy'"),
])
def test_a_bad_baseline_is_one_line_exit_2(baseline, expected, tmp_path, capsys):
    code = main(["tune", "scenarios/lublin256.yaml", "--minutes", "1", "--space", "slurm",
                 "--baseline", baseline, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(expected)
    assert not (tmp_path / "o").exists()


def test_a_baseline_needs_the_slurm_space(tmp_path, capsys):
    code = main(["tune", "scenarios/lublin256.yaml", "--minutes", "1", "--baseline", "slurm",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --baseline: expected --space slurm (a baseline is a "
                                 "slurm configuration), got 'slurm'"]


def test_a_folder_naming_a_bad_slurm_policy_is_refused(tmp_path):
    (tmp_path / "policy.json").write_text(json.dumps({"kind": "slurm", "name": "sjf+easy"}))
    with pytest.raises(InputError, match=r"policy.json: name: expected a slurm policy name"):
        load_learned(tmp_path)


def test_the_points_nearest_the_heuristics_are_searched_and_bound_the_choice():
    from collections import Counter

    from agents.tuning import prepare, select_slurm
    from agents.tuning.slurm import GENERATION, RUNGS
    from cosim.policies.slurm_params import anchor_points, classic_points

    run = prepare("scenarios/lublin256.yaml", ["workload.jobs=1600"], 5, echo=lambda m: None,
                  space="slurm", generations=1, keep=2, window_jobs=80, count=6, processes=1,
                  max_wait=2.0, user_features=False)
    sel = select_slurm(run)
    near = classic_points()
    assert near["fcfs+easy"] == "slurm:bf_max_job_test=1"        # FCFS's order, EASY's depth
    assert set(near) == set(CLASSIC)
    search = {p["policy"]: p for p in sel["search"]}
    chunks = len(run.protocol.split.train)
    for h, name in near.items():                    # scored on every chunk, then validated
        assert search[name]["near"] == h and search[name]["chunks"] == chunks
        assert name in sel["validation"]["names"]
    # one generation of random points by successive halving: 8 on the first rung, 4, 2, 1
    anchors = anchor_points()
    assert set(near.values()) <= set(anchors)
    for name in anchors:
        assert search[name]["chunks"] == chunks and name in sel["validation"]["names"]
    random_points = [p for p in sel["search"] if p["policy"] not in anchors + ["slurm"]]
    assert len(random_points) == GENERATION and RUNGS == chunks == 4
    assert sorted(Counter(p["chunks"] for p in random_points).items()) == \
        [(1, 4), (2, 2), (3, 1), (4, 1)]
    # the shipped point is the best on validation of those eligible (Slurm's defaults always
    # are); a point nearest a heuristic left out is over the bound or loses to the defaults
    # over the validation span run whole
    val = sel["validation"]
    assert sel["chosen"] in val["eligible"] and "slurm" in val["eligible"]
    assert val["bsld"][sel["chosen"]] == min(val["bsld"][n] for n in val["eligible"])
    for name in near.values():
        if name not in val["eligible"]:
            assert (val["max_wait"][name] > val["bound"] or not search[name]["within_bound"]
                    or val["whole"][name] > val["whole"]["slurm"])
    assert val["bsld"][sel["chosen"]] <= min(val["bsld"][n] for n in near.values())
    # and is within the max-wait bound on validation and on the training chunks
    if sel["chosen"] != "slurm":
        assert val["max_wait"][sel["chosen"]] <= val["bound"]
        assert search[sel["chosen"]]["within_bound"]
