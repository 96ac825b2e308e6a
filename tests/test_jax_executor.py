"""The JAX graph executor: API methods as jitted programs over the executor's variables and
random key, against PyTorch and numpy; one trace per method; variables and random state round trips; the eager
fallback; the refusal of graphs whose graph functions have no JAX body."""
import os
import subprocess
import sys

import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component, NeuralNetwork, ReplayMemory
from rlgraph.components.distributions import Categorical
from rlgraph.components.helpers import VTraceFunction
from rlgraph.components.layers.conv2d_layer import Conv2DLayer
from rlgraph.components.layers.dense_layer import DenseLayer
from rlgraph.components.layers.lstm_layer import LSTMLayer
from rlgraph.components.policies import Policy
from rlgraph.components.preprocessing import PreprocessorStack
from rlgraph.spaces import BoolBox, FloatBox, IntBox, Tuple
from rlgraph.tests import ComponentTest, assert_equal_nested
from rlgraph.utils.backend import backend_available
from rlgraph.utils.errors import RLGraphBackendError, RLGraphRuntimeError

pytestmark = pytest.mark.skipif(not (backend_available("jax") and backend_available("torch")),
                                reason="needs JAX and PyTorch")

RNG = np.random.default_rng(34)


def on_both(component_fn, spaces, **kwargs):
    """The same component built on PyTorch and on JAX, the JAX one given PyTorch's weights."""
    torch_test = ComponentTest(component_fn(), spaces, backend="pytorch", **kwargs)
    jax_test = ComponentTest(component_fn(), spaces, backend="jax", **kwargs)
    jax_test.executor.set_weights(torch_test.executor.get_weights(trainable_only=False))
    return torch_test, jax_test


def randomize(test_pair, seed=0):
    """Random weights (biases included) on both; returns them by name relative to the root."""
    torch_test, jax_test = test_pair
    rng = np.random.default_rng(seed)
    weights = {k: (rng.normal(size=v.shape) * 0.7).astype(v.dtype)
               for k, v in torch_test.executor.get_weights().items()}
    for test in test_pair:
        test.executor.set_weights(weights)
    root = torch_test.component.global_scope + "/"
    return {k[len(root):]: v for k, v in weights.items()}


def same(test_pair, call, decimals=5):
    """Runs ``call`` on both; asserts the outputs agree; returns JAX's."""
    torch_out, jax_out = (t.test(call) for t in test_pair)
    assert_equal_nested(jax_out, torch_out, decimals, path=f"{call[0]} (jax vs pytorch)")
    return jax_out


# --- layers --------------------------------------------------------------------------------------------------
def test_dense_and_conv2d_match_pytorch_and_numpy():
    pair = on_both(lambda: DenseLayer(units=3, activation=None), dict(inputs=FloatBox(shape=(4,), add_batch_rank=True)))
    w = randomize(pair)
    x = RNG.normal(size=(5, 4)).astype(np.float32)
    out = same(pair, ("call", [x]))
    np.testing.assert_allclose(out, x @ w["kernel"] + w["bias"], rtol=1e-5, atol=1e-5)
    assert out.dtype == np.float32 and out.flags.writeable

    pair = on_both(lambda: Conv2DLayer(filters=2, kernel_size=3, strides=2, padding="same", activation=None),
                   dict(inputs=FloatBox(shape=(7, 6, 2), add_batch_rank=True)))
    randomize(pair)
    assert same(pair, ("call", [RNG.normal(size=(3, 7, 6, 2)).astype(np.float32)])).shape == (3, 4, 3, 2)


def np_lstm(x, h, c, resets, kernel, recurrent_kernel, bias, forget_bias=1.0):
    """Time-major reference unroll; ``resets[t]`` zeroes the state before step t."""
    outputs = []
    sigmoid = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    for t in range(x.shape[0]):
        keep = ~resets[t][:, None]
        h, c = h * keep, c * keep
        i, f, g, o = np.split(x[t] @ kernel + h @ recurrent_kernel + bias, 4, axis=-1)
        c = sigmoid(f + forget_bias) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs), h, c


def test_lstm_with_resets_matches_pytorch_and_numpy():
    units, T, B = 3, 6, 4
    spaces = dict(inputs=FloatBox(shape=(2,), add_batch_rank=True, add_time_rank=True),  # Batch-major.
                  initial_state=Tuple(FloatBox(shape=(units,)), FloatBox(shape=(units,)), add_batch_rank=True),
                  resets=BoolBox(add_batch_rank=True, add_time_rank=True))
    pair = on_both(lambda: LSTMLayer(units, bias_initializer="normal"), spaces)
    x = RNG.normal(size=(B, T, 2)).astype(np.float32)
    h0, c0 = (RNG.normal(size=(B, units)).astype(np.float32) for _ in range(2))
    resets = np.zeros((B, T), bool)
    resets[1, 3] = resets[3, 2] = resets[2, 0] = True  # Inside the sequence and at its start.
    outputs, (h, c) = same(pair, ("call", [x, (h0, c0), resets]))
    w = pair[1].read_variable_values("lstm/kernel", "lstm/recurrent-kernel", "lstm/bias")
    ref, ref_h, ref_c = np_lstm(x.transpose(1, 0, 2), h0, c0, resets.T, *w)
    np.testing.assert_allclose(outputs, ref.transpose(1, 0, 2), atol=1e-5)
    np.testing.assert_allclose(h, ref_h, atol=1e-5)
    np.testing.assert_allclose(c, ref_c, atol=1e-5)


# --- preprocessors, policies, distributions, RL maths ------------------------------------------------------------
def test_stateful_preprocessor_stack_matches_pytorch():
    """Frame stacking assigns variables inside the program: JAX's functional updates give PyTorch's results."""
    spec = [{"type": "grayscale", "keep_rank": True},
            {"type": "image_resize", "width": 4, "height": 3, "interpolation": "area"},
            {"type": "divide", "divisor": 255},
            {"type": "frame-stack", "sequence_length": 2, "batch_size": 2, "add_rank": False}]
    space = FloatBox(low=0.0, high=255.0, shape=(6, 8, 3), add_batch_rank=True)
    pair = on_both(lambda: PreprocessorStack(preprocessing_spec=spec), dict(inputs=space))
    frames = [RNG.uniform(0, 255, size=(2, 6, 8, 3)).astype(np.float32) for _ in range(3)]
    first = same(pair, ("preprocess", [frames[0]]))
    second = same(pair, ("preprocess", [frames[1]]))
    np.testing.assert_allclose(second[..., 0], first[..., 1], atol=1e-6)  # The older frame moved over.
    same(pair, ("reset", []))
    same(pair, ("preprocess", [frames[2]]))
    assert pair[1].executor.trace_counts["preprocess"] == 1  # The variables' new values keep their types.


def np_log_softmax(logits):
    z = logits - logits.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_policy_greedy_actions_and_log_probs_match_pytorch_and_numpy():
    net = [{"type": "dense", "units": 8, "activation": None}]
    states = FloatBox(shape=(5,), add_batch_rank=True)
    pair = on_both(lambda: Policy(net, IntBox(3)), dict(nn_inputs=states, actions=IntBox(3, add_batch_rank=True)))
    w = randomize(pair)
    x = RNG.normal(size=(6, 5)).astype(np.float32)
    logits = (x @ w["neural-network/dense/kernel"] + w["neural-network/dense/bias"]) @ w["action-adapter/kernel"] \
        + w["action-adapter/bias"]
    greedy = same(pair, ("get_deterministic_action", [x]))
    np.testing.assert_array_equal(greedy["action"], logits.argmax(-1))
    actions = np.array([0, 1, 2, 2, 1, 0], np.int32)
    out = same(pair, ("get_log_likelihood", [x, actions]))
    np.testing.assert_allclose(out["log_likelihood"], np.take_along_axis(np_log_softmax(logits), actions[:, None],
                                                                         -1)[:, 0], atol=1e-5)
    # ``deterministic`` is outside the input spaces: a constant of the program, one program per value.
    jax_exec = pair[1].executor
    np.testing.assert_array_equal(jax_exec.execute("get_action", x, deterministic=True)["action"], greedy["action"])
    jax_exec.execute("get_action", x, deterministic=False)
    jax_exec.execute("get_action", x, deterministic=False)
    assert jax_exec.trace_counts["get_action"] == 2


def test_sampling_draws_from_the_executors_key_stream():
    logits = FloatBox(shape=(4,), add_batch_rank=True)
    test = ComponentTest(Categorical(), dict(parameters=logits), backend="jax", seed=4,
                         api_methods=["sample_stochastic"])
    probs_logits = np.array([1.0, 0.0, -1.0, 2.0], np.float32)
    batch = np.broadcast_to(probs_logits, (6000, 4)).copy()
    state = test.executor.get_rng_state()
    samples = test.test(("sample_stochastic", [batch]))
    np.testing.assert_allclose(np.bincount(samples, minlength=4) / len(samples), np.exp(np_log_softmax(probs_logits)),
                               atol=0.025)
    again = test.test(("sample_stochastic", [batch]))
    assert (again != samples).mean() > 0.3  # The key moved on.
    test.executor.set_rng_state(state)
    np.testing.assert_array_equal(test.test(("sample_stochastic", [batch])), samples)
    assert test.executor.trace_counts["sample_stochastic"] == 1


def test_v_trace_matches_pytorch():
    T, B = 7, 4
    seq, batch = FloatBox(add_batch_rank=True, add_time_rank=True, time_major=True), FloatBox(add_batch_rank=True)
    spaces = dict(log_probs_target=seq, log_probs_behaviour=seq, discounts=seq, rewards=seq, values=seq,
                  bootstrap_values=batch)
    pair = on_both(lambda: VTraceFunction(rho_bar=1.5, rho_bar_pg=0.8, c_bar=0.7, lambda_=0.9), spaces)
    behaviour = RNG.normal(size=(T, B)).astype(np.float32)
    target = (behaviour + RNG.uniform(-1.5, 1.5, size=(T, B))).astype(np.float32)
    discounts = (0.9 * (RNG.random((T, B)) > 0.25)).astype(np.float32)
    rewards, values = (RNG.normal(size=(T, B)).astype(np.float32) for _ in range(2))
    same(pair, ("calc_v_trace_values", [target, behaviour, discounts, rewards, values,
                                        RNG.normal(size=B).astype(np.float32)]))


# --- memories and the eager fallback ---------------------------------------------------------------------------
class Demo(Component):
    """A replay memory and a network (as ``rlgraph demo``)."""

    def __init__(self):
        self.network = NeuralNetwork({"type": "dense", "units": 2, "activation": None})
        self.memory = ReplayMemory(8)
        super().__init__(self.network, self.memory, scope="demo")

    @rlgraph_api
    def observe(self, states):
        return self.memory.insert_records(states)

    @rlgraph_api
    def sample_and_evaluate(self, num_records):
        return self.network.call(self.memory.get_records(num_records))

    @rlgraph_api
    def evaluate(self, states):
        return self.network.call(states)


def test_replay_insert_and_sample_compile():
    """Sizes from static shapes stay static and ``int`` arguments are constants: a replay's insert and sample are
    programs (one per batch size / number of records)."""
    test = ComponentTest(Demo(), dict(states=FloatBox(shape=(3,), add_batch_rank=True), num_records=int),
                         backend="jax")
    states = np.arange(15, dtype=np.float32).reshape(5, 3)
    test.test(("observe", [states]))
    stored = test.read_variable_values(test.component.memory)
    np.testing.assert_array_equal(stored["demo/replay-memory/storage"][:5], states)
    assert int(stored["demo/replay-memory/size"]) == 5
    w = test.executor.get_weights()
    kernel, bias = w["demo/neural-network/dense/kernel"], w["demo/neural-network/dense/bias"]
    rows = {tuple(np.round(r, 4)) for r in states @ kernel + bias}
    for _ in range(2):
        out = test.test(("sample_and_evaluate", [4]))
        assert out.shape == (4, 2) and all(tuple(np.round(r, 4)) in rows for r in out)
    with pytest.raises(RLGraphRuntimeError, match="more records than the memory holds"):
        test.test(("sample_and_evaluate", [6]))
    np.testing.assert_allclose(test.test(("evaluate", [states])), states @ kernel + bias, rtol=1e-5, atol=1e-5)
    assert not test.executor.eager_methods
    assert dict(test.executor.trace_counts) == {"observe": 1, "sample_and_evaluate": 2, "evaluate": 1}


class Positives(Component):
    """Returns the positive entries of its input: an output size only the values tell."""

    def __init__(self):
        super().__init__(scope="positives")

    @rlgraph_api
    def positives(self, x):
        return self._graph_fn_positives(x)

    @graph_fn
    def _graph_fn_positives(self, x):
        (out,) = self.ops.host_call(lambda a: [a[a > 0]], [x], [(np.float32, (None,))])
        return out


def test_a_method_with_an_unknown_output_size_runs_eagerly():
    test = ComponentTest(Positives(), dict(x=FloatBox(add_batch_rank=True)), backend="jax")
    x = np.array([1.0, -2.0, 3.0, 0.0], np.float32)
    np.testing.assert_array_equal(test.test(("positives", [x])), [1.0, 3.0])
    np.testing.assert_array_equal(test.test(("positives", [-x])), [2.0])
    assert test.executor.eager_methods == {"positives"}


# --- programs, state, checks -------------------------------------------------------------------------------------
class Accumulator(Component):
    """Adds the sum of its non-negative inputs to a variable; returns the new total."""

    def __init__(self):
        super().__init__(scope="accumulator")
        self.total = None

    def create_variables(self, input_spaces, action_space=None):
        self.total = self.get_variable("total", shape=(), initializer="zeros", trainable=False)

    @rlgraph_api
    def add(self, x):
        return self._graph_fn_add(x)

    @graph_fn
    def _graph_fn_add(self, x):
        ops = self.ops
        if not self.in_build_run:  # The build runs on random samples.
            ops.check(ops.all(x >= 0.0), "x must be >= 0")
        return ops.assign(self.total, self.total + ops.sum(x))


def test_one_trace_per_signature_state_and_failed_checks(tmp_path):
    test = ComponentTest(Accumulator(), dict(x=FloatBox(add_batch_rank=True)), backend="jax")
    for _ in range(3):
        total = test.test(("add", [np.ones(4, np.float32)]))
    assert float(total) == 12.0 and test.executor.trace_counts["add"] == 1
    test.test(("add", [np.ones(2, np.float32)]))  # A new batch size: XLA's shapes are static, one more trace.
    assert test.executor.trace_counts["add"] == 2
    # A failed check fails the whole call: the variable keeps its value.
    with pytest.raises(RLGraphRuntimeError, match="x must be >= 0"):
        test.test(("add", [np.array([1.0, -1.0, 2.0, 0.0], np.float32)]))
    assert float(test.read_variable_values("accumulator/total")) == 14.0

    test.executor.store_model(str(tmp_path / "model"))
    test.test(("add", [np.ones(4, np.float32)]))
    test.executor.load_model(str(tmp_path / "model"))
    assert float(test.read_variable_values("accumulator/total")) == 14.0
    assert float(test.test(("add", [np.ones(4, np.float32)]))) == 18.0  # The program reads the restored value.
    # Models are backend-neutral: one stored by PyTorch loads here, with its values.
    torch_test = ComponentTest(Accumulator(), dict(x=FloatBox(add_batch_rank=True)), backend="pytorch")
    torch_test.test(("add", [np.full(4, 0.5, np.float32)]))
    torch_test.executor.store_model(str(tmp_path / "torch"))
    test.executor.load_model(str(tmp_path / "torch"))
    assert float(test.read_variable_values("accumulator/total")) == 2.0


# --- the refusal -------------------------------------------------------------------------------------------------
class TorchAndTFOnly(Component):
    """A graph function written per backend without a JAX body (a user's own, written for TF and PyTorch)."""

    def __init__(self):
        super().__init__(scope="per-backend")
        self.network = NeuralNetwork({"type": "dense", "units": 1})
        self.add_components(self.network)

    @rlgraph_api
    def double(self, x):
        return self._graph_fn_double(self.network.call(x))

    @rlgraph_api
    def predict(self, x):
        return self.network.call(x)

    @graph_fn(backend="tf")
    def _graph_fn_double(self, x):
        return x * 2.0

    @graph_fn(backend="pytorch")
    def _graph_fn_double(self, x):
        return x * 2.0


def test_a_graph_function_without_a_jax_body_is_refused_saying_what_to_write():
    spaces = dict(x=FloatBox(shape=(3,), add_batch_rank=True))
    with pytest.raises(RLGraphBackendError) as info:
        ComponentTest(TorchAndTFOnly(), spaces, backend="jax")
    message = str(info.value)
    assert "'per-backend'" in message and "_graph_fn_double" in message and 'graph_fn(backend="jax")' in message
    assert "\n" not in message
    # The part without it builds and runs (an actor's build).
    test = ComponentTest(TorchAndTFOnly(), spaces, backend="jax", api_methods=["predict"])
    assert test.test(("predict", [np.ones((2, 3), np.float32)])).shape == (2, 1)


def test_cli_takes_backend_jax():
    from rlgraph.cli import main
    with pytest.raises(SystemExit) as info:  # Parsed (no "invalid choice"); --help ends the run.
        main(["demo", "--backend", "jax", "--help"])
    assert info.value.code == 0


def _cache_dir_after_a_build(env):
    code = ("import jax, numpy as np; from rlgraph.components.layers import DenseLayer; from rlgraph.spaces import "
            "FloatBox; from rlgraph.tests import ComponentTest; "
            "t = ComponentTest(DenseLayer(3), dict(inputs=FloatBox(shape=(4,), add_batch_rank=True)), backend='jax'); "
            "t.test(('call', [np.ones((2, 4), np.float32)])); print(jax.config.jax_compilation_cache_dir)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, **env))
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_compilation_cache_is_on_in_its_directory_and_can_be_turned_off(tmp_path):
    assert _cache_dir_after_a_build({"RLGRAPH_JAX_CACHE_DIR": str(tmp_path / "cache")}) == str(tmp_path / "cache")
    assert _cache_dir_after_a_build({"RLGRAPH_JAX_CACHE_DIR": "none"}) == "None"
