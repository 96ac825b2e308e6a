"""R2D2 agent: configs, models, sequence assembly, stored recurrent state, burn-in without gradient, the masked
sequence loss against a numpy reference, and learning CartPole on both backends."""
import json
import os

import numpy as np
import pytest

from rlgraph.agents import Agent, R2D2Agent
from rlgraph.environments import VectorEnv
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.utils.backend import tf, torch
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from rlgraph.workers import VectorWorker
from small_configs import FINAL_EVAL_FLOOR

# The agent suites run on every graph backend (JAX too: rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
STATE, ACTION = FloatBox(shape=(4,)), IntBox(2)
BURN_IN, TRAIN, N_STEP = 3, 8, 2
L = BURN_IN + TRAIN
SMALL = dict(type="r2d2", network_spec=[{"type": "dense", "units": 16, "activation": "relu"},
                                        {"type": "lstm", "units": 8}],
             memory_spec={"capacity": 500, "burn_in_length": BURN_IN, "train_length": TRAIN, "overlap": 5},
             n_step=N_STEP, discount=0.9, actor_epsilons="apex",
             update_spec={"batch_size": 4, "steps_before_update": 40, "update_interval": 8, "sync_interval": 40})


def config(name):
    with open(os.path.join(CONFIGS, f"{name}.json")) as f:
        return json.load(f)


def small_agent(backend, **overrides):
    return Agent.from_spec(dict(SMALL, **overrides), state_space=STATE, action_space=ACTION, backend=backend)


# --- configs and models -------------------------------------------------------------------------------------
def test_cartpole_config_builds_acts_and_learns_a_step(backend):
    agent = Agent.from_spec(os.path.join(CONFIGS, "r2d2_cartpole.json"), state_space=STATE, action_space=ACTION,
                            backend=backend)
    assert isinstance(agent, R2D2Agent)
    actions, extras = agent.get_actions(np.full((3, 4), 0.5, np.float32), return_extras=True)
    assert actions.shape == (3,) and set(actions) <= {0, 1}
    h, c = extras["internal_states"]
    assert h.shape == c.shape == (3, 64) and np.any(h != 0)
    agent.learner.spec.update(batch_size=4, steps_before_update=0)  # (the learner holds its schedule)
    out = VectorWorker(agent, VectorEnv("CartPole-v1", num_envs=4, seed=0)).run(200)
    assert out["results"] and np.isfinite(out["results"][-1]["loss"])


@pytest.mark.parametrize("name", ["r2d2_pong", "r2d2_pong_42"])
def test_pong_config_builds_and_steps(backend, name):
    pytest.importorskip("ale_py")
    cfg = config(name)
    cfg["memory_spec"] = dict(cfg["memory_spec"], capacity=16, burn_in_length=2, train_length=6, overlap=4)
    cfg["n_step"] = 2
    cfg["update_spec"] = dict(cfg["update_spec"], batch_size=2, steps_before_update=8, update_interval=8)
    env = VectorEnv(cfg["environment_spec"]["env_spec"], num_envs=2, seed=0)
    agent = Agent.from_spec(cfg, state_space=env.state_space, action_space=env.action_space, backend=backend)
    out = VectorWorker(agent, env).run(24)
    assert out["env_steps"] == 24 and out["results"] and np.isfinite(out["results"][-1]["loss"])


def test_config_errors():
    with pytest.raises(RLGraphSpecError, match="recurrent"):
        small_agent("pytorch", network_spec=[{"type": "dense", "units": 8}])
    with pytest.raises(RLGraphSpecError, match="train_length"):
        small_agent("pytorch", n_step=TRAIN)
    with pytest.raises(RLGraphSpecError, match="value_rescaling"):
        small_agent("pytorch", value_rescaling="no")
    with pytest.raises(RLGraphSpecError,
                       match=r"update_spec\.batchsize: unknown key 'batchsize'\. Did you mean 'batch_size'"):
        small_agent("pytorch", update_spec={"batchsize": 3})
    with pytest.raises(RLGraphSpecError, match="actor_epsilons"):
        small_agent("pytorch", actor_epsilons="ape-x")
    with pytest.raises(RLGraphSpecError, match="state_key"):
        small_agent("pytorch", memory_spec=dict(SMALL["memory_spec"], state_key="h"))
    with pytest.raises(RLGraphSpecError, match="discrete"):
        Agent.from_spec(SMALL, state_space=STATE, action_space=FloatBox(shape=(2,)))
    agent = small_agent("pytorch")
    with pytest.raises(RLGraphError, match="step_internal_states"):
        agent.observe(np.zeros((2, 4), np.float32), np.zeros(2, np.int64), np.zeros(2), np.zeros((2, 4)),
                      np.zeros(2, bool))


def test_sequences_that_leave_steps_untrained_are_warned_about(caplog):
    """A sequence trains on train_length - n_step steps; when sequences start further apart than that, the
    steps between are never trained on: a warning says how many and which overlap trains every step."""
    with caplog.at_level("WARNING", logger="rlgraph.components.algorithms.r2d2_algorithm_component"):
        small_agent("pytorch", memory_spec=dict(SMALL["memory_spec"], overlap=BURN_IN + N_STEP))
    assert "never trained" not in caplog.text
    with caplog.at_level("WARNING", logger="rlgraph.components.algorithms.r2d2_algorithm_component"):
        small_agent("pytorch", memory_spec=dict(SMALL["memory_spec"], overlap=2))
    # Stride 11 - 2 = 9, trained 8 - 2 = 6: 3 of every 9 steps untrained; overlap 3 + 2 = 5 trains them all.
    assert "train on 6 (train_length - n_step), so 3 of every 9 steps" in caplog.text
    assert "burn_in_length + n_step = 5" in caplog.text
    # Without an overlap, sequences overlap by burn_in_length + n_step: every step is trained once.
    caplog.clear()
    with caplog.at_level("WARNING", logger="rlgraph.components.algorithms.r2d2_algorithm_component"):
        agent = small_agent("pytorch", memory_spec={"capacity": 500, "burn_in_length": 4, "train_length": 10},
                            n_step=3)
    assert agent.root.memory.overlap == 7 and agent.root.memory.stride == 7 and "never trained" not in caplog.text


def greedy_rollout(agent, obs):
    """Greedy actions over 10 steps of recurrent states from zeros, on fixed observations."""
    states, out = None, []
    for t in range(obs.shape[1]):
        actions, extras = agent.get_actions(obs[:, t], explore=False, internal_states=states, return_extras=True)
        states = extras["internal_states"]
        out.append(actions)
    return np.stack(out, 1), states


def test_store_load_round_trip_gives_identical_greedy_actions(backend, tmp_path):
    agent = small_agent(backend)
    VectorWorker(agent, VectorEnv("CartPole-v1", num_envs=4, seed=0)).run(400)
    assert agent.updates > 0
    agent.store_model(str(tmp_path / "model"))
    obs = np.random.default_rng(0).normal(size=(32, 10, 4)).astype(np.float32)
    actions, states = greedy_rollout(agent, obs)
    other = small_agent(backend, seed=7)
    assert not all(np.array_equal(a, b) for a, b in zip(agent.get_weights().values(), other.get_weights().values()))
    other.load_model(str(tmp_path / "model"))
    actions2, states2 = greedy_rollout(other, obs)
    np.testing.assert_array_equal(actions, actions2)
    np.testing.assert_array_equal(states[0], states2[0])
    assert other.timesteps == agent.timesteps and other.updates == agent.updates
    q, _ = agent.get_q_values(obs)
    q2, _ = other.get_q_values(obs)
    np.testing.assert_array_equal(q, q2)
    with pytest.raises(RLGraphError, match="another config"):
        small_agent(backend, n_step=3).load_model(str(tmp_path / "model"))


# --- sequences (the cutting rule itself is tested against a reference in test_trajectories.py) -------------
def test_observe_stores_the_actors_recurrent_state_at_sequence_starts(backend):
    """Every stored sequence equals the steps one env went through, and its initial state is the state the actor
    had when it acted on the sequence's first observation (zero for the padding in front of an episode, whose
    first step is flagged in ``resets``)."""
    agent = small_agent(backend, update_spec=dict(SMALL["update_spec"], steps_before_update=10 ** 9))
    env = VectorEnv("CartPole-v1", num_envs=3, seed=4, max_episode_steps=14)  # Truncations too.
    worker = VectorWorker(agent, env)
    seen = {}                                              # obs bytes -> (actor state h, c) when acting on it.
    get_actions = agent.actor.get_actions  # The worker's ActorLoop acts through the actor.

    def recording(states, explore=True, internal_states=None, **kwargs):
        actions, extras = get_actions(states, explore, internal_states, **kwargs)
        for i in range(len(states)):
            seen[states[i].tobytes()] = (extras["step_internal_states"][0][i], extras["step_internal_states"][1][i],
                                         actions[i])
        return actions, extras
    agent.actor.get_actions = recording
    worker.run(600)
    size = agent.learner.stored_sequences
    assert int(agent.executor.execute("get_memory_size")) == size
    sequences, (h0, c0), _, _ = agent.executor.execute("get_sequences", size)  # Equal priorities: each once.
    assert size > 20 and sequences["states"].shape == (size, L, 4)
    started_mid_episode = bootstraps = padded = 0
    for i in range(size):
        resets = np.flatnonzero(sequences["resets"][i])
        pads = int(resets[0]) if resets.size else 0      # Rows before an episode's first step are padding.
        assert resets.size <= 1 and pads <= BURN_IN
        np.testing.assert_array_equal(sequences["states"][i, :pads], 0.0)
        if pads:
            padded += 1
            np.testing.assert_array_equal(h0[i], 0.0)
            np.testing.assert_array_equal(seen[sequences["states"][i, pads].tobytes()][0], 0.0)
        else:
            h, c, _ = seen[sequences["states"][i, 0].tobytes()]
            np.testing.assert_array_equal(h0[i], h)
            np.testing.assert_array_equal(c0[i], c)
            started_mid_episode += bool(np.any(h != 0))
        n = int(sequences["mask"][i].sum())
        for t in range(pads, n):
            if sequences["bootstrap"][i, t]:
                bootstraps += 1
                assert t == n - 1 and not sequences["terminals"][i, :n].any()
            else:
                assert seen[sequences["states"][i, t].tobytes()][2] == sequences["actions"][i, t]
    assert started_mid_episode > 0 and bootstraps > 0 and padded > 0


# --- the loss: burn-in, masks, bootstrap steps ----------------------------------------------------------------
def h(x, eps=1e-3):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + eps * x


def h_inv(x, eps=1e-3):
    return np.sign(x) * (((np.sqrt(1.0 + 4.0 * eps * (np.abs(x) + 1.0 + eps)) - 1.0) / (2.0 * eps)) ** 2 - 1.0)


def random_sequences(B, length, seed, resets=False):
    """Sampled-style sequences [B, length]: a full one, one ending in a terminal, one in a truncation (bootstrap
    step, then padding) and one short padded one; with ``resets``, the first one starts an episode after zero
    padding (its training part starts with the reset) and the last one has its reset inside the burn-in."""
    rng = np.random.default_rng(seed)
    seqs = dict(states=rng.normal(size=(B, length, 4)).astype(np.float32),
                actions=rng.integers(0, 2, (B, length)).astype(np.int32),
                rewards=rng.normal(size=(B, length)).astype(np.float32) * 2,
                terminals=np.zeros((B, length), bool), bootstrap=np.zeros((B, length), bool),
                resets=np.zeros((B, length), bool), mask=np.ones((B, length), bool))
    last = {1: length - 3, 2: length - 4, 3: BURN_IN + 2}
    for b, j in last.items():
        seqs["mask"][b, j + 1:] = False
    seqs["terminals"][1, length - 3] = True
    seqs["terminals"][3, BURN_IN + 2] = True
    seqs["bootstrap"][2, length - 4] = True
    if resets:
        for b, r in ((0, BURN_IN), (3, BURN_IN - 1)):
            seqs["resets"][b, r] = True
            seqs["mask"][b, :r] = True
            for k in ("states", "actions", "rewards"):
                seqs[k][b, :r] = 0
    for k in ("states", "actions", "rewards"):
        seqs[k][~seqs["mask"]] = 0
    seqs["rewards"][seqs["bootstrap"]] = 0
    states = tuple(rng.normal(size=(B, 8)).astype(np.float32) for _ in range(2))
    if resets:
        for s in states:
            s[[0, 3]] = 0.0                                  # Stored state of the padding: zeros.
    weights = rng.uniform(0.5, 1.0, B).astype(np.float32)
    return seqs, states, weights


def reference_q_values(agent, seqs, init):
    """Q of the training steps, from the stored state through the burn-in, or from zeros after a reset."""
    out = []
    for i in range(len(init[0])):
        resets = np.flatnonzero(seqs["resets"][i])
        start = int(resets[0]) if resets.size else 0
        state = tuple(s[i:i + 1] * (0.0 if resets.size else 1.0) for s in init)
        if start < BURN_IN:
            _, state = agent.get_q_values(seqs["states"][i:i + 1, start:BURN_IN], state)
        q, _ = agent.get_q_values(seqs["states"][i:i + 1, BURN_IN:], state)
        out.append(q[0])
    return np.stack(out)


def reference_loss(q, r, a, term, boot, mask, w, n, gamma, eta=0.9, rescale=True):
    """R2D2 on the training steps, Q_target = Q: the masked/bootstrap-step semantics written out per step
    (``rescale=False``: h is the identity)."""
    hh, hh_inv = (h, h_inv) if rescale else ((lambda x: x), (lambda x: x))
    q = q.astype(np.float64)
    v = hh_inv(q.max(-1))                                  # Double Q with equal networks: argmax picks the max.
    B, T = r.shape
    per_item, priorities = [], []
    for b in range(B):
        tds = np.zeros(T - n)
        for t in range(T - n):
            if not mask[b, t] or boot[b, t]:
                continue
            ret, ended = 0.0, False
            for k in range(n):
                if boot[b, t + k]:
                    ret += gamma ** k * v[b, t + k]
                    ended = True
                    break
                ret += gamma ** k * r[b, t + k]
                if term[b, t + k]:
                    ended = True
                    break
            if not ended:
                ret += gamma ** n * v[b, t + n]
            tds[t] = hh(ret) - q[b, t, a[b, t]]
        per_item.append(np.mean(0.5 * tds ** 2))
        priorities.append(eta * np.abs(tds).max() + (1 - eta) * np.abs(tds).mean() + 1e-6)
    return float(np.mean(w * np.array(per_item))), np.array(priorities)


def test_sequence_loss_matches_numpy_reference(backend):
    agent = small_agent(backend)
    agent.sync_target()                                    # Q_target = Q.
    seqs, init, w = random_sequences(4, L, seed=1, resets=True)
    loss, priorities, _ = agent.get_loss_and_gradients(seqs, init, w)
    q = reference_q_values(agent, seqs, init)
    part = {k: v[:, BURN_IN:] for k, v in seqs.items()}
    ref_loss, ref_priorities = reference_loss(q, part["rewards"], part["actions"], part["terminals"],
                                              part["bootstrap"], part["mask"], w, N_STEP, 0.9)
    # Without the value rescaling (padding and bootstrap steps as with it): plain n-step double-Q targets.
    plain = small_agent(backend, value_rescaling=False)
    plain.set_weights(agent.get_weights())
    plain.sync_target()
    plain_loss, plain_priorities, _ = plain.get_loss_and_gradients(seqs, init, w)
    ref_plain = reference_loss(q, part["rewards"], part["actions"], part["terminals"], part["bootstrap"],
                               part["mask"], w, N_STEP, 0.9, rescale=False)
    np.testing.assert_allclose((plain_loss, *plain_priorities), (ref_plain[0], *ref_plain[1]), rtol=1e-4)
    assert not np.isclose(plain_loss, loss, rtol=1e-2)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-4)
    np.testing.assert_allclose(priorities, ref_priorities, rtol=1e-4)
    # Padding and bootstrap steps are out of the loss: changing what they hold (but a bootstrap step's state)
    # changes nothing.
    changed = {k: v.copy() for k, v in seqs.items()}
    out = ~changed["mask"]
    changed["states"][out] = 9.0
    changed["actions"][~changed["mask"] | changed["bootstrap"]] = 1
    changed["rewards"][~changed["mask"] | changed["bootstrap"]] = 100.0
    loss2, priorities2, _ = agent.get_loss_and_gradients(changed, init, w)
    np.testing.assert_allclose(loss2, loss, rtol=1e-6)
    np.testing.assert_allclose(priorities2, priorities, rtol=1e-6)
    # An external batch (e.g. from a distributed replay): one step, the priorities of the loss before it.
    before = agent.get_weights()
    out = agent.update(batch=dict(sequences=seqs, initial_states=init, importance_weights=w))
    np.testing.assert_allclose(out["loss"], ref_loss, rtol=1e-4)
    np.testing.assert_allclose(out["priorities"], ref_priorities, rtol=1e-4)
    assert agent.updates == 1 and any(not np.array_equal(before[k], v) for k, v in agent.get_weights().items())


def test_burn_in_steps_carry_no_gradient(backend):
    """With burn-in: loss and gradients w.r.t. all weights equal those of an agent without burn-in that starts
    the training steps from the (constant) state the burn-in reached; and d loss / d burn-in inputs is 0."""
    agent = small_agent(backend)
    VectorWorker(agent, VectorEnv("CartPole-v1", num_envs=4, seed=1)).run(200)   # Weights away from the init.
    agent.sync_target()
    plain = small_agent(backend, memory_spec=dict(SMALL["memory_spec"], burn_in_length=0, train_length=TRAIN,
                                                  overlap=2))
    plain.set_weights(agent.get_weights())
    plain.sync_target()
    seqs, init, w = random_sequences(4, L, seed=2)
    loss, priorities, grads = agent.get_loss_and_gradients(seqs, init, w)
    _, after_burn_in = agent.get_q_values(seqs["states"][:, :BURN_IN], init)
    part = {k: v[:, BURN_IN:] for k, v in seqs.items()}
    loss0, priorities0, grads0 = plain.get_loss_and_gradients(part, after_burn_in, w)
    np.testing.assert_allclose(loss, loss0, rtol=1e-5)
    np.testing.assert_allclose(priorities, priorities0, rtol=1e-5)
    assert sorted(grads) == sorted(grads0) and any(np.abs(g).sum() > 0 for g in grads.values())
    for key in grads:
        np.testing.assert_allclose(grads[key], grads0[key], rtol=1e-4, atol=1e-7, err_msg=key)
    # The burn-in still shapes the state: other burn-in inputs give another loss.
    other = dict(seqs, states=seqs["states"].copy())
    other["states"][:, :BURN_IN] += 1.0
    assert not np.isclose(agent.get_loss_and_gradients(other, init, w)[0], loss)
    # Directly: no gradient reaches the burn-in inputs or the stored initial state (TF and PyTorch differentiate
    # the root's API method eagerly here; on JAX the gradients exist only inside the executor's program, and the
    # equality with the agent without burn-in above is the check).
    if backend == "jax":
        return
    burn_in, train = agent.learner.split_sequences(seqs)
    args = [train, init, w, burn_in["states"], burn_in["resets"]]
    for wrt in (3, 1):
        for grad in eager_input_gradients(backend, agent, args, wrt):
            np.testing.assert_array_equal(grad, 0.0)


def eager_input_gradients(backend, agent, args, wrt):
    """d loss / d args[wrt] (a leaf or tuple of leaves), running the built root's API method eagerly."""
    api = agent.root.get_loss_and_gradients
    if backend == "tf":
        @tf.function(autograph=False)  # The optimizer's tf.gradients needs a graph.
        def gradients(*tensors):
            with tf.GradientTape() as tape:
                tape.watch(tensors[wrt])
                loss = api(*tensors)[0]
            return tape.gradient(loss, tensors[wrt], unconnected_gradients=tf.UnconnectedGradients.ZERO)
        grads = gradients(*[tf.nest.map_structure(tf.constant, a) for a in args])
        return [g.numpy() for g in tf.nest.flatten(grads)]
    def to_torch(a):
        if isinstance(a, dict):
            return {k: torch.from_numpy(np.array(v)) for k, v in a.items()}
        if isinstance(a, tuple):
            return tuple(torch.from_numpy(np.array(x)) for x in a)
        return torch.from_numpy(np.array(a))
    tensors = [to_torch(a) for a in args]
    leaves = list(tensors[wrt]) if isinstance(tensors[wrt], tuple) else [tensors[wrt]]
    for leaf in leaves:
        leaf.requires_grad_(True)
    loss = api(*tensors)[0]
    if not loss.requires_grad:
        return [np.zeros(leaf.shape) for leaf in leaves]
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return [np.zeros(leaf.shape) if g is None else g.numpy() for g, leaf in zip(grads, leaves)]


# --- learning -----------------------------------------------------------------------------------------------
def train_config(backend, seed, max_steps, tmp_path, config="r2d2_cartpole"):
    """``rlgraph train configs/CONFIG.json`` in a fresh process with a step budget (machine-independent); the
    target is the config's greedy evaluation (CartPole: a 20-episode mean of 450, ``train_spec.eval_every_steps``)."""
    import subprocess
    import sys
    logdir = str(tmp_path / f"{config}-{backend}")
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", os.path.join(CONFIGS, f"{config}.json"), "--backend",
           backend, "--steps", str(max_steps), "--seed", str(seed), "--logdir", logdir]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(os.path.join(logdir, "summary.json")) as f:
        return json.load(f)


@pytest.mark.slow
def test_learns_catch_from_pixels(backend, tmp_path):
    """R2D2 learns from pixels (a CNN and an LSTM on stacked uint8 frames, as on Atari): Catch, where a random
    policy scores about -3.6 and the optimal one 5. Seed 1 reached the config's greedy target (4.5 over 20 games)
    in 33k env steps on JAX and on PyTorch; the budget is about 3x that."""
    summary = train_config(backend, seed=1, max_steps=100_000, tmp_path=tmp_path, config="r2d2_catch")
    assert summary["target_measured_on"] == "greedy evaluation"
    assert summary["steps_to_target"] is not None, summary
    assert summary["eval_mean_return"] >= 4.0, summary


@pytest.mark.slow
def test_learns_cartpole(backend, tmp_path):
    summary = train_config(backend, seed=1, max_steps=300_000, tmp_path=tmp_path)
    # Reached 450 in a greedy evaluation during training, and the final 20-episode evaluation agrees.
    assert summary["steps_to_target"] is not None, summary
    assert summary["eval_mean_return"] >= FINAL_EVAL_FLOOR, summary
