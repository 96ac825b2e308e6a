"""Central inference's batch-size buckets: on JAX, ``act`` compiles once per bucket, not per batch size.

The rule (``rlgraph.engines.central_inference.buckets``) against its closed form; padding and slicing over nested
batches; the inference server's padded calls against unpadded ones, row for row, on JAX and PyTorch (DQN, R2D2 and a
recurrent APPO with the previous action and reward, from configs/*_cartpole.json); the padding rows never reach the
recurrent state or the trajectories; and the number of ``act`` programs a JAX server and a JAX central run compile.
"""
import copy
import itertools
import json
import math
import os

import numpy as np
import optree
import pytest

from rlgraph.engines.central_inference.buckets import bucket_size, buckets, largest_batch, num_rows, pad_batch, unpad
from rlgraph.engines.central_inference.request import Request
from rlgraph.utils.errors import RLGraphError

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
ACT_METHODS = ("act", "get_actions", "get_actions_with_epsilon")


# --- the rule ---------------------------------------------------------------------------------------------------
def test_bucket_is_the_next_power_of_two_capped_at_the_largest_batch():
    for largest in range(1, 70):
        for n in range(1, largest + 1):
            assert bucket_size(n, largest) == min(2 ** math.ceil(math.log2(n)), largest), (n, largest)
        assert buckets(largest) == sorted({bucket_size(n, largest) for n in range(1, largest + 1)}), largest
    assert bucket_size(1, 1) == 1 and bucket_size(1, 6) == 1 and bucket_size(2, 6) == 2
    assert bucket_size(8, 8) == 8 and bucket_size(8, 16) == 8 and bucket_size(9, 16) == 16  # powers of two
    assert bucket_size(5, 6) == 6 and bucket_size(6, 6) == 6 and bucket_size(3, 6) == 4  # largest not a power
    assert buckets(1) == [1] and buckets(6) == [1, 2, 4, 6] and buckets(8) == [1, 2, 4, 8]
    for n, largest in [(0, 4), (5, 4), (-1, 1)]:
        with pytest.raises(RLGraphError, match=rf"^Central inference: a batch of {n} rows is outside 1\.\.{largest} "):
            bucket_size(n, largest)


def test_largest_batch_is_the_largest_sum_of_whole_actors_that_fits():
    def brute_force(counts, batch_rows):
        sums = [sum(s) for k in range(1, len(counts) + 1) for s in itertools.combinations(counts, k)]
        return max([s for s in sums if s <= batch_rows] + list(counts))

    assert largest_batch([2, 2, 2], 5) == 4 and largest_batch([2, 2, 2], 100) == 6
    assert largest_batch([1, 5], 3) == 5  # One actor with more rows than batch_rows is served alone.
    rng = np.random.default_rng(0)
    for _ in range(200):
        counts = list(rng.integers(1, 9, rng.integers(1, 7)))
        batch_rows = int(rng.integers(1, 40))
        assert largest_batch(counts, batch_rows) == brute_force(counts, batch_rows), (counts, batch_rows)
    with pytest.raises(RLGraphError, match="environment counts per actor must be positive"):
        largest_batch([2, 0], 4)


def test_pad_and_unpad_nested_batches_with_copies_of_a_real_row():
    rng = np.random.default_rng(1)
    tree = dict(obs=dict(image=rng.random((3, 2, 2), np.float32), ids=np.array([4, 0, 7])),
                states=(rng.random((3, 5)), np.array([True, False, True])))
    padded = pad_batch(tree, 8)
    assert optree.tree_structure(padded) == optree.tree_structure(tree) and num_rows(padded) == 8
    for x, p in zip(optree.tree_leaves(tree), optree.tree_leaves(padded)):
        assert p.dtype == x.dtype
        np.testing.assert_array_equal(p[:3], x)
        np.testing.assert_array_equal(p[3:], np.repeat(x[-1:], 5, axis=0))  # copies of the last real row
    for x, u in zip(optree.tree_leaves(tree), optree.tree_leaves(unpad(padded, 3))):
        np.testing.assert_array_equal(u, x)
    assert pad_batch(tree, 3) is tree
    with pytest.raises(RLGraphError, match="different numbers of rows"):
        pad_batch(dict(a=np.zeros(3), b=np.zeros(2)), 4)
    with pytest.raises(RLGraphError, match="cannot pad a batch of 3 rows to 2"):
        pad_batch(tree, 2)


# --- the server's padded calls ----------------------------------------------------------------------------------
class ReplyLog:
    """The server's end of a transport that records the answers (the tests hand ``serve`` their requests)."""

    def __init__(self):
        self.replies = []

    def reply(self, index, actions):
        self.replies.append((index, np.array(actions)))

    def ready(self, index):
        return True


def cartpole_config(name):
    with open(os.path.join(CONFIGS, f"{name}_cartpole.json")) as f:
        config = json.load(f)
    if name == "appo":  # Recurrent, with the previous action and reward: nested recurrent states.
        config = copy.deepcopy(config)
        state_net = [{"type": "dense", "units": 32, "activation": "tanh"}]
        config["network_spec"] = {"type": "multi-input-stream-network",
                                  "input_network_specs": {"state": state_net, "prev_action": [], "prev_reward": []},
                                  "post_network_spec": [{"type": "lstm", "units": 16}]}
        config["prev_action_reward"] = True
    return config


def make_server(name, backend, env_counts=(1,) * 6, batch_rows=6):
    """An ``InferenceServer`` of the agent of ``configs/NAME_cartpole.json`` on ``backend`` (role "both"), with
    greedy epsilons (0) for the epsilon-greedy actors, so that their actions are a function of the inputs."""
    pytest.importorskip("jax" if backend == "jax" else "torch")
    import gymnasium as gym

    from rlgraph.agents import Agent
    from rlgraph.engines.central_inference.inference_server import InferenceServer

    env = gym.make("CartPole-v1")
    agent = Agent.from_spec(cartpole_config(name), state_space=env.observation_space, action_space=env.action_space,
                            backend=backend, seed=0, role="both")
    if name != "appo":
        agent.actor.set_epsilons(np.zeros(sum(env_counts), np.float32))
    server = InferenceServer(agent, ReplyLog(), list(env_counts), optree.tree_structure(np.zeros(1)), batch_rows,
                             timeout_s=0.0)
    return server, agent


def observations(n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-0.2, 0.2, (n, 4)).astype(np.float32)


@pytest.mark.parametrize("backend_name", ["jax", "pytorch"])
@pytest.mark.parametrize("name", ["dqn", "r2d2", "appo"])
def test_a_padded_call_equals_the_unpadded_call_row_for_row(name, backend_name):
    server, agent = make_server(name, backend_name)
    assert server.largest_batch == 6 and server.pad_to_buckets == (backend_name == "jax")
    table = server.loop._state_table()
    if table is not None:  # Distinct recurrent states per environment id, so that padding them matters.
        rng = np.random.default_rng(2)
        for s in table:
            s[...] = rng.uniform(-0.5, 0.5, s.shape).astype(s.dtype) if s.dtype.kind == "f" else \
                rng.integers(0, 2, s.shape).astype(s.dtype)
    table_before = None if table is None else tuple(s.copy() for s in table)
    server.pad_to_buckets = True  # (PyTorch does not need it; padding must change nothing there either.)
    for ids in (np.array([0, 2, 5]), np.array([1, 3, 4, 5, 0])):  # buckets 4 and 6
        obs = observations(len(ids), seed=len(ids))
        ref_actions, ref_extras = server.loop.act(obs, ids)
        before = server.padded_rows
        actions, extras = server._act(obs, ids)
        assert server.padded_rows - before == bucket_size(len(ids), 6) - len(ids)
        assert sorted(extras) == sorted(ref_extras)
        assert all(len(leaf) == len(ids) for leaf in optree.tree_leaves((actions, extras)))
        if name == "appo":  # Sampled actions: the deterministic outputs (value, LSTM state) row for row.
            deterministic = dict(values=extras["values"], lstm=extras["internal_states"][:2],
                                 acted_from=extras["step_internal_states"])
            reference = dict(values=ref_extras["values"], lstm=ref_extras["internal_states"][:2],
                             acted_from=ref_extras["step_internal_states"])
            assert set(np.unique(actions)) <= {0, 1}
        else:  # Greedy: the actions and every extra (R2D2's recurrent states).
            deterministic, reference = (actions, extras), (ref_actions, ref_extras)
        for got, want in zip(optree.tree_leaves(deterministic), optree.tree_leaves(reference)):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if table is not None:  # Acting writes no recurrent state (carry_states does, from the sliced extras).
        for s, s0 in zip(server.loop.internal_states, table_before):
            np.testing.assert_array_equal(s, s0)


def step_request(index, obs, reward=1.0):
    one = np.zeros(1, bool)
    return Request(index, False, [obs], rewards=np.full(1, reward, np.float32), terminals=one, truncations=one.copy())


def test_padding_rows_reach_no_recurrent_state_trajectory_or_actor():
    server, agent = make_server("r2d2", "jax")
    served = [0, 1, 2]  # 3 rows: bucket 4 (a copy of id 2 pads it)
    obs = observations(6, seed=3)
    server.serve([Request(i, True, [obs[i:i + 1]]) for i in served])
    assert server.padded_rows == 1 and [i for i, _ in server.transport.replies] == served
    assert all(a.shape == (1,) for _, a in server.transport.replies)
    # The unpadded step's next recurrent states, for comparison.
    _, ref_extras = server.loop.act(obs[:3], np.array(served))
    added = []
    server.loop.builder.add = lambda ids, step: added.append((np.array(ids), step))
    server.serve([step_request(i, obs[i + 3:i + 4]) for i in served])
    assert server.padded_rows == 2 and len(added) == 1
    ids, step = added[0]
    np.testing.assert_array_equal(ids, served)  # the trajectories got the 3 real rows
    assert all(len(leaf) == 3 for leaf in optree.tree_leaves(step))
    table = server.loop.internal_states
    for s, ref in zip(table, ref_extras["internal_states"]):
        np.testing.assert_allclose(s[served], ref, rtol=1e-5, atol=1e-6)  # carried from the real rows
        assert np.abs(ref).max() > 0
        np.testing.assert_array_equal(s[3:], 0)  # environments not served keep their new-episode state


def act_traces(agent):
    return sum(agent.actor.executor.trace_counts[m] for m in ACT_METHODS)


def test_a_jax_server_compiles_act_once_per_bucket_and_once_per_size_without_buckets():
    server, agent = make_server("dqn", "jax")
    obs = observations(6, seed=4)
    for n in range(1, 7):  # batch sizes 1..6: buckets 1, 2, 4, 6
        server.serve([Request(i, True, [obs[i:i + 1]]) for i in range(n)])
    assert act_traces(agent) == len(buckets(6)) == 4
    assert server.padded_rows == (4 - 3) + (6 - 5)
    server.pad_to_buckets = False
    for n in (3, 5):
        server.serve([Request(i, True, [obs[i:i + 1]]) for i in range(n)])
    assert act_traces(agent) == 6  # each batch size its own program


@pytest.mark.timeout(180)
def test_a_jax_central_run_compiles_act_at_most_once_per_bucket(monkeypatch):
    pytest.importorskip("jax")
    from rlgraph.engines.runner import load_config, make_engine

    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))  # (as rlgraph train sets it)
    config, _ = load_config(os.path.join(CONFIGS, "appo_cartpole.json"))
    config = copy.deepcopy(config)
    # 3-row actors, no waiting for more actors: batches of 3, 6 and 9 rows, in buckets 4, 8 and 9.
    config["execution_spec"] = dict(num_actors=3, envs_per_actor=3, inference_timeout_ms=0.0)
    engine, agent, _ = make_engine(config, executor="central", backend="jax", seed=0)
    executor, sizes = agent.actor.executor, []
    execute = executor.execute

    def recording(method, *args, **kwargs):
        if method == "act":
            sizes.append(len(args[0]))
        return execute(method, *args, **kwargs)

    monkeypatch.setattr(executor, "execute", recording)
    try:
        out = engine.run(300)
    finally:
        engine.close()
    assert out["env_steps"] >= 300 and engine.server.largest_batch == 9
    assert set(sizes) <= {4, 8, 9}, sorted(set(sizes))  # never 3 or 6 rows
    assert executor.trace_counts["act"] == len(set(sizes)) <= len(buckets(9))
