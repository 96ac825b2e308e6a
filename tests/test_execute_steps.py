"""``GraphExecutor.execute_steps``: an API method once per step on rows of its batch, in one executor call.

APPO's learner takes all optimizer steps of an update in one such call. It must equal the steps taken one
call each (same minibatches from the same generator, same weights, same results), fall back to one call per
step where it cannot apply (samples past ``max_policy_lag``, minibatches of unequal size), run one
``execute`` per step under a device strategy with towers, and refuse rows that do not fit the batch.
"""
import json
import os

import numpy as np
import pytest

from rlgraph.agents import Agent
from rlgraph.agents.impala_learner import IMPALALearner
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.utils.errors import RLGraphAPIError

#: Executor tests (APPO's learner the client): their ``backend`` parametrization includes JAX, whose
#: ``execute_steps`` is one ``lax.scan`` (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


def appo(backend, recurrent=False, **changes):
    with open(os.path.join(CONFIGS, "appo_cartpole.json")) as f:
        config = json.load(f)
    config = {k: v for k, v in config.items() if k not in ("environment_spec", "train_spec", "description")}
    config["network_spec"] = [{"type": "dense", "units": 16, "activation": "tanh"}]
    config.update(num_epochs=4, num_minibatches=2)  # The tests count 4 x 2 optimizer steps per update.
    config["minibatch_unit"] = "trajectories"  # Minibatches of columns (``update``); samples: tests below.
    if recurrent:
        config["network_spec"].append({"type": "lstm", "units": 8})
    config.update(changes)
    return Agent.from_spec(config, state_space=FloatBox(shape=(4,)), action_space=IntBox(2), backend=backend, seed=5)


def batch(agent, t=6, b=8, version=0, seed=0):
    rng = np.random.default_rng(seed)
    unroll = dict(states=rng.normal(size=(t, b, 4)).astype(np.float32), actions=rng.integers(0, 2, (t, b)),
                  rewards=rng.normal(size=(t, b)).astype(np.float32), terminals=rng.random((t, b)) < 0.1,
                  truncation_values=np.zeros((t, b), np.float32),
                  behaviour_log_probs=np.full((t, b), np.log(0.5), np.float32),
                  behaviour_values=rng.normal(size=(t, b)).astype(np.float32))
    out = dict(unroll=unroll, bootstrap=dict(states=rng.normal(size=(b, 4)).astype(np.float32)),
               policy_versions=np.full((t, b), version, np.int64))
    if agent.recurrent:
        out["bootstrap"] = {k: v[None] for k, v in out["bootstrap"].items()}
        out["initial_internal_states"] = tuple(rng.normal(size=(b, 8)).astype(np.float32) for _ in range(2))
    return out


def count_calls(agent, name):
    """A counter of the executor calls of ``name`` (``execute_steps`` calls count as "steps:NAME")."""
    calls = []
    execute, execute_steps = agent.executor.execute, agent.executor.execute_steps

    def counting(method, *args, **kwargs):
        calls.append(method)
        return execute(method, *args, **kwargs)

    def counting_steps(method, *args, **kwargs):
        calls.append(f"steps:{method}")
        return execute_steps(method, *args, **kwargs)
    agent.executor.execute, agent.executor.execute_steps = counting, counting_steps
    return lambda: calls.count(name)


def assert_same_updates(fused, stepped, out_fused, out_stepped):
    """The two agents end with the same weights, and their updates returned the same results."""
    a, b = fused.executor.get_weights(trainable_only=False), stepped.executor.get_weights(trainable_only=False)
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-6, atol=1e-7, err_msg=key)
    for x, y in zip(out_fused, out_stepped):
        assert sorted(x) == sorted(y)
        for key in x:
            np.testing.assert_allclose(x[key], y[key], rtol=1e-5, atol=1e-7, err_msg=key)


def run_updates(agent, batches):
    return [agent.learner.update(b) for b in batches]


@pytest.mark.parametrize("recurrent", [False, True])
def test_fused_update_equals_one_call_per_step(backend, recurrent, monkeypatch):
    fused, stepped = appo(backend, recurrent), appo(backend, recurrent)
    stepped.executor.set_weights(fused.executor.get_weights(trainable_only=False))
    fused_calls, step_calls = count_calls(fused, "steps:update"), count_calls(stepped, "update")
    batches = [batch(fused, version=8 * i, seed=i) for i in range(3)]
    out_fused = run_updates(fused, batches)
    monkeypatch.setattr(IMPALALearner, "_in_one_call", lambda self, *args: False)
    out_stepped = run_updates(stepped, batches)
    assert fused_calls() == 3 and step_calls() == 3 * 4 * 2
    assert fused.learner.updates == stepped.learner.updates == 24
    assert_same_updates(fused, stepped, out_fused, out_stepped)
    # Each sample is learned from at lags 0..7 (one version per step), averaged.
    assert out_fused[0]["policy_lag_mean"] == pytest.approx(3.5) and out_fused[0]["policy_lag_max"] == 7


def test_sample_minibatches_in_one_call_per_epoch_equal_one_call_per_step(backend, monkeypatch):
    """Minibatches of samples: one ``calc_targets`` and one ``execute_steps`` per epoch, the same update as one
    ``update_samples`` call per step."""
    fused, stepped = appo(backend, minibatch_unit="samples"), appo(backend, minibatch_unit="samples")
    stepped.executor.set_weights(fused.executor.get_weights(trainable_only=False))
    fused_calls, targets_calls = count_calls(fused, "steps:update_samples"), count_calls(fused, "calc_targets")
    step_calls = count_calls(stepped, "update_samples")
    batches = [batch(fused, version=8 * i, seed=i) for i in range(3)]
    out_fused = run_updates(fused, batches)
    monkeypatch.setattr(IMPALALearner, "_in_one_call", lambda self, *args: False)
    out_stepped = run_updates(stepped, batches)
    assert fused_calls() == 3 * 4 and targets_calls() == 3 * 4 and step_calls() == 3 * 4 * 2
    assert fused.learner.updates == stepped.learner.updates == 24
    assert_same_updates(fused, stepped, out_fused, out_stepped)
    assert out_fused[0]["policy_lag_mean"] == pytest.approx(3.5) and out_fused[0]["policy_lag_max"] == 7


def test_sample_minibatches_past_the_lag_limit_are_dropped(backend):
    agent = appo(backend, minibatch_unit="samples", max_policy_lag=5)
    fused_calls, step_calls = count_calls(agent, "steps:update_samples"), count_calls(agent, "update_samples")
    out = agent.learner.update(batch(agent))
    # Epochs 1-3 (lags 0..5) in one call each; the last epoch's steps would learn at lag 6: all dropped.
    assert fused_calls() == 3 and step_calls() == 0
    assert out["dropped_samples"] == 2 * 24 and out["num_updates"] == 6 and out["policy_lag_max"] == 5


def test_samples_past_the_lag_limit_fall_back_to_one_call_per_step(backend):
    agent = appo(backend, max_policy_lag=5)
    fused_calls, step_calls = count_calls(agent, "steps:update"), count_calls(agent, "update")
    out = agent.learner.update(batch(agent))
    # Steps 6 and 7 would learn from lag 6 and 7 > 5: those minibatches are dropped, step by step.
    assert fused_calls() == 0 and step_calls() == 6
    assert out["dropped_samples"] == 2 * 4 * 6 and out["num_updates"] == 6


def test_minibatches_of_unequal_size_fall_back(backend):
    agent = appo(backend)
    fused_calls, step_calls = count_calls(agent, "steps:update"), count_calls(agent, "update")
    agent.learner.update(batch(agent, b=7))
    assert fused_calls() == 0 and step_calls() == 8


def test_towers_take_one_call_per_step(backend):
    """Under multi_device_sync the steps run as one towered ``execute`` each (the same update)."""
    agent = appo(backend, device_strategy={"type": "multi_device_sync", "devices": ["cpu", "cpu"]})
    plain = appo(backend)
    plain.executor.set_weights(agent.executor.get_weights(trainable_only=False))
    fused_calls, step_calls = count_calls(agent, "steps:update"), count_calls(agent, "update")
    data = batch(agent)
    agent.learner.update(data)
    plain.learner.update(data)
    assert fused_calls() == 1 and step_calls() == 8
    a, b = agent.get_weights(), plain.get_weights()
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_rows_that_do_not_fit_are_refused(backend):
    agent = appo(backend)
    data = batch(agent)
    args = (data["unroll"], data["bootstrap"], 0.1)
    before = agent.executor.get_weights(trainable_only=False)
    with pytest.raises(RLGraphAPIError, match=r"rows must lie in \[0, 8\).*from 0 to 8"):
        agent.executor.execute_steps("update", np.array([[0, 8]]), *args)
    with pytest.raises(RLGraphAPIError, match=r"rows must be an int array \[steps, rows per step\]"):
        agent.executor.execute_steps("update", np.array([0, 1]), *args)
    with pytest.raises(RLGraphAPIError, match=r"rows must be an int array"):
        agent.executor.execute_steps("update", np.array([[0.5, 1.0]]), *args)
    with pytest.raises(RLGraphAPIError, match=r"has no API method 'no_such'"):
        agent.executor.execute_steps("no_such", np.array([[0]]), *args)
    after = agent.executor.get_weights(trainable_only=False)
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])


def test_steps_of_an_acting_method_stack_its_outputs(backend):
    """A method without a step (acting): each step's outputs on its rows, stacked."""
    agent = appo(backend)
    states = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    rows = np.array([[0, 1, 2], [3, 4, 5], [5, 0, 1]])
    values = agent.executor.execute_steps("get_state_values", rows, states)
    assert values.shape == (3, 3)
    for k, r in enumerate(rows):
        np.testing.assert_allclose(values[k], agent.executor.execute("get_state_values", states[r]), rtol=1e-5,
                                   atol=1e-6)
