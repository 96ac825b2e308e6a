"""Greedy evaluations of a training run: one environment per episode, up to ``MAX_EVAL_ENVS`` (an evaluation then
lasts one episode's length, not several in a row)."""
import json
import os

import pytest

from rlgraph.engines import runner
from rlgraph.workers import VectorWorker

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


@pytest.mark.parametrize("episodes, envs", [(20, 20), (3, 3), (40, runner.MAX_EVAL_ENVS)])
def test_each_evaluation_episode_gets_its_own_environment(monkeypatch, tmp_path, episodes, envs):
    made, evaluated = [], []
    make_vector_env = runner.make_vector_env
    monkeypatch.setattr(runner, "make_vector_env", lambda kwargs: made.append(kwargs["num_envs"]) or
                        make_vector_env(kwargs))
    evaluate = VectorWorker.evaluate

    def recording_evaluate(self, env, num_episodes):
        returns = evaluate(self, env, num_episodes)
        evaluated.append((env.num_envs, len(returns)))
        return returns
    monkeypatch.setattr(VectorWorker, "evaluate", recording_evaluate)
    with open(os.path.join(CONFIGS, "dqn_cartpole.json")) as f:
        config = json.load(f)
    config["environment_spec"] = dict(config["environment_spec"], num_envs=4)
    config["train_spec"] = dict(steps=256, eval_episodes=episodes, eval_every_steps=128, chunk_steps=128)
    summary = runner.train(config, backend="pytorch", logdir=str(tmp_path / "run"), seed=2, progress=False)
    assert made == [4, envs]  # The training environments, then the evaluation's.
    assert evaluated and all(e == (envs, episodes) for e in evaluated), evaluated
    assert summary["eval_episodes"] == episodes

