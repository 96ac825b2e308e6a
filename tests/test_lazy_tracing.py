"""TensorFlow traces each API method on its first call (not at build), the graph summaries of what was traced, and
the build runs that infer spaces without a loop or backward graph (LSTM, optimizer) on both backends."""
import json
import os
import threading

import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component
from rlgraph.components.layers.lstm_layer import LSTMLayer
from rlgraph.executors.graph_summary import write_graph_summaries
from rlgraph.spaces import BoolBox, FloatBox, Tuple
from rlgraph.tests import ComponentTest

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
STATES = FloatBox(shape=(3,), add_batch_rank=True)


class TwoMethods(Component):
    """Two API methods of one graph function each."""

    @rlgraph_api
    def double(self, x):
        return self._graph_fn_scale(x, 2.0)

    @rlgraph_api
    def negate(self, x):
        return self._graph_fn_scale(x, -1.0)

    @graph_fn
    def _graph_fn_scale(self, x, factor):
        return x * factor


def two_methods():
    return ComponentTest(TwoMethods(scope="two"), dict(x=STATES), backend="tf")


def test_tf_traces_an_api_method_on_its_first_call_only():
    test = two_methods()
    counts = test.executor.trace_counts
    assert counts["double"] == 0 and counts["negate"] == 0  # Nothing traced by the build.
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(test.executor.execute("double", x), 2 * x)
    np.testing.assert_allclose(test.executor.execute("double", x[:1]), 2 * x[:1])
    assert counts["double"] == 1 and counts["negate"] == 0
    test.executor.trace()  # Traces the rest, once.
    test.executor.trace()
    assert counts["double"] == 1 and counts["negate"] == 1
    np.testing.assert_allclose(test.executor.execute("negate", x), -x)
    assert counts["negate"] == 1


def test_tf_first_calls_from_threads_trace_once():
    test = two_methods()
    x = np.ones((4, 3), np.float32)
    results, errors = [], []

    def call():
        try:
            results.append(test.executor.execute("double", x))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and len(results) == 4
    assert test.executor.trace_counts["double"] == 1
    for r in results:
        np.testing.assert_allclose(r, 2 * x)


def test_graph_summaries_write_traced_methods_or_all(tmp_path):
    test = two_methods()
    test.executor.execute("double", np.ones((2, 3), np.float32))
    write_graph_summaries(test.executor, str(tmp_path / "traced"), trace=False)
    assert sorted(os.listdir(tmp_path / "traced" / "graphs")) == ["double"]
    assert test.executor.trace_counts["negate"] == 0
    write_graph_summaries(test.executor, str(tmp_path / "all"))  # Default: traces the rest first.
    assert sorted(os.listdir(tmp_path / "all" / "graphs")) == ["double", "negate", "variables"]
    write_graph_summaries(test.executor, str(tmp_path / "rest"), exclude={"double"})
    assert sorted(os.listdir(tmp_path / "rest" / "graphs")) == ["negate", "variables"]
    text = (tmp_path / "all" / "graph.txt").read_text()
    assert "double" in text and "negate" in text


def test_pytorch_trace_is_a_no_op(tmp_path):
    test = ComponentTest(TwoMethods(scope="two"), dict(x=STATES), backend="pytorch")
    test.executor.trace()
    write_graph_summaries(test.executor, str(tmp_path))
    assert (tmp_path / "graph.txt").exists() and not (tmp_path / "graphs").exists()


def test_training_run_writes_the_graphs_of_the_methods_it_used(tmp_path):
    """The first chunk ends before the first update: the update's graph is written at the end of the run; the
    update methods the run never called (a batch given from outside, gradients alone) are never traced."""
    from rlgraph.engines.runner import train
    with open(os.path.join(CONFIGS, "dqn_cartpole.json")) as f:
        config = json.load(f)
    config["update_spec"] = dict(config["update_spec"], steps_before_update=600)
    config["train_spec"] = dict(chunk_steps=500, eval_episodes=0, stop_at_target=False)
    summary = train(config, backend="tf", steps=1500, logdir=str(tmp_path), seed=0, progress=False)
    assert summary["updates"] > 0
    graphs = set(os.listdir(tmp_path / "graphs"))
    assert "update_from_memory" in graphs and "get_actions" in "".join(graphs), graphs
    assert "update_from_batch" not in graphs


# --- build runs: spaces without the loop or the backward graph ------------------------------------------------
@pytest.mark.parametrize("time_major", [True, False], ids=["time_major", "batch_major"])
def test_lstm_build_infers_the_spaces_its_calls_return(backend, time_major):
    units = 5
    state = Tuple(FloatBox(shape=(units,)), FloatBox(shape=(units,)), add_batch_rank=True)
    spaces = dict(inputs=FloatBox(shape=(3,), add_batch_rank=True, add_time_rank=True, time_major=time_major),
                  initial_state=state,
                  resets=BoolBox(add_batch_rank=True, add_time_rank=True, time_major=time_major))
    test = ComponentTest(LSTMLayer(units), spaces, backend=backend)
    outputs, out_state = [r.space for r in test.meta_graph.api["call"].outputs]
    assert outputs == FloatBox(shape=(units,), add_batch_rank=True, add_time_rank=True, time_major=time_major)
    assert out_state == Tuple(FloatBox(shape=(units,)), FloatBox(shape=(units,)), add_batch_rank=True)
    T, B = 4, 2
    shape = (T, B, 3) if time_major else (B, T, 3)
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    h0 = tuple(np.zeros((B, units), np.float32) for _ in range(2))
    resets = np.zeros(shape[:2], bool)
    out, (h, c) = test.executor.execute("call", x, h0, resets)
    assert out.shape == shape[:2] + (units,) and h.shape == c.shape == (B, units)
    assert np.all(np.isfinite(out)) and np.abs(out).sum() > 0  # The real loop ran.
    last = out[-1] if time_major else out[:, -1]
    np.testing.assert_allclose(h, last, rtol=1e-6)


def test_recurrent_update_learns_on_tf_after_a_build_without_gradients():
    """The TF build infers the update's spaces without a backward graph; the traced update still computes the
    gradients: one update changes every trainable weight of an R2D2 agent."""
    from rlgraph.agents.agent import Agent
    from rlgraph.spaces import IntBox
    with open(os.path.join(CONFIGS, "r2d2_cartpole.json")) as f:
        config = json.load(f)
    config["update_spec"] = dict(config["update_spec"], steps_before_update=200, batch_size=8)
    config["memory_spec"] = dict(config["memory_spec"], capacity=100)
    agent = Agent.from_spec(config, state_space=FloatBox(shape=(4,)), action_space=IntBox(2), backend="tf")
    before = agent.get_weights()
    assert agent.executor.trace_counts["update_from_sequences"] == 0
    rng = np.random.default_rng(0)
    states, internal = rng.normal(size=(16, 4)).astype(np.float32), None
    while not agent.ready_to_update():
        actions, extras = agent.get_actions(states, internal_states=internal, return_extras=True)
        nxt = rng.normal(size=(16, 4)).astype(np.float32)
        done = rng.random(16) < 0.05
        agent.observe(states, actions, np.ones(16, np.float32), nxt, done, np.zeros(16, bool), **extras)
        internal = agent.next_internal_states(extras, np.ones(16, np.float32), done)
        states = nxt
    results = agent.update()
    assert np.isfinite(results["loss"])
    after = agent.get_weights()
    changed = [k for k in before if not np.allclose(before[k], after[k])]
    assert changed == list(before), set(before) - set(changed)
    assert agent.executor.trace_counts["update_from_sequences"] == 1
    assert agent.executor.trace_counts["update_from_batch"] == 0
