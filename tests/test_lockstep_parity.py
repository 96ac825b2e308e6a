"""Lockstep parity: every agent makes the same updates on TensorFlow, PyTorch and JAX from the same experience.

One agent per backend is built from the same config and seed and given the same starting weights
(``set_weights``); a TensorFlow driver acts in a real environment, and every step (its states, actions, rewards and
the extras the driver's ``get_actions`` returned) goes to all three through the public ``observe``; each updates
when its own ``ready_to_update`` says so, from its own memory or unroll queue. So the host-side random streams
(replay sampling, minibatch order) are each backend's own and must depend on the seed only. After the first update
(all its epochs, minibatches and replay rounds) the weights of every backend lie within 1e-3 of the update's size of
TensorFlow's and the reported losses agree to 1e-4 relative; after a few more updates, within 1e-2 of the total
change.

The fast form uses the CartPole configs with small batches; the shipped Pong configs (their networks and batch
sizes, on the 42x42 Atari environment) are marked slow.
"""
import json
import os

import numpy as np
import pytest

from rlgraph.agents import Agent
from rlgraph.environments import VectorEnv
from rlgraph.utils.backend import backend_available

BACKENDS = ("tf", "pytorch", "jax")
CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")

pytestmark = pytest.mark.skipif(not all(backend_available(b) for b in BACKENDS),
                                reason="lockstep parity needs TensorFlow, PyTorch and JAX")

#: Small batches for the fast form (the replay agents start updating after a few hundred env steps).
FAST = {
    "dqn": dict(update_spec={"batch_size": 32, "update_interval": 8, "steps_before_update": 64,
                             "sync_interval": 64}),
    "apex": dict(update_spec={"batch_size": 32, "update_interval": 8, "steps_before_update": 64,
                              "sync_interval": 64}),
    "impala": dict(unroll_length=8),
    # Two minibatches of samples in each of 4 epochs (the minibatch path of the Pong config).
    "appo": dict(unroll_length=8, num_minibatches=2),
    "r2d2": dict(update_spec={"batch_size": 8, "update_interval": 16, "steps_before_update": 96,
                              "sync_interval": 64},
                 memory_spec={"capacity": 512, "burn_in_length": 2, "train_length": 6, "overlap": 3, "alpha": 0.9,
                              "beta": 0.6},
                 network_spec=[{"type": "dense", "units": 32, "activation": "relu"}, {"type": "lstm", "units": 16}]),
}


def load_config(name, **changes):
    with open(os.path.join(CONFIGS, name)) as f:
        config = json.load(f)
    env = dict(config.pop("environment_spec"))
    for key in ("train_spec", "execution_spec", "description"):
        config.pop(key, None)
    config.update(changes)
    return config, env


def distance(weights, reference, start):
    """|weights - reference| / |reference - start| over all trainable weights (float64)."""
    diff = sum(float(np.sum((weights[k].astype(np.float64) - reference[k]) ** 2)) for k in reference)
    size = sum(float(np.sum((reference[k].astype(np.float64) - start[k]) ** 2)) for k in reference)
    assert size > 0, "the updates did not move the weights"
    return np.sqrt(diff / size)


def run_lockstep(config, env_spec, num_envs, num_updates, seed=1):
    """Runs the three agents in lockstep; returns per update the weights and results of each backend, and the
    starting weights."""
    env = VectorEnv(**dict(env_spec, num_envs=num_envs, seed=seed))
    agents = {b: Agent.from_spec(dict(config), state_space=env.state_space, action_space=env.action_space,
                                 backend=b, seed=seed) for b in BACKENDS}
    start = agents["tf"].get_weights()
    for b in BACKENDS[1:]:
        agents[b].set_weights(start)
    everything = {b: agents[b].executor.get_weights(trainable_only=False) for b in BACKENDS}
    for b in BACKENDS[1:]:  # Target networks and optimizer slots start equal too.
        assert list(everything[b]) == list(everything["tf"]), b
        for k, v in everything["tf"].items():
            np.testing.assert_array_equal(everything[b][k], v, err_msg=f"{b}: {k} at the start")
    driver = agents["tf"]
    obs = env.reset()
    history = []
    try:
        for _ in range(20000):
            actions, extras = driver.get_actions(obs, return_extras=True)
            next_obs, rewards, terminals, truncations = env.step(actions)
            for agent in agents.values():
                agent.observe(obs, actions, rewards, env.final_obs, terminals, truncations, **extras)
            obs = next_obs
            ready = {b: agents[b].ready_to_update() for b in BACKENDS}
            assert len(set(ready.values())) == 1, f"the update schedules disagree: {ready}"
            if ready["tf"]:
                results = {b: agents[b].update() for b in BACKENDS}
                history.append(({b: agents[b].get_weights() for b in BACKENDS}, results))
                if len(history) == num_updates:
                    return history, start
        raise AssertionError(f"only {len(history)} of {num_updates} updates in 20000 steps")
    finally:
        env.close()
        for agent in agents.values():
            agent.terminate()


def assert_lockstep(history, start, first_tolerance=1e-3, later_tolerance=1e-2, loss_rtol=1e-4):
    weights, results = history[0]
    for b in BACKENDS[1:]:
        d = distance(weights[b], weights["tf"], start)
        assert d < first_tolerance, f"{b}: after the first update {d:.2e} of its size away from tf"
        for key in ("loss", "grad_norm"):
            if key in results["tf"]:
                np.testing.assert_allclose(results[b][key], results["tf"][key], rtol=loss_rtol, atol=1e-7,
                                           err_msg=f"{b}: first update's {key}")
    weights, _ = history[-1]
    for b in BACKENDS[1:]:
        d = distance(weights[b], weights["tf"], start)
        assert d < later_tolerance, f"{b}: after {len(history)} updates {d:.2e} of the change away from tf"


@pytest.mark.parametrize("algorithm", sorted(FAST))
def test_cartpole_configs_update_in_lockstep(algorithm):
    config, env = load_config(f"{algorithm}_cartpole.json", **FAST[algorithm])
    history, start = run_lockstep(config, env, num_envs=4, num_updates=4)
    # Measured: every backend within 2e-6 of TF's after each update (smooth small networks, few kinks).
    assert_lockstep(history, start, first_tolerance=1e-4, later_tolerance=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["appo", "impala", "dqn", "apex", "r2d2"])
def test_pong_configs_update_in_lockstep(algorithm):
    name = f"{algorithm}_pong_42.json" if algorithm != "dqn" else "apex_pong_42.json"
    config, env = load_config(name)
    if algorithm == "dqn":  # No DQN Pong config ships: Ape-X's, without its per-actor epsilons.
        config["type"] = "dqn"
        for key in ("epsilon_base", "epsilon_alpha"):
            config.pop(key)
    history, start = run_lockstep(config, env, num_envs=env.get("num_envs", 16), num_updates=3)
    # Ape-X inserts with the priorities its own backend computes, and the importance weights are normalized by
    # the smallest of them (|TD error| + 1e-6 over 20k transitions, a TD error near 0 that float rounding moves
    # by a large share): the weights, and so the loss, differ by a common factor of about 1e-3 between backends,
    # which Adam's normalized step does not see (the weights still agree to 1e-3 of the update).
    assert_lockstep(history, start, loss_rtol=1e-2 if algorithm == "apex" else 1e-4)
