"""Agents as actor, trajectory builder and learner: actor-only builds, roles apart, policy lag across processes."""
import json
import multiprocessing as mp
import os

import numpy as np
import pytest

from rlgraph.agents import Agent
from rlgraph.environments import VectorEnv
from rlgraph.utils.errors import RLGraphError

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
NAMES = ["dqn", "apex", "impala", "appo", "r2d2"]


def cartpole_config(name):
    with open(os.path.join(CONFIGS, f"{name}_cartpole.json")) as f:
        return json.load(f)


def make(name, backend, role, seed=0, **overrides):
    env = VectorEnv("CartPole-v1", num_envs=4, seed=0)
    return Agent.from_spec(dict(cartpole_config(name), **overrides), state_space=env.state_space,
                           action_space=env.action_space, backend=backend, role=role, seed=seed)


@pytest.mark.parametrize("name", NAMES)
def test_actor_only_build_holds_only_acting_variables_and_acts_like_the_full_agent(backend, name):
    full = make(name, backend, "both")
    actor = make(name, backend, "actor", seed=5)
    names = list(actor.executor.variables())
    assert names, "the actor has a policy"
    # Nothing of the learner: no optimizer slots, no memory, no target network; only trainable policy weights.
    assert not [n for n in names if any(w in n for w in ("optimizer", "target", "memory", "replay", "adam"))], names
    assert set(names) == set(full.get_weights()), "the actor's variables are exactly the learner's weights"
    assert len(full.executor.variables()) > len(names)
    assert actor.learner is None and full.learner is not None
    with pytest.raises(RLGraphError, match="role='actor'.*needs the learner"):
        actor.update()
    # Given the same weights (and version), the actor acts identically.
    actor.set_weights(full.get_weights(), version=7)
    assert actor.weights_version == 7
    states = np.clip(np.random.default_rng(0).normal(size=(16, 4)) * 0.2, -0.4, 0.4).astype(np.float32)
    a_full, x_full = full.get_actions(states, explore=False, return_extras=True)
    a_act, x_act = actor.get_actions(states, explore=False, return_extras=True)
    np.testing.assert_array_equal(a_full, a_act)
    np.testing.assert_array_equal(x_act["weights_version"], np.full(16, 7))
    if name in ("impala", "appo"):
        _, full_extras = full.get_actions(states, return_extras=True)
        _, actor_extras = actor.get_actions(states, return_extras=True)
        np.testing.assert_allclose(full_extras["values"], actor_extras["values"], rtol=1e-5, atol=1e-6)


def test_learner_only_build_has_no_actor(backend):
    learner = make("dqn", backend, "learner")
    assert learner.actor is None and learner.builder is None
    with pytest.raises(RLGraphError, match="role='learner'.*needs the actor"):
        learner.get_actions(np.zeros((2, 4), np.float32))
    with pytest.raises(RLGraphError, match="role"):
        make("dqn", backend, "trainer")


def test_local_agent_takes_any_env_ids(backend):
    """Rows come for any subset of environment ids, in any order; unrolls complete per id."""
    agent = make("impala", backend, "both", unroll_length=3)
    rng = np.random.default_rng(0)
    counts = {}
    for t in range(12):
        ids = rng.permutation([3, 17, 40, 8])[:rng.integers(1, 5)]
        states = np.clip(rng.normal(size=(len(ids), 4)) * 0.2, -0.4, 0.4).astype(np.float32)
        actions, extras = agent.get_actions(states, return_extras=True)
        agent.observe(states, actions, np.ones(len(ids), np.float32), states, np.zeros(len(ids), bool),
                      np.zeros(len(ids), bool), env_ids=ids, **extras)
        for i in ids:
            counts[i] = counts.get(i, 0) + 1
    queued = sum(b["unroll"]["rewards"].shape[1] for b in agent.learner.queue)
    assert queued == sum(c // 3 for c in counts.values())
    assert agent.builder.num_pending_steps == sum(c % 3 for c in counts.values())


# --- two actor processes, one learner ------------------------------------------------------------------------
def _actor_process(name, backend, weights, version, env_seed, num_steps, queue):
    """An actor-only agent in its own process: acts with weights of ``version``, sends its unrolls."""
    os.environ["OMP_NUM_THREADS"] = "1"
    env = VectorEnv("CartPole-v1", num_envs=3, seed=env_seed)
    agent = Agent.from_spec(cartpole_config(name), state_space=env.state_space, action_space=env.action_space,
                            backend=backend, role="actor")
    agent.set_weights(weights, version=version)
    builder = agent.make_trajectory_builder()
    actor, obs, states = agent.actor, env.reset(), None
    ids = np.arange(3) + 100 * env_seed
    for _ in range(num_steps):
        actions, extras = actor.get_actions(obs, explore=True, internal_states=states)
        next_obs, rewards, terminals, truncations = env.step(actions)
        step = actor.make_step(obs, actions, rewards, env.final_obs, terminals, truncations, extras)
        items = builder.add(ids, step)
        if items is not None:
            queue.put(actor.process_items(items))
        states = actor.next_internal_states(extras, rewards, terminals | truncations)
        obs = next_obs
    queue.put(None)


@pytest.mark.parametrize("name", ["impala", "appo"])
def test_two_actor_processes_feed_one_learner_with_the_policy_lag_of_their_versions(name):
    backend = "pytorch" if pytest.importorskip("torch") else None
    learner = make(name, backend, "learner", **(dict(num_epochs=1, num_minibatches=1) if name == "appo" else {}))
    learner.set_weights(learner.get_weights(), version=10)
    unroll = learner.unroll_length
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    versions = {1: 4, 2: 9}  # Actor seed -> the version of the weights it acts with.
    procs = [ctx.Process(target=_actor_process, args=(name, backend, learner.get_weights(), v, seed, unroll, queue))
             for seed, v in versions.items()]
    for p in procs:
        p.start()
    try:
        finished, received = 0, []
        while finished < len(procs):
            item = queue.get(timeout=120)
            if item is None:
                finished += 1
            else:
                received.append(item)
                learner.learner.add_items(item)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
    assert len(received) == 2 and all(r["unroll"]["rewards"].shape == (unroll, 3) for r in received)
    result = learner.update()
    # 3 columns acted with version 4, 3 with version 9; the learner is at version 10.
    assert result["policy_lag_max"] == 10 - 4
    assert result["policy_lag_mean"] == pytest.approx(np.mean([10 - 4, 10 - 9]))
    assert learner.weights_version == 11 and result["dropped_samples"] == 0
