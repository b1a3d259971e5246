"""agents.registry: the learners by name, their two kinds, and the CLI and studies built on it."""

from __future__ import annotations

import dataclasses

import pytest

from agents.__main__ import main
from agents.loop import Args, Learner, TrainArgs
from agents.registry import LEARNERS, PPO_FIELDS, OffPolicyLearner, OnPolicyLearner, learner
from cosim.errors import InputError


def test_every_learner_has_a_kind_hyper_parameters_and_an_update():
    assert list(LEARNERS) == ["ppo", "a2c", "pg", "dql"]
    assert [n for n, c in LEARNERS.items() if issubclass(c, OffPolicyLearner)] == ["dql"]
    assert all(issubclass(c, OnPolicyLearner) for n, c in LEARNERS.items() if n != "dql")
    for name, cls in LEARNERS.items():
        args = cls.args_class()
        assert dataclasses.is_dataclass(args) and issubclass(args, TrainArgs) and cls.name == name
        # the on-policy learners take PPO's fields (Args); DQL none of them
        assert issubclass(args, Args) is (not cls.off_policy)
        names = {f.name for f in dataclasses.fields(args)}
        assert names.isdisjoint(PPO_FIELDS) if cls.off_policy else names >= set(PPO_FIELDS)
        update = cls.make_update()
        # ppo and a2c update with a function; pg and dql keep state in a fresh Learner
        assert callable(update) if name in ("ppo", "a2c") else isinstance(update, Learner)
    assert learner("pg").make_update() is not learner("pg").make_update()


def test_an_unknown_learner_is_one_line_naming_the_choices():
    with pytest.raises(InputError) as exc:
        learner("ppo2", where="--algo")
    assert str(exc.value).splitlines() == [
        "--algo: expected one of ppo, a2c, pg, dql (did you mean 'ppo'?), got 'ppo2'"]


def test_train_help_has_one_section_per_learner(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    sections = [line for line in out.splitlines() if line.startswith("--algo ")]
    assert sections == ["--algo ppo (on-policy, agents.loop.Args):",
                        "--algo a2c (on-policy, agents.a2c.A2CArgs):",
                        "--algo pg (on-policy, agents.pg.PGArgs):",
                        "--algo dql (off-policy, agents.dql.DQLArgs):"]
    dql = out.split("--algo dql")[1]
    assert "buffer_size=10000" in dql and not any(f"{f}=" in dql for f in PPO_FIELDS)
    assert "clip_coef=0.2" in out.split("--algo ppo")[1].split("--algo a2c")[0]


def test_a_study_trains_any_registered_learner_and_refuses_others():
    from cosim.studies.schema import TrainSpec

    assert [TrainSpec(algo=name).algo for name in LEARNERS] == list(LEARNERS)
    with pytest.raises(ValueError, match="'ppo', 'a2c', 'pg' or 'dql'"):
        TrainSpec(algo="sac")
