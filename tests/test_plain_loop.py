"""The plain loop a new user writes first, for every agent on both backends:

    a = agent.get_actions(obs); obs2, r, term, trunc, info = env.step(a)
    agent.observe(obs, a, r, obs2, term, trunc); if agent.ready_to_update(): agent.update()

on gymnasium's ``make_vec`` in both auto-reset modes: the learner receives what the explicit-extras form
(``get_actions(..., return_extras=True)``, ``observe(..., **extras)``, recurrent state threaded by hand) gives
it, no transition crossing two episodes reaches a builder, and each trap of the loop gets a clear error.
"""
import json
import os

import gymnasium as gym
import numpy as np
import optree
import pytest

from rlgraph.agents import Agent
from rlgraph.spaces.space_utils import gymnasium_batch_size, vector_env_batch_size
from rlgraph.utils.errors import RLGraphAPIError, RLGraphError, RLGraphSpaceError

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
NUM_ENVS = 4
NET = [{"type": "dense", "units": 16, "activation": "relu"}]
LSTM_NET = [{"type": "dense", "units": 16, "activation": "tanh"}, {"type": "lstm", "units": 8}]
PREV_NET = {"type": "multi-input-stream-network",
            "input_network_specs": {"state": [{"type": "dense", "units": 16, "activation": "tanh"}],
                                    "prev_action": [], "prev_reward": []},
            "post_network_spec": [{"type": "lstm", "units": 8}]}
REPLAY = dict(update_spec={"batch_size": 16, "update_interval": 8, "steps_before_update": 64, "sync_interval": 64},
              memory_spec={"type": "prioritized-replay", "capacity": 2000}, schedule_timesteps=2000)
#: Small versions of the CartPole configs: IMPALA with an LSTM and previous action/reward inputs (recurrent
#: state threaded by the agent), APPO feed-forward with minibatches of samples.
SMALL = {
    "dqn": dict(network_spec=NET, **REPLAY),
    "apex": dict(network_spec=NET, **REPLAY),
    "impala": dict(network_spec=PREV_NET, prev_action_reward=True, unroll_length=8),
    "appo": dict(network_spec=NET, unroll_length=8, num_epochs=2, num_minibatches=2),
    "r2d2": dict(network_spec=LSTM_NET, memory_spec={"capacity": 500, "burn_in_length": 2, "train_length": 6,
                                                     "overlap": 3},
                 update_spec={"batch_size": 8, "update_interval": 16, "steps_before_update": 96,
                              "sync_interval": 96}),
}
NAMES = list(SMALL)


def cartpole_config(name, **changes):
    with open(os.path.join(CONFIGS, f"{name}_cartpole.json")) as f:
        cfg = json.load(f)
    cfg.update(SMALL[name], **changes)
    return cfg


def make_env(mode="next_step", num_envs=NUM_ENVS):
    if mode == "next_step":  # gymnasium's default: CartPole's native vector env, next-step auto-reset.
        return gym.make_vec("CartPole-v1", num_envs=num_envs)
    return gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})


def make_agent(name, backend, env, **changes):
    return Agent.from_spec(cartpole_config(name, **changes), state_space=env.single_observation_space,
                           action_space=env.single_action_space, backend=backend)


def next_states_of(mode, obs2, dones, info):
    """What observe takes as ``next_states``: in same-step mode the ended rows' final observations."""
    if mode == "next_step" or not dones.any():
        return obs2
    next_states = obs2.copy()
    next_states[dones] = np.stack(info["final_obs"][dones])
    return next_states


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Small networks on busy cores: one PyTorch math thread (restored afterwards)."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class Recorder:
    """Records what reaches an agent's builder (the step rewards) and its learner (the items)."""

    def __init__(self, agent):
        self.step_rewards, self.items = [], []
        builder_add, add_items = agent.builder.add, agent.learner.add_items

        def record_step(ids, step):
            rows = step["rows"] if "rows" in step else step
            self.step_rewards.append(np.array(rows["rewards"]))
            return builder_add(ids, step)

        def record_items(items):
            self.items.append(optree.tree_map(np.array, items))
            return add_items(items)

        agent.builder.add, agent.learner.add_items = record_step, record_items

    def clear(self):
        self.step_rewards, self.items = [], []


def run_loop(agent, env, mode, steps, explicit, seed=0, greedy_probes=False):
    """The plain loop (or, ``explicit``, the explicit-extras form) for ``steps`` vector steps.

    Returns:
        (update results, number of next-step reset steps, the last observations).
    """
    obs, _ = env.reset(seed=seed)
    states, prev_dones, results, reset_steps = None, np.zeros(env.num_envs, bool), [], 0
    for t in range(steps):
        if explicit:
            actions, extras = agent.get_actions(obs, internal_states=states, return_extras=True)
        else:
            actions = agent.get_actions(obs)
            if greedy_probes and t % 7 == 3:  # An evaluation call in between must not disturb what observe takes.
                agent.get_actions(obs[::-1].copy(), explore=False)
        obs2, rewards, terms, truncs, info = env.step(actions)
        dones = terms | truncs
        next_states = next_states_of(mode, obs2, dones, info)
        if explicit:
            agent.observe(obs, actions, rewards, next_states, terms, truncs, **extras)
            # By hand, as a careful user would: new episodes at ends and, in next-step mode, after reset steps.
            restart = dones | prev_dones if mode == "next_step" else dones
            states = agent.next_internal_states(extras, rewards, restart)
        else:
            agent.observe(obs, actions, rewards, next_states, terms, truncs)
        if mode == "next_step":
            reset_steps += int(prev_dones.sum())
        prev_dones = dones
        while agent.ready_to_update():
            results.append(agent.update())
        obs = obs2
    return results, reset_steps, obs


def assert_same_tree(a, b, what):
    leaves_a, spec_a = optree.tree_flatten(a)
    leaves_b, spec_b = optree.tree_flatten(b)
    assert spec_a == spec_b, what
    for x, y in zip(leaves_a, leaves_b):
        np.testing.assert_array_equal(x, y, err_msg=what)


# --- the loop, for every agent on both backends, in both auto-reset modes -------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_plain_loop_feeds_the_learner_what_the_explicit_extras_form_does(backend, name, tmp_path):
    """From the same stored start (variables and run state, random generators included), the plain loop and the
    explicit-extras form hand the learner the same items and make the same updates; in next-step mode no reset
    step (reward 0 on CartPole) reaches the builder, in same-step mode every row does."""
    agent = make_agent(name, backend, make_env())
    recorder = Recorder(agent)
    steps = 100
    for k, mode in enumerate(("next_step", "same_step")):
        start = str(tmp_path / mode)
        agent.reset()  # New environments: no partial trajectories.
        agent.store_model(start)
        start_state = agent.get_run_state()
        runs = []
        for explicit in (False, True):
            if explicit:
                agent.load_model(start)
                agent.set_run_state(start_state)
            recorder.clear()
            results, reset_steps, obs = run_loop(agent, make_env(mode), mode, steps, explicit, seed=k,
                                                 greedy_probes=not explicit)
            runs.append((recorder.items, results, agent.get_weights()))
            rewards = np.concatenate(recorder.step_rewards)
            assert (rewards == 1).all(), "a reset step (reward 0) reached the builder"
            assert rewards.size == steps * NUM_ENVS - reset_steps
            assert reset_steps > 0 if mode == "next_step" else reset_steps == 0
        (items, results, weights), (items_e, results_e, weights_e) = runs
        assert len(items) == len(items_e) > 0 and len(results) == len(results_e) > 0, mode
        for i, (a, b) in enumerate(zip(items, items_e)):
            assert_same_tree(a, b, f"{mode}: items handed to the learner, #{i}")
        np.testing.assert_array_equal([r["loss"] for r in results], [r["loss"] for r in results_e])
        assert_same_tree(weights, weights_e, f"{mode}: weights after the updates")
    # A list of states (obs.tolist()) acts like the array.
    np.testing.assert_array_equal(agent.get_actions(obs.tolist(), explore=False), agent.get_actions(obs, explore=False))
    agent.terminate()


def test_next_step_reset_steps_never_reach_the_builder_and_updates_keep_their_columns(backend):
    """gymnasium's default next-step auto-reset: the step after an episode's end (action ignored, reward 0, its
    ``states`` the ended episode's final observation) is left out, so no transition crosses two episodes; the
    unrolls that then complete at different steps per environment are handed over together, so that every
    update learns from a column per environment, as without reset steps."""
    env = make_env(num_envs=6)
    agent = make_agent("impala", backend, env, network_spec=NET, prev_action_reward=False)
    recorder, columns, finals = Recorder(agent), [], {}  # finals: env id -> final observations of its episodes
    learner_update, env_step = agent.learner.update, env.step

    def update(batch=None):
        columns.append(sum(queued["unroll"]["rewards"].shape[1] for queued in agent.learner.queue))
        return learner_update(batch)

    def step(actions):
        out = env_step(actions)
        for i in np.flatnonzero(out[2] | out[3]):
            finals.setdefault(int(i), []).append(out[0][i].copy())
        return out

    agent.learner.update, env.step = update, step
    _, reset_steps, _ = run_loop(agent, env, "next_step", 200, explicit=False)
    assert reset_steps >= 3
    rewards = np.concatenate(recorder.step_rewards)
    assert (rewards == 1).all() and rewards.size == 200 * 6 - reset_steps
    for items in recorder.items:
        assert (items["unroll"]["rewards"] == 1).all(), "a reset step reached an unroll"
        for col, env_id in enumerate(items["env_ids"]):
            for final in finals.get(int(env_id), []):  # No step of an unroll acts from a final observation.
                assert not (items["unroll"]["states"][:, col] == final).all(axis=-1).any()
    assert len(columns) >= 15 and min(columns) >= 6, columns
    agent.terminate()


# --- the traps, each with its error -----------------------------------------------------------------------------
def test_vector_env_spaces_are_refused_naming_the_single_spaces():
    env = make_env()
    for name in ("dqn", "appo"):  # Refused before anything is built.
        with pytest.raises(RLGraphSpaceError, match=r"look like the batched spaces of a vector environment \(4 rows.*"
                                                     r"pass env.single_observation_space and env.single_action_space"):
            Agent.from_spec(cartpole_config(name), state_space=env.observation_space, action_space=env.action_space)
    # gymnasium's batch_space output, and spaces of one environment that are not taken for it.
    batch = gym.vector.utils.batch_space
    single = gym.spaces.Dict(pos=gym.spaces.Box(-1.0, 1.0, (3,)), cell=gym.spaces.Discrete(5))
    assert gymnasium_batch_size(batch(single, 7)) == 7
    assert gymnasium_batch_size(batch(gym.spaces.MultiDiscrete([2, 3]), 2)) == 2
    assert vector_env_batch_size(batch(single, 7), batch(gym.spaces.Box(-1.0, 1.0, (2,)), 7)) == 7
    box4 = gym.spaces.Box(-1.0, 1.0, (4,))
    assert vector_env_batch_size(box4, box4) is None
    assert vector_env_batch_size(env.single_observation_space, env.single_action_space) is None
    assert vector_env_batch_size(gym.spaces.Box(0, 255, (84, 84, 4)), gym.spaces.Discrete(6)) is None


def test_plain_loop_misuse_gets_errors_naming_the_fix():
    env = make_env()
    obs, _ = env.reset(seed=0)
    impala = make_agent("impala", None, env)  # An on-policy agent learns only from steps it acted on.
    with pytest.raises(RLGraphError, match=r"observe\(\): no extras \(a step needs \['weights_version', "
                                           r"'log_probs'.*\): call agent.get_actions\(states\)"):
        impala.observe(obs, np.zeros(4, np.int64), np.ones(4), obs, np.zeros(4, bool), np.zeros(4, bool))
    impala.terminate()
    agent = make_agent("dqn", None, env)
    actions = agent.get_actions(obs.tolist())  # A list of states is taken (converted to the space's dtype).
    obs2, rewards, terms, truncs, _ = env.step(actions)
    with pytest.raises(RLGraphAPIError, match=r"unknown keyword argument\(s\) \['foo'\].*return_extras=True"):
        agent.observe(obs, actions, rewards, obs2, terms, truncs, foo=1)
    with pytest.raises(RLGraphAPIError, match=r"\['weights_versoin'\] \(did you mean 'weights_version'\?\)"):
        agent.observe(obs, actions, rewards, obs2, terms, truncs, weights_versoin=np.zeros(4, np.int64))
    with pytest.raises(RLGraphError, match=r"3 rows, but the last get_actions\(explore=True\) acted for 4; .*"
                                           r"return_extras=True"):
        agent.observe(obs[:3], actions[:3], rewards[:3], obs2[:3], terms[:3], truncs[:3])
    assert agent.timesteps == 0  # Nothing was taken; the step goes in now.
    agent.observe(obs, actions, rewards, obs2, terms, truncs)
    assert agent.timesteps == 4
    # Each get_actions' extras are taken once: a second observe is of a step the agent did not act on.
    agent.observe(obs, actions, rewards, obs2, terms, truncs)
    assert agent.timesteps == 8
    with pytest.raises(RLGraphSpaceError, match=r"get_actions\(\): the list of states cannot be converted"):
        agent.get_actions([[0.0, 1.0, 2.0, 3.0], [0.0, 1.0]])
    agent.terminate()


# --- learning -----------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_plain_loop_trains_appo_on_gymnasium_make_vec_cartpole(backend):
    """The loop as a new user writes it, on ``gymnasium.make_vec`` (next-step auto-reset), with the shipped APPO
    config: the mean training return of the last 50 episodes reaches 200 within 300k env steps (about 60k
    on both backends, seed 1)."""
    env = gym.make_vec("CartPole-v1", num_envs=64)
    agent = Agent.from_spec(os.path.join(CONFIGS, "appo_cartpole.json"), state_space=env.single_observation_space,
                            action_space=env.single_action_space, backend=backend, seed=1)
    obs, _ = env.reset(seed=1)
    returns, episode_returns, steps = np.zeros(env.num_envs), [], 0
    while steps < 300_000:
        actions = agent.get_actions(obs)
        obs2, rewards, terms, truncs, _ = env.step(actions)
        agent.observe(obs, actions, rewards, obs2, terms, truncs)
        if agent.ready_to_update():
            agent.update()
        obs, steps = obs2, steps + env.num_envs
        returns += rewards
        dones = terms | truncs
        episode_returns.extend(returns[dones].tolist())
        returns[dones] = 0.0
        if len(episode_returns) >= 50 and np.mean(episode_returns[-50:]) >= 200:
            break
    assert len(episode_returns) >= 50 and np.mean(episode_returns[-50:]) >= 200, \
        (steps, np.mean(episode_returns[-50:]))
    agent.terminate()
