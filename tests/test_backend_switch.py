"""Runs that move between backends: a checkpoint written on one backend continues on any other.

Stored models are numpy arrays under backend-independent variable names (``variables.npz``) and run states are
backend-free (memories, trajectory builders, counters, schedules, host-side generators), so everything but the
graph's own random-op stream moves: a worker of another backend loaded from a checkpoint holds the same variables
(weights, target networks, Adam moments and step counts), the same replay and learner state, and acts greedily
as the stored one does. ``rlgraph train --resume --backend B`` then goes on from there.
"""
import json
import os

import numpy as np
import optree
import pytest

from rlgraph.agents import Agent
from rlgraph.engines.runner import train
from rlgraph.environments import VectorEnv
from rlgraph.utils.backend import backend_available
from rlgraph.workers import VectorWorker

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
SMALL = {
    "dqn": dict(update_spec={"batch_size": 32, "update_interval": 8, "steps_before_update": 200, "sync_interval": 300},
                memory_spec={"type": "prioritized-replay", "capacity": 2000, "alpha": 0.6, "beta": 0.4}),
    "appo": dict(unroll_length=8, num_minibatches=2),
    "r2d2": dict(update_spec={"batch_size": 8, "update_interval": 16, "steps_before_update": 200, "sync_interval": 300},
                 memory_spec={"capacity": 500, "burn_in_length": 2, "train_length": 6, "overlap": 3, "alpha": 0.9,
                              "beta": 0.6},
                 network_spec=[{"type": "dense", "units": 32, "activation": "relu"}, {"type": "lstm", "units": 16}]),
}
#: A cycle through the backends: each writes a checkpoint another loads, each loads one another wrote.
PAIRS = [("tf", "pytorch"), ("pytorch", "jax"), ("jax", "tf")]


def small_config(name):
    with open(os.path.join(CONFIGS, f"{name}_cartpole.json")) as f:
        config = json.load(f)
    config.pop("description", None)
    config.update(SMALL[name])
    config["environment_spec"] = {"env_spec": "CartPole-v1", "num_envs": 4}
    return config


def agent_config(config):
    return {k: v for k, v in config.items() if k not in Agent.RUN_KEYS}


def without_backend_rng(state):
    """The run state without the graph's random-op streams (``backend_rng``, ``actor_rng``: a backend's own)."""
    if isinstance(state, dict):
        return {k: without_backend_rng(v) for k, v in state.items() if k not in ("backend_rng", "actor_rng")}
    return state


def assert_same_tree(a, b, path="run state"):
    leaves_a, spec_a = optree.tree_flatten(a, none_is_leaf=True)
    leaves_b, spec_b = optree.tree_flatten(b, none_is_leaf=True)
    assert spec_a == spec_b, f"{path}: the structures differ"
    for x, y in zip(leaves_a, leaves_b):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=path)
        else:
            assert x == y, f"{path}: {x!r} != {y!r}"


@pytest.mark.parametrize("first, second", PAIRS)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_checkpoint_moves_to_another_backend_whole(name, first, second, tmp_path):
    if not (backend_available(first) and backend_available(second)):
        pytest.skip("needs both backends")
    config = small_config(name)
    envs = [VectorEnv(env_spec="CartPole-v1", num_envs=4, seed=3) for _ in range(2)]
    agents = [Agent.from_spec(agent_config(config), state_space=envs[0].state_space,
                              action_space=envs[0].action_space, backend=b, seed=3) for b in (first, second)]
    try:
        stored = VectorWorker(agents[0], envs[0])
        stored.run(1200)
        assert agents[0].updates > 0
        stored.store(str(tmp_path / "model"))
        moved = VectorWorker(agents[1], envs[1])
        moved.load(str(tmp_path / "model"))
        # Every variable (weights, target network, optimizer moments and step counts) and the whole run state
        # besides the graph's random-op stream: memory contents and priorities, builder, counters, generators.
        before = agents[0].executor.get_weights(trainable_only=False)
        after = agents[1].executor.get_weights(trainable_only=False)
        assert list(after) == list(before)
        for key, value in before.items():
            np.testing.assert_array_equal(after[key], value, err_msg=key)
        assert_same_tree(without_backend_rng(moved.get_run_state()), without_backend_rng(stored.get_run_state()))
        assert (agents[1].timesteps, agents[1].updates) == (agents[0].timesteps, agents[0].updates)
        # The greedy actions right after the switch are those right before it (recurrent ones from a new episode).
        states = agents[0].state_space.with_batch_rank().sample(500, rng=np.random.default_rng(5))
        np.testing.assert_array_equal(agents[1].get_actions(states, explore=False),
                                      agents[0].get_actions(states, explore=False))
        moved.run(400)  # And it learns on from there.
        assert agents[1].updates > agents[0].updates
    finally:
        for env in envs:
            env.close()
        for agent in agents:
            agent.terminate()


@pytest.mark.parametrize("second", ["pytorch", "jax"])
def test_train_resumes_a_tf_run_on_another_backend(second, tmp_path):
    if not (backend_available("tf") and backend_available(second)):
        pytest.skip("needs both backends")
    config = small_config("appo")  # With its learner thread: the pipeline's actor state moves too.
    config["train_spec"] = dict(config["train_spec"], chunk_steps=1000, eval_episodes=0, eval_every_steps=None,
                                stop_at_target=False)
    logdir = str(tmp_path / "run")
    first = train(config, backend="tf", steps=3000, logdir=logdir, seed=2, progress=False)
    model = os.path.join(logdir, "checkpoint", "model")
    with np.load(os.path.join(model, "variables.npz"), allow_pickle=False) as f:
        stored = {k: f[k] for k in f.files}
    second_run = train(config, backend=second, steps=6000, logdir=logdir, seed=2, resume=True, progress=False)
    assert second_run["backend"] == second
    assert second_run["env_steps"] >= 6000 and second_run["updates"] > first["updates"]
    assert json.load(open(os.path.join(logdir, "config.json")))["backend"] == second
    # The resumed run started from the stored weights: its checkpoint moved on from them, by learning.
    with np.load(os.path.join(model, "variables.npz"), allow_pickle=False) as f:
        assert set(f.files) == set(stored)
        moved = [k for k in stored if not np.array_equal(f[k], stored[k])]
    assert moved
