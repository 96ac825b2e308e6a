"""DQN and Ape-X agents: configs, models, schedules, n-step transitions, priorities, and learning."""
import json
import os

import numpy as np
import pytest

from rlgraph.agents import Agent, ApexAgent, DQNAgent
from rlgraph.cli import main as cli_main
from rlgraph.environments import VectorEnv
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from rlgraph.workers import VectorWorker
from small_configs import FINAL_EVAL_FLOOR

# The agent suites run on every graph backend (JAX too: rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
STATE, ACTION = FloatBox(shape=(4,)), IntBox(2)
SMALL = dict(network_spec=[{"type": "dense", "units": 16, "activation": "relu"}],
             memory_spec={"type": "prioritized-replay", "capacity": 500},
             update_spec={"batch_size": 8, "steps_before_update": 16, "update_interval": 4, "sync_interval": 20})


def config(name):
    with open(os.path.join(CONFIGS, f"{name}.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("name", ["dqn_cartpole", "apex_cartpole"])
def test_configs_build_and_act(backend, name):
    agent = Agent.from_spec(os.path.join(CONFIGS, f"{name}.json"), state_space=STATE, action_space=ACTION,
                            backend=backend)
    assert isinstance(agent, ApexAgent if name.startswith("apex") else DQNAgent)
    actions = agent.get_actions(np.zeros((3, 4), np.float32))
    assert actions.shape == (3,) and set(actions) <= {0, 1}


def test_config_errors_name_their_path():
    with pytest.raises(RLGraphSpecError, match=r"memory_spec\.capcity: unknown key 'capcity'"):
        Agent.from_spec(dict(SMALL, type="dqn", memory_spec={"type": "prioritized-replay", "capcity": 5}),
                        state_space=STATE, action_space=ACTION)
    with pytest.raises(RLGraphSpecError, match=r"update_spec\.batch_size: expected a positive int, got '64'"):
        Agent.from_spec(dict(SMALL, type="dqn", update_spec={"batch_size": "64"}), state_space=STATE,
                        action_space=ACTION)
    with pytest.raises(RLGraphSpecError, match=r"unknown Agent type 'dqm'.*Did you mean: DQNAgent"):
        Agent.from_spec(dict(SMALL, type="dqm"), state_space=STATE, action_space=ACTION)
    with pytest.raises(RLGraphSpecError, match=r"agent\.discont: unknown key 'discont'.*Did you mean 'discount'"):
        Agent.from_spec(dict(SMALL, type="dqn", discont=0.9), state_space=STATE, action_space=ACTION)
    with pytest.raises(RLGraphSpecError, match="discrete"):
        Agent.from_spec(dict(SMALL, type="dqn"), state_space=STATE, action_space=FloatBox(shape=(2,)))


def run_steps(agent, num_steps, seed=0):
    env = VectorEnv("CartPole-v1", num_envs=4, seed=seed)
    worker = VectorWorker(agent, env)
    return worker, worker.run(num_steps)


def test_store_load_round_trip_gives_identical_actions(backend, tmp_path):
    agent = Agent.from_spec(dict(SMALL, type="dqn"), state_space=STATE, action_space=ACTION, backend=backend)
    run_steps(agent, 200)
    states = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    greedy = agent.get_actions(states, explore=False)
    q = agent.get_q_values(states)
    agent.store_model(str(tmp_path / "m"))
    other = Agent.from_spec(dict(SMALL, type="dqn"), state_space=STATE, action_space=ACTION, backend=backend, seed=7)
    assert not np.allclose(other.get_q_values(states), q)
    other.load_model(str(tmp_path / "m"))
    np.testing.assert_array_equal(other.get_actions(states, explore=False), greedy)
    np.testing.assert_allclose(other.get_q_values(states), q, rtol=1e-6)
    assert other.timesteps == agent.timesteps
    different = Agent.from_spec(dict(SMALL, type="dqn", n_step=2), state_space=STATE, action_space=ACTION,
                                backend=backend)
    with pytest.raises(RLGraphError, match="another config"):
        different.load_model(str(tmp_path / "m"))


def test_apex_actor_epsilons_and_actor_priorities(backend):
    agent = Agent.from_spec(dict(SMALL, type="apex"), state_space=STATE, action_space=ACTION, backend=backend)
    states = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)
    agent.get_actions(states)
    expected = 0.4 ** (1 + 7 * np.arange(8) / 7)
    np.testing.assert_allclose(agent.actor.epsilons, expected, rtol=1e-6)
    records = dict(states=states, actions=np.arange(8) % 2, rewards=np.linspace(-1, 1, 8).astype(np.float32),
                   next_states=states[::-1].copy(), terminals=np.arange(8) % 3 == 0)
    # The actor's priority: |r + gamma * max_a Q(s', a) (0 if terminal) - Q(s, a)| + eps with its own network.
    q, q_next = agent.get_q_values(states), agent.get_q_values(records["next_states"])
    target = records["rewards"] + 0.99 * np.where(records["terminals"], 0.0, q_next.max(-1))
    td = target - q[np.arange(8), records["actions"]]
    # An actor process (role "actor", the learner's weights) sends its priorities with the items.
    actor = Agent.from_spec(dict(SMALL, type="apex"), state_space=STATE, action_space=ACTION, backend=backend,
                            role="actor", seed=3)
    actor.set_weights(agent.get_weights())
    items = actor.actor.process_items(dict(records))
    np.testing.assert_allclose(items["priorities"], np.abs(td) + 1e-6, rtol=1e-4, atol=1e-6)
    agent.learner.add_items(items)
    # The local actor shares the learner's graph: the learner computes the same priorities in its insert.
    local_items = agent.actor.process_items(dict(records))
    assert "priorities" not in local_items
    agent.learner.add_items(local_items)
    assert agent.learner.stored_records == 16
    stored = agent.root.memory.buffer.get_priorities(np.arange(16))
    # Stored priorities are (|TD| + eps) ** alpha, not the default max priority.
    np.testing.assert_allclose(stored, np.tile((np.abs(td) + 1e-6) ** 0.6, 2), rtol=1e-4)


@pytest.mark.parametrize("kind", ["dqn", "apex"])
def test_transitions_the_agent_did_not_act_on_are_observed_and_learned_from(backend, kind):
    """Demonstrations (no ``get_actions`` extras) enter the replay beside the agent's own steps and are learned
    from; only the agent's own steps count in the policy-lag figures."""
    agent = Agent.from_spec(dict(SMALL, type=kind), state_space=STATE, action_space=ACTION, backend=backend)
    rng = np.random.default_rng(0)
    states = rng.normal(size=(4, 4)).astype(np.float32)
    for _ in range(8):  # 32 demonstration transitions, two steps of each env apart.
        next_states = rng.normal(size=(4, 4)).astype(np.float32)
        agent.observe(states, rng.integers(0, 2, 4), np.ones(4, np.float32), next_states, np.zeros(4, bool))
        states = next_states
    assert agent.learner.stored_records > 0 and agent.ready_to_update()
    before = agent.get_weights()
    results = agent.update()
    assert np.isfinite(results["loss"]) and "policy_lag_mean" not in results
    assert any(not np.array_equal(before[k], v) for k, v in agent.get_weights().items())
    actions, extras = agent.get_actions(states, return_extras=True)  # The agent's own steps: their lags count.
    agent.observe(states, actions, np.ones(4, np.float32), states, np.zeros(4, bool), **extras)
    agent.observe(states, actions, np.ones(4, np.float32), states, np.zeros(4, bool), **extras)
    results = agent.update()
    assert results["policy_lag_mean"] == 0.0 and results["policy_lag_max"] == 0  # Acted on by the latest weights.


def test_train_resume_continues_step_count(tmp_path, capsys):
    cfg = dict(config("dqn_cartpole"), **SMALL)
    cfg["environment_spec"] = {"env_spec": "CartPole-v1", "num_envs": 4}
    cfg["train_spec"] = {"eval_episodes": 2, "chunk_steps": 400}
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    logdir = str(tmp_path / "run")
    assert cli_main(["train", str(path), "--backend", "pytorch", "--steps", "800", "--logdir", logdir]) == 0
    with open(os.path.join(logdir, "summary.json")) as f:
        first = json.load(f)
    assert first["env_steps"] == 800 and os.path.isfile(os.path.join(logdir, "learning_curve.png"))
    assert cli_main(["train", str(path), "--backend", "pytorch", "--steps", "1600", "--logdir", logdir,
                     "--resume"]) == 0
    with open(os.path.join(logdir, "summary.json")) as f:
        second = json.load(f)
    assert second["env_steps"] == 1600 and second["episodes"] > first["episodes"]
    capsys.readouterr()
    evaluations = {}
    for backend in ("pytorch", "tf"):  # Checkpoints are backend-neutral: TF evaluates the PyTorch run's greedy policy.
        assert cli_main(["evaluate", str(path), "--checkpoint", logdir, "--backend", backend, "--episodes", "2"]) == 0
        evaluations[backend] = json.loads(capsys.readouterr().out)
    assert evaluations["tf"] == evaluations["pytorch"]


@pytest.mark.parametrize("name", ["dqn_cartpole", "apex_cartpole"])
def test_local_updates_follow_the_configs_replay_ratio_when_a_vector_step_spans_several_intervals(name):
    # 16 environments and update_interval 4: 4 update rounds per vector step once learning has started, as
    # the distributed replay engine schedules them (one per update_interval env steps since the first).
    env = VectorEnv("CartPole-v1", num_envs=16, seed=0)
    agent = Agent.from_spec(dict(config(name), **SMALL), state_space=env.state_space,
                            action_space=env.action_space, backend="pytorch")
    worker, learner, anchor = VectorWorker(agent, env), agent.learner, None
    for _ in range(12):
        worker.run(16)
        if anchor is None and learner.updates:
            anchor = learner.timesteps
        if anchor is not None:
            rounds = (learner.timesteps - anchor) // SMALL["update_spec"]["update_interval"] + 1
            assert learner.updates == rounds * learner.spec["updates_per_interval"]
    assert anchor is not None and learner.updates >= 4 * 8


def test_cli_reports_bad_environment_id(tmp_path, capsys):
    cfg = dict(config("dqn_cartpole"), **SMALL)
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    assert cli_main(["train", str(path), "--env", "CartPol-v1", "--steps", "10", "--logdir", str(tmp_path)]) == 2
    assert "CartPole-v1" in capsys.readouterr().err


def solve(name, backend, seed, max_steps, tmp_path):
    """Trains with ``rlgraph train`` in a fresh process (one backend per process, as users run it).

    The budget is in environment steps, so the outcome does not depend on the machine's speed.
    """
    import subprocess
    import sys
    logdir = str(tmp_path / f"{name}-{backend}")
    cmd = [sys.executable, "-m", "rlgraph.cli", "train", os.path.join(CONFIGS, f"{name}.json"), "--backend", backend,
           "--steps", str(max_steps), "--seed", str(seed), "--logdir", logdir]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(os.path.join(logdir, "summary.json")) as f:
        return json.load(f)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dqn_cartpole", "apex_cartpole"])
def test_learns_cartpole(backend, name, tmp_path):
    summary = solve(name, backend, seed=1, max_steps=300_000, tmp_path=tmp_path)
    # Reached 450 in a greedy evaluation during training (confirmed over 40 episodes), and the final, independent
    # 20-episode evaluation agrees.
    assert summary["steps_to_target"] is not None, summary
    assert summary["eval_mean_return"] >= FINAL_EVAL_FLOOR, summary


@pytest.mark.parametrize("name", ["apex_pong", "apex_pong_42"])
def test_apex_pong_config_builds_and_steps(backend, name):
    pytest.importorskip("ale_py")
    cfg = config(name)
    cfg["memory_spec"]["capacity"] = 64
    cfg["update_spec"] = dict(cfg["update_spec"], batch_size=4, steps_before_update=8, update_interval=4)
    env = VectorEnv(cfg["environment_spec"]["env_spec"], num_envs=2, seed=0)
    agent = Agent.from_spec(cfg, state_space=env.state_space, action_space=env.action_space, backend=backend)
    out = VectorWorker(agent, env).run(16)
    assert out["env_steps"] == 16 and out["results"] and np.isfinite(out["results"][-1]["loss"])
