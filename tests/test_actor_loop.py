"""The actor's step sequence, written once (``rlgraph.workers.ActorLoop``): acting with explicit arguments, a step's
results becoming trajectory items, one ``add(env_ids, step)`` contract for every trajectory builder, and the
workers, engines and the plain loop driving it."""
import json
import os

import numpy as np
import pytest

from rlgraph.agents import Agent
from rlgraph.environments import VectorEnv
from rlgraph.utils.errors import RLGraphAPIError, RLGraphError, RLGraphSpecError
from rlgraph.workers import ActorLoop, VectorWorker

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
NAMES = ["dqn", "apex", "impala", "appo", "r2d2"]


def config_of(name, **changes):
    with open(os.path.join(CONFIGS, f"{name}_cartpole.json")) as f:
        return dict(json.load(f), **changes)


def make(name, role="both", seed=0, **changes):
    env = VectorEnv("CartPole-v1", num_envs=4, seed=0)
    return Agent.from_spec(config_of(name, **changes), state_space=env.state_space, action_space=env.action_space,
                           backend="pytorch", role=role, seed=seed)


# --- a backend-free actor that records what it is given -------------------------------------------------------
class RecordingActor:
    """Acts 0; recurrent state = one counter per row (+1 per step); fixed epsilons by row slot."""

    extras_keys = ("internal_states", "weights_version")

    def __init__(self, epsilons=None):
        self.calls, self.processed = [], 0
        self.epsilons = epsilons

    def initial_internal_states(self, num_envs):
        return (np.zeros(num_envs, np.float32),)

    def get_actions(self, states, explore=True, internal_states=None, **kwargs):
        self.calls.append(dict(rows=len(states), internal_states=internal_states, **kwargs))
        n = len(states)
        if internal_states is None:
            internal_states = self.initial_internal_states(n)
        return np.zeros(n, np.int64), dict(internal_states=(internal_states[0] + 1,),
                                           weights_version=np.zeros(n, np.int64))

    def row_epsilons(self, num_rows):
        return None if self.epsilons is None else np.arange(num_rows, dtype=np.float32) / 10

    def next_internal_states(self, extras, rewards, dones):
        s = np.array(extras["internal_states"][0], copy=True)
        s[np.asarray(dones, bool)] = 0
        return (s,)

    def make_step(self, states, actions, rewards, next_states, terminals, truncations, extras):
        return dict(states=states, actions=actions, rewards=rewards, next_states=next_states, terminals=terminals,
                    truncations=truncations)

    def process_items(self, items):
        self.processed += 1
        return dict(items, processed=True)


class Sink:
    def __init__(self):
        self.steps, self.items = 0, []

    def observe_env_steps(self, n):
        self.steps += n

    def add_items(self, items):
        self.items.append(items)


def _step(n, done_rows=()):
    states = np.arange(n, dtype=np.float32)[:, None]
    terminals = np.zeros(n, bool)
    terminals[list(done_rows)] = True
    return states, np.zeros(n, np.int64), np.ones(n, np.float32), states + 1, terminals, np.zeros(n, bool)


def test_the_loop_keeps_recurrent_state_per_env_id_and_passes_epsilons_explicitly():
    from rlgraph.trajectories import NStepBuilder
    actor, sink = RecordingActor(epsilons=True), Sink()
    loop = ActorLoop(actor, NStepBuilder(1, 0.9), sink=sink, num_envs=6)
    ids = np.array([4, 1])
    states, actions, rewards, next_states, terminals, truncations = _step(2)
    _, extras = loop.act(states, ids)
    np.testing.assert_allclose(actor.calls[-1]["epsilons"], [0.4, 0.1])  # Those ids' epsilons, per call.
    np.testing.assert_array_equal(actor.calls[-1]["internal_states"][0], [0, 0])  # New episodes.
    terminals[1] = True  # Id 1's episode ends.
    loop.carry_states(extras, rewards, terminals | truncations, ids)
    items = loop.add_step(states, actions, rewards, next_states, terminals, truncations, extras, ids)
    assert items["processed"] and sink.items == [items] and sink.steps == 2
    np.testing.assert_array_equal(items["env_ids"], ids)
    loop.act(_step(3)[0], np.array([1, 4, 5]))
    # Id 4 carried on, id 1 started afresh (its episode ended), id 5 never acted.
    np.testing.assert_array_equal(actor.calls[-1]["internal_states"][0], [0, 1, 0])
    assert loop.forget(np.array([4])) == 0
    loop.act(_step(1)[0], np.array([4]))
    np.testing.assert_array_equal(actor.calls[-1]["internal_states"][0], [0])
    assert "timesteps" not in actor.calls[-1]
    loop.act(_step(1)[0], np.array([4]), timesteps=123)
    assert actor.calls[-1]["timesteps"] == 123


def test_a_loop_for_all_environments_threads_its_state_and_returns_items_without_a_sink():
    from rlgraph.trajectories import NStepBuilder
    actor = RecordingActor()
    loop = ActorLoop(actor, NStepBuilder(2, 0.5))
    got = []
    for t in range(3):
        step = _step(3, done_rows=[2] if t == 1 else [])
        actions, extras = loop.act(step[0])
        assert "epsilons" not in actor.calls[-1]  # The actor's own epsilons: none passed.
        got.append(loop.observe(step[0], actions, step[2], step[3], step[4], step[5], extras))
    assert got[0] is None and got[1] is not None and got[1]["processed"]
    # State rows: [0, 0, 0] -> [1, 1, 1] -> [2, 2, 0] (row 2's episode ended) for the next act.
    np.testing.assert_array_equal(loop.internal_states[0], [3, 3, 1])
    assert actor.calls[0]["internal_states"] is None
    np.testing.assert_array_equal(actor.calls[2]["internal_states"][0], [2, 2, 0])
    loop.reset()
    assert loop.internal_states is None and loop.builder.num_pending_steps == 0
    with pytest.raises(RLGraphError, match="num_envs"):
        loop.act(_step(1)[0], np.array([0]))


class EndingEnv:
    """Three rows; row 1's episode ends at every step: its next observation is the reset's (-1), its
    ``final_obs`` the episode's last (100 + row)."""

    def __init__(self):
        self.actions = []

    def step(self, actions):
        self.actions.append(actions)
        obs = np.arange(3, dtype=np.float32)[:, None] + 10 * len(self.actions)
        self.final_obs = obs.copy()
        obs[1], self.final_obs[1] = -1.0, 101.0
        terminals = np.array([False, True, False])
        return obs, np.ones(3, np.float32), terminals, np.zeros(3, bool)


def test_step_acts_steps_and_observes_with_the_final_observations():
    """``ActorLoop.step``, every worker's step: the actor acts on the given observations, the items' next
    states are the env's ``final_obs`` (an ended episode bootstraps from its last observation, not the
    reset's), the returned observations are the env's next ones, and the recurrent state carries on."""
    from rlgraph.trajectories import NStepBuilder
    actor, sink, env = RecordingActor(), Sink(), EndingEnv()
    loop = ActorLoop(actor, NStepBuilder(1, 0.9), sink=sink)
    obs0 = np.zeros((3, 1), np.float32)
    obs1, items, num_steps = loop.step(env, obs0)
    assert num_steps == 3 and sink.steps == 3 and len(env.actions) == 1
    np.testing.assert_array_equal(obs1[:, 0], [10, -1, 12])
    np.testing.assert_array_equal(items["next_states"][:, 0], [10, 101, 12])
    np.testing.assert_array_equal(items["states"][:, 0], [0, 0, 0])
    assert "timesteps" not in actor.calls[-1]
    _, items, _ = loop.step(env, obs1, timesteps=7)
    assert actor.calls[-1]["timesteps"] == 7
    np.testing.assert_array_equal(items["states"][:, 0], [10, -1, 12])  # Acted on what the last step returned.
    np.testing.assert_array_equal(actor.calls[-1]["internal_states"][0], [1, 0, 1])  # Row 1's episode ended.


def test_every_builder_takes_its_actors_steps_as_they_come():
    """One ``add(env_ids, step)`` contract: each agent's ``make_step`` output goes into its builder unchanged."""
    for name in NAMES:
        agent = make(name, role="actor", **(dict(unroll_length=4) if name in ("impala", "appo") else {}))
        builder = agent.make_trajectory_builder()
        loop = ActorLoop(agent.actor, builder)
        env = VectorEnv("CartPole-v1", num_envs=3, seed=1, max_episode_steps=5)  # Truncations: bootstrap steps.
        obs, items = env.reset(), []
        for _ in range(30):
            actions, extras = loop.act(obs)
            next_obs, rewards, terminals, truncations = env.step(actions)
            out = loop.observe(obs, actions, rewards, env.final_obs, terminals, truncations, extras)
            items += [] if out is None else [out]
            obs = next_obs
        assert items, name
        if name == "r2d2":
            assert type(builder).__name__ == "SequenceBuilder"
            assert all("resets" in i and "dones" not in i and "bootstrap_step" not in i for i in items)
            assert any(i["bootstrap"].any() for i in items)  # The truncated episodes' bootstrap rows.


def test_actors_take_their_settings_at_construction_and_hold_no_agent():
    for name in NAMES:
        agent = make(name, role="actor")
        assert not hasattr(agent.actor, "agent"), name
        assert agent.actor.name == agent.name
    apex = make("apex", role="actor")
    assert not apex.actor.priorities_in_learner and make("apex").actor.priorities_in_learner
    assert (apex.actor.epsilon_base, apex.actor.epsilon_alpha) == (apex.epsilon_base, apex.epsilon_alpha)


def test_epsilons_and_timesteps_are_arguments_of_get_actions():
    agent = make("dqn", role="actor")
    actor, states = agent.actor, np.zeros((4, 4), np.float32)
    calls = []
    execute = actor.executor.execute

    def recording_execute(method, *args):
        calls.append((method, args))
        return execute(method, *args)

    actor.executor.execute = recording_execute
    actor.get_actions(states, epsilons=np.full(4, 0.25, np.float32))
    assert calls[-1][0] == "get_actions_with_epsilon" and actor.epsilons is None  # Nothing set on the actor.
    np.testing.assert_allclose(calls[-1][1][1], 0.25)
    actor.get_actions(states, timesteps=agent.schedule_timesteps // 2)
    assert calls[-1][0] == "get_actions" and actor.timesteps == 0
    assert calls[-1][1][1] == pytest.approx(0.5, abs=1e-3)
    with pytest.raises(RLGraphSpecError, match="3 actor epsilons for a batch of 4"):
        actor.get_actions(states, epsilons=np.zeros(3, np.float32))
    with pytest.raises(RLGraphAPIError, match="no exploration epsilons"):
        make("impala", role="actor").actor.get_actions(states, epsilons=np.zeros(4, np.float32))


def test_the_ray_sampler_explores_by_the_runs_timesteps_without_touching_the_actors_count():
    from rlgraph.engines.ray.ray_sampler import RaySampler
    sampler = RaySampler(0, config_of("dqn"), dict(env_spec="CartPole-v1", num_envs=2, seed=3), "pytorch", 5, 0, 2)
    seen = []
    get_actions = sampler.actor.get_actions

    def recording_get_actions(states, explore=True, internal_states=None, **kwargs):
        seen.append(kwargs.get("timesteps"))
        return get_actions(states, explore, internal_states, **kwargs)

    sampler.actor.get_actions = recording_get_actions
    sampler.sample(3, timesteps=1000)
    sampler.sample(2)
    assert seen == [1000, 1002, 1004, 1006, 1008]
    assert sampler.actor.timesteps == 10  # Its own env steps (make_step counts them).


def test_the_worker_and_the_plain_loop_hand_the_learner_the_same_items():
    """``VectorWorker`` (its ``ActorLoop``) and ``Agent.observe`` (the plain loop around one) are the same steps."""
    def items_of(use_worker):
        agent = make("impala", unroll_length=4, seed=3)
        env = VectorEnv("CartPole-v1", num_envs=4, seed=2)
        got = []
        add_items = agent.learner.add_items
        agent.learner.add_items = lambda items: (got.append(items), add_items(items))
        if use_worker:
            VectorWorker(agent, env, learn=False).run(4 * 12)
        else:
            obs = env.reset()
            for _ in range(12):
                actions, extras = agent.get_actions(obs, return_extras=True)
                next_obs, rewards, terminals, truncations = env.step(actions)
                agent.observe(obs, actions, rewards, env.final_obs, terminals, truncations, **extras)
                obs = next_obs
        return got

    worker, plain = items_of(True), items_of(False)
    assert len(worker) == len(plain) == 3
    for a, b in zip(worker, plain):
        np.testing.assert_array_equal(a["unroll"]["rewards"], b["unroll"]["rewards"])
        np.testing.assert_array_equal(a["unroll"]["behaviour_log_probs"], b["unroll"]["behaviour_log_probs"])


def test_a_worker_needs_an_agent_of_both_roles():
    agent = make("dqn", role="actor")
    worker = VectorWorker(agent, VectorEnv("CartPole-v1", num_envs=4, seed=0), learn=False)
    assert worker.internal_states is None
    with pytest.raises(RLGraphError, match="role='actor'.*role='both'"):
        worker.run(8)


def test_an_unknown_role_is_refused_and_a_run_state_of_another_role_too():
    with pytest.raises(RLGraphError, match="role"):
        make("dqn", role="local")
    state = make("dqn", role="both").get_run_state()
    state["role"] = "actor"
    with pytest.raises(RLGraphError, match="role 'both'"):
        make("dqn", role="both").set_run_state(state)


def test_the_ray_samplers_apex_items_get_their_priorities_in_one_call_equal_to_one_per_step():
    """A ``sample`` call completes its items at its end (``Actor.process_item_list``): Ape-X's actor merges them
    and computes their priorities in one executor call; they equal those computed step by step."""
    from rlgraph.engines.ray.ray_sampler import RaySampler
    sampler = RaySampler(0, config_of("apex"), dict(env_spec="CartPole-v1", num_envs=3, seed=3), "pytorch", 5, 0, 3)
    actor, calls = sampler.actor, []
    execute = actor.executor.execute

    def recording_execute(method, *args):
        calls.append(method)
        return execute(method, *args)

    actor.executor.execute = recording_execute
    items, stats = sampler.sample(12)
    assert calls.count("get_actor_priorities") == 1 and calls.count("get_actions_with_epsilon") == 12
    assert len(items) == 1 and stats["num_items"] == len(items[0]["rewards"]) >= 3 * 10
    (item,) = items
    records = {k: item[k] for k in ("states", "actions", "rewards", "terminals", "next_states")}
    # In small calls: the same rows in groups of three, each group its own call (a step's rows, but for the
    # extra rows an episode's end flushes; a row's priority does not depend on the other rows of its call).
    per_step = np.concatenate([execute("get_actor_priorities", {k: v[i:i + 3] for k, v in records.items()})
                               for i in range(0, len(item["rewards"]), 3)])
    np.testing.assert_allclose(item["priorities"], per_step, rtol=1e-5, atol=1e-6)
    assert np.all(item["priorities"] > 0)
    # Other actors keep one item per step, each completed by process_items.
    dqn = RaySampler(0, config_of("dqn"), dict(env_spec="CartPole-v1", num_envs=2, seed=3), "pytorch", 5, 0, 2)
    items, _ = dqn.sample(5)
    assert len(items) == 3  # (3-step returns: the first items at the third step.)


def test_a_loop_that_defers_processing_takes_no_sink():
    agent = make("apex")
    with pytest.raises(RLGraphError, match="defer_processing .* needs no sink"):
        ActorLoop(agent.actor, agent.make_trajectory_builder(), sink=agent.learner, defer_processing=True)
