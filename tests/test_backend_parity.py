"""Backend parity: library components and the algorithm root components give the same numbers on TF and PyTorch.

Each test builds a fresh component on both backends with the same seed (so with the same initial weights),
feeds both the same inputs and asserts that the outputs agree; where a closed form exists, both are also
checked against a numpy reference computed here, independent of the components' code.
"""
import math

import numpy as np
import pytest

from rlgraph import rlgraph_api
from rlgraph.components import (ActivationLayer, Clip, Component, ContainerMerger, ContainerSplitter, ConvertType,
                                Exponential, FIFOQueue, Linear, Multiply, ReplayMemory, Transpose)
from rlgraph.components.algorithms.apex_algorithm_component import ApexAlgorithmComponent
from rlgraph.components.algorithms.appo_algorithm_component import APPOAlgorithmComponent
from rlgraph.components.algorithms.dqn_algorithm_component import DQNAlgorithmComponent
from rlgraph.components.algorithms.impala_algorithm_component import IMPALAAlgorithmComponent
from rlgraph.components.algorithms.r2d2_algorithm_component import R2D2AlgorithmComponent
from rlgraph.components.policies.actor_critic_policy import ActorCriticPolicy
from rlgraph.executors import GraphExecutor
from rlgraph.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple
from rlgraph.tests import ComponentTest, assert_equal_nested, run_on_backends
from rlgraph.utils.backend import backend_available

BACKENDS = ("tf", "pytorch")
SEED = 10

pytestmark = pytest.mark.skipif(not all(backend_available(b) for b in BACKENDS),
                                reason="backend parity needs both TensorFlow and PyTorch")


def rng(seed=0):
    return np.random.default_rng(seed)


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, path="outputs"):
    """Nested (dicts, tuples, arrays) comparison with a relative tolerance; dtypes kinds must agree."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), f"{path}: keys {actual!r} vs {expected!r}"
        for k in expected:
            assert_close(actual[k], expected[k], rtol, atol, f"{path}[{k!r}]")
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), f"{path}: {actual!r}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, rtol, atol, f"{path}[{i}]")
    else:
        a, e = np.asarray(actual), np.asarray(expected)
        assert a.shape == e.shape, f"{path}: shape {a.shape} vs {e.shape}"
        if e.dtype.kind in "fc" or a.dtype.kind in "fc":
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=path)
        else:
            np.testing.assert_array_equal(a, e, err_msg=path)


# ===================================================================================== library components


class ActivationsRoot(Component):
    """One ActivationLayer per activation name, so that one build per backend covers them all."""

    NAMES = ("linear", "relu", "tanh", "sigmoid", "elu", "selu", "softplus", "swish", "gelu", "leaky_relu",
             "softmax")

    def __init__(self):
        self.layers = {name: ActivationLayer(name, scope=name.replace("_", "-")) for name in self.NAMES}
        super().__init__(*self.layers.values(), scope="activations")

    @rlgraph_api
    def call_all(self, inputs):
        return {name: layer.call(inputs) for name, layer in self.layers.items()}


def numpy_activations(x):
    x = x.astype(np.float64)
    sigmoid = 1.0 / (1.0 + np.exp(-x))
    elu = np.where(x > 0, x, np.expm1(x))
    selu_alpha, selu_scale = 1.6732632423543772, 1.0507009873554805
    erf = np.vectorize(math.erf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return {"linear": x, "relu": np.maximum(x, 0.0), "tanh": np.tanh(x), "sigmoid": sigmoid, "elu": elu,
            "selu": selu_scale * np.where(x > 0, x, selu_alpha * np.expm1(x)), "softplus": np.log1p(np.exp(x)),
            "swish": x * sigmoid, "gelu": 0.5 * x * (1.0 + erf(x / math.sqrt(2.0))),
            "leaky_relu": np.where(x > 0, x, 0.2 * x), "softmax": e / e.sum(-1, keepdims=True)}


def test_activation_layer_parity():
    x = (rng(1).normal(size=(6, 5)) * 3).astype(np.float32)
    results = run_on_backends(ActivationsRoot, dict(inputs=FloatBox(shape=(5,), add_batch_rank=True)),
                              [("call_all", [x])])
    reference = numpy_activations(x)
    for backend in BACKENDS:
        assert_close(results[backend][0], reference, rtol=1e-5, atol=1e-6, path=f"{backend} vs numpy")


def test_actor_critic_policy_parity():
    hidden_units, num_actions = 8, 3
    spaces = dict(nn_inputs=FloatBox(shape=(4,), add_batch_rank=True), actions=IntBox(num_actions, add_batch_rank=True))
    x = rng(2).normal(size=(6, 4)).astype(np.float32)
    actions = np.array([0, 1, 2, 2, 1, 0], np.int32)

    def make():
        return ActorCriticPolicy([{"type": "dense", "units": hidden_units, "activation": "tanh"}],
                                 action_space=IntBox(num_actions))

    outputs, weights = {}, {}
    for backend in BACKENDS:
        test = ComponentTest(make(), spaces, backend=backend, seed=SEED)
        weights[backend] = test.executor.get_weights()
        outputs[backend] = dict(evaluated=test.test(("evaluate_actions", [x, actions])),
                                value=test.test(("get_state_value", [x])),
                                greedy=test.test(("get_action_and_value", [x, None, True])))
        # Sampled actions come from each backend's own generator: only their range and consistency compare.
        sampled = test.test(("get_action_and_value", [x]))
        assert sampled["action"].shape == (6,) and set(sampled["action"].tolist()) <= set(range(num_actions))
        np.testing.assert_allclose(sampled["value"], outputs[backend]["value"]["value"], rtol=1e-6)
        test.terminate()
    assert_equal_nested(weights["pytorch"], weights["tf"])  # Same initial weights by construction.
    assert_close(outputs["pytorch"], outputs["tf"], path="pytorch vs tf")

    # numpy reference: dense(tanh) -> linear action adapter (logits) and linear value head.
    w = {k.split("/", 1)[1]: v.astype(np.float64) for k, v in weights["tf"].items()}
    hidden = np.tanh(x @ w["neural-network/dense/kernel"] + w["neural-network/dense/bias"])
    logits = hidden @ w["action-adapter/kernel"] + w["action-adapter/bias"]
    log_p = logits - logits.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    value = (hidden @ w["value-head/kernel"] + w["value-head/bias"])[:, 0]
    expected = dict(log_likelihood=log_p[np.arange(6), actions], entropy=-(np.exp(log_p) * log_p).sum(-1),
                    value=value)
    for backend in BACKENDS:
        out = outputs[backend]
        assert_close(out["evaluated"], expected, path=f"{backend} evaluate_actions vs numpy")
        assert_close(out["value"]["value"], value, path=f"{backend} get_state_value vs numpy")
        np.testing.assert_array_equal(out["greedy"]["action"], logits.argmax(-1))
        assert_close(out["greedy"]["log_likelihood"], log_p.max(-1), path=f"{backend} greedy log-likelihood")


def test_clip_parity():
    space = Dict(a=FloatBox(shape=(3,)), b=IntBox(low=-100, high=100, shape=(2,)), add_batch_rank=True)
    x = {"a": (rng(3).normal(size=(5, 3)) * 2).astype(np.float32),
         "b": rng(3).integers(-100, 100, size=(5, 2)).astype(np.int32)}
    results = run_on_backends(lambda: Clip(-1.5, 2.7), dict(inputs=space), [("preprocess", [x])])
    # Integer inputs: the bounds are rounded inward (ceil(-1.5) = -1, floor(2.7) = 2), the dtype kept.
    reference = {"a": np.clip(x["a"], -1.5, 2.7), "b": np.clip(x["b"], -1, 2).astype(np.int32)}
    for backend in BACKENDS:
        out = results[backend][0]
        assert_close(out, reference, path=f"{backend} vs np.clip")
        assert out["b"].dtype == np.int32 and out["a"].dtype == np.float32


class MergeRoot(Component):
    def __init__(self, merger):
        self.merger = merger
        super().__init__(merger, scope="merge-root")

    @rlgraph_api
    def merge(self, a, b):
        return self.merger.merge(a, b)


class SplitRoot(Component):
    def __init__(self, splitter):
        self.splitter = splitter
        super().__init__(splitter, scope="split-root")

    @rlgraph_api
    def split(self, inputs):
        return self.splitter.split(inputs)


def test_container_merger_parity():
    spaces = dict(a=FloatBox(shape=(2,), add_batch_rank=True), b=IntBox(5, add_batch_rank=True))
    a, b = rng(4).normal(size=(3, 2)).astype(np.float32), np.array([4, 0, 2], np.int32)
    merged = run_on_backends(lambda: MergeRoot(ContainerMerger("x", "y")), spaces, [("merge", [a, b])])
    for backend in BACKENDS:
        assert_equal_nested(merged[backend][0], {"x": a, "y": b})
    merged = run_on_backends(lambda: MergeRoot(ContainerMerger(2, merge_tuples=True)), spaces, [("merge", [a, b])])
    for backend in BACKENDS:
        assert_equal_nested(merged[backend][0], (a, b))


def test_container_splitter_parity():
    space = Dict(obs=FloatBox(shape=(3,)), prev=Dict(reward=FloatBox(), action=IntBox(4)),
                 pair=Tuple(FloatBox(), BoolBox()), add_batch_rank=True)
    x = space.sample(4)
    results = run_on_backends(lambda: SplitRoot(ContainerSplitter("prev/reward", "obs", "pair/1", "prev/action")),
                              dict(inputs=space), [("split", [x])])
    for backend in BACKENDS:
        assert_equal_nested(results[backend][0], (x["prev"]["reward"], x["obs"], x["pair"][1], x["prev"]["action"]))


@pytest.mark.parametrize("to_dtype", ["int32", "float32", "bool", "uint8"])
def test_convert_type_parity(to_dtype):
    space = Dict(f=FloatBox(shape=(4,)), i=IntBox(low=0, high=256, shape=(2,)), add_batch_rank=True)
    x = {"f": np.array([[-2.7, -0.5, 0.0, 3.9], [1.2, -1.0, 0.4, 250.5]], np.float32),
         "i": np.array([[0, 7], [200, 1]], np.int32)}
    if to_dtype == "uint8":  # Out-of-range float -> uint8 casts are backend-defined; keep within [0, 255].
        x["f"] = np.abs(x["f"])
    results = run_on_backends(lambda: ConvertType(to_dtype), dict(inputs=space), [("preprocess", [x])])
    # numpy: floats to integers truncate toward zero; to bool: non-zero is True.
    reference = {k: (v != 0) if to_dtype == "bool" else v.astype(to_dtype) for k, v in x.items()}
    for backend in BACKENDS:
        out = results[backend][0]
        assert_equal_nested(out, reference, path=f"{backend} vs numpy astype")
        assert all(out[k].dtype == np.dtype(to_dtype) for k in out)


@pytest.mark.parametrize("make, formula", [
    (lambda: Exponential(1.0, 0.05, decay_rate=0.1, num_decays=2.0),
     lambda t: 0.05 + (1.0 - 0.05) * 0.1 ** (t * 2.0)),
    (lambda: Linear(1.0, 0.02), lambda t: 1.0 + (0.02 - 1.0) * t),
], ids=["exponential", "linear"])
def test_time_dependent_parameter_parity(make, formula):
    times = np.array([-0.5, 0.0, 0.1, 0.25, 0.5, 0.9, 1.0, 1.7], np.float32)  # Clipped into [0, 1].
    batch = run_on_backends(make, dict(time_percentage=FloatBox(add_batch_rank=True)), [("get", [times])])
    # A plain Python float, as optimizers and explorations pass the training progress.
    scalars = run_on_backends(make, dict(time_percentage=float), [("get", [float(t)]) for t in times])
    reference = formula(np.clip(times.astype(np.float64), 0.0, 1.0))
    for backend in BACKENDS:
        assert_close(batch[backend][0], reference, rtol=1e-6, path=f"{backend} batch vs formula")
        assert_close(np.array([float(r) for r in scalars[backend]]), reference, rtol=1e-6,
                     path=f"{backend} one by one vs formula")


def test_multiply_parity():
    space = Dict(f=FloatBox(shape=(3,)), i=IntBox(low=-50, high=50, shape=(2,)), add_batch_rank=True)
    x = {"f": rng(5).normal(size=(4, 3)).astype(np.float32), "i": rng(5).integers(-50, 50, (4, 2)).astype(np.int32)}
    results = run_on_backends(lambda: Multiply(-2.5), dict(inputs=space), [("preprocess", [x])])
    reference = {"f": x["f"] * np.float32(-2.5), "i": x["i"].astype(np.float32) * np.float32(-2.5)}
    for backend in BACKENDS:
        out = results[backend][0]
        assert_close(out, reference, rtol=1e-6, path=f"{backend} vs numpy")
        assert out["i"].dtype == np.float32  # Integer inputs become float32.


@pytest.mark.parametrize("time_rank", [False, True])
def test_transpose_parity(time_rank):
    space = FloatBox(shape=(2, 3, 4), add_batch_rank=True, add_time_rank=time_rank)
    x = rng(6).normal(size=((5, 3) if time_rank else (5,)) + (2, 3, 4)).astype(np.float32)
    results = run_on_backends(lambda: Transpose([2, 0, 1]), dict(inputs=space), [("preprocess", [x])])
    lead = x.ndim - 3
    reference = np.transpose(x, tuple(range(lead)) + tuple(lead + a for a in (2, 0, 1)))
    for backend in BACKENDS:
        assert_equal_nested(results[backend][0], reference, path=f"{backend} vs np.transpose")


MEMORY_RECORDS = Dict(states=FloatBox(shape=(2,)), actions=IntBox(10 ** 6), add_batch_rank=True)


def memory_records(start, n):
    """Records whose 'actions' are their ids; 'states' = (id, -id), so every row can be checked on its own."""
    ids = np.arange(start, start + n)
    return {"states": np.stack([ids, -ids], axis=1).astype(np.float32), "actions": ids.astype(np.int32)}


def test_fifo_queue_parity():
    # FIFO order makes every output comparable: both backends and a plain Python list must agree exactly.
    calls, reference, expected, start = [], [], [], 0
    for put, get in ((5, 3), (4, 2), (2, 6), (7, 5)):  # Wraps around the ring (capacity 8) several times.
        calls += [("insert_records", [memory_records(start, put)]), ("get_records", [get]), ("get_size",)]
        reference.extend(range(start, start + put))
        start += put
        expected += [None, reference[:get], len(reference) - get]
        del reference[:get]
    results = run_on_backends(lambda: FIFOQueue(8, timeout=1.0), dict(records=MEMORY_RECORDS, num_records=int),
                              calls)
    for backend in BACKENDS:
        for call, out, exp in zip(calls, results[backend], expected):
            if call[0] == "get_records":
                np.testing.assert_array_equal(out["actions"], exp)
                np.testing.assert_array_equal(out["states"], np.stack([exp, np.negative(exp)], 1).astype(np.float32))
            elif call[0] == "get_size":
                assert int(out) == exp


def test_replay_memory_parity():
    # Uniform sampling draws from each backend's own generator (tf.random vs torch), so the sampled indices
    # differ between backends. What compares: the storage (a ring buffer: both backends and numpy agree
    # exactly), the size and the write index; the sampled records must be rows that are held, intact.
    capacity, spaces = 6, dict(records=MEMORY_RECORDS, num_records=int)
    stored, sampled = {}, {}
    batches = [(0, 4), (4, 5), (9, 1), (10, 9)]  # Wraps; the last batch is larger than the capacity.
    for backend in BACKENDS:
        test = ComponentTest(ReplayMemory(capacity), spaces, backend=backend, seed=SEED)
        stored[backend], sampled[backend] = [], []
        for start, n in batches:
            test.test(("insert_records", [memory_records(start, n)]))
            values = test.read_variable_values(test.component)
            stored[backend].append((int(test.test("get_size")), values))
            sampled[backend].append(test.test(("get_records", [4])))
        test.terminate()
    ring, index, size = np.zeros(capacity, np.int64), 0, 0
    for i, (start, n) in enumerate(batches):
        for r in range(start, start + n):  # Reference: one record at a time into a ring.
            ring[index], index, size = r, (index + 1) % capacity, min(size + 1, capacity)
        assert_equal_nested(stored["pytorch"][i], stored["tf"][i], path=f"storage after batch {i}")
        held, values = stored["tf"][i]
        assert held == size
        np.testing.assert_array_equal(values["replay-memory/storage/actions"][:size], ring[:size])
        np.testing.assert_array_equal(values["replay-memory/index"], index)
        for backend in BACKENDS:
            out = sampled[backend][i]
            assert out["actions"].shape == (4,)
            assert set(out["actions"].tolist()) <= set(ring[:size].tolist())
            np.testing.assert_array_equal(out["states"], np.stack([out["actions"], -out["actions"]], 1))


# ============================================================================== algorithm root components
#
# Each root is built with one small config on both backends with the same seed, restricted to the learner's
# API methods under test (so the tests do not depend on the memories or the acting side). The initial weights
# are equal by construction; one update on the same batch must give the same loss, TD errors / priorities and
# new weights (Adam slots and step counters included).

STATE_SPACE, ACTION_SPACE = FloatBox(shape=(4,)), IntBox(2)
OPTIMIZER = {"type": "adam", "learning_rate": 0.001, "clip_grad_norm": 40.0}
DQN_CONFIG = dict(network_spec=[{"type": "dense", "units": 16, "activation": "relu"},
                                {"type": "dense", "units": 16, "activation": "relu"}],
                  memory_spec={"type": "prioritized-replay", "capacity": 64, "alpha": 0.6, "beta": 0.4},
                  exploration_spec={"epsilon_spec": ["linear", 1.0, 0.02]}, optimizer_spec=OPTIMIZER,
                  dueling=True, double_q=True, n_step=3, discount=0.99)
IMPALA_CONFIG = dict(network_spec=[{"type": "dense", "units": 16, "activation": "tanh"},
                                   {"type": "dense", "units": 16, "activation": "tanh"}],
                     optimizer_spec={"type": "adam", "learning_rate": 0.002, "clip_grad_norm": 40.0},
                     discount=0.99, reward_scale=0.1)
R2D2_CONFIG = dict(network_spec=[{"type": "dense", "units": 16, "activation": "relu"}, {"type": "lstm", "units": 8}],
                   memory_spec={"capacity": 64, "burn_in_length": 2, "train_length": 6, "alpha": 0.9, "beta": 0.6},
                   exploration_spec={"epsilon_spec": ["linear", 1.0, 0.01]}, optimizer_spec=OPTIMIZER,
                   dueling=True, n_step=3, discount=0.99)


def build_on_both(make_root, input_spaces, api_methods):
    """One executor per backend for a fresh root; asserts the initial weights are equal.

    Returns:
        ``({backend: executor}, initial weights)``.
    """
    executors = {b: GraphExecutor.create(backend=b, root_component=make_root(), input_spaces=input_spaces,
                                         action_space=ACTION_SPACE, seed=SEED, api_methods=api_methods)
                 for b in BACKENDS}
    tf_weights, torch_weights = (executors[b].get_weights() for b in BACKENDS)
    assert list(torch_weights) == list(tf_weights) and tf_weights
    assert_equal_nested(torch_weights, tf_weights, path="initial weights (pytorch vs tf)")
    return executors, tf_weights


def assert_same_after_update(executors, initial, outputs):
    """Outputs and all variables (weights, target networks, optimizer slots) agree; every weight moved."""
    assert_close(outputs["pytorch"], outputs["tf"], path="update outputs (pytorch vs tf)")
    weights = {b: e.get_weights(trainable_only=False) for b, e in executors.items()}
    assert set(weights["pytorch"]) == set(weights["tf"])
    assert_close(weights["pytorch"], weights["tf"], path="weights after the update (pytorch vs tf)")
    changed = [k for k, v in initial.items() if not np.array_equal(v, weights["tf"][k])]
    assert len(changed) == len(initial), f"the update left weights unchanged: {sorted(set(initial) - set(changed))}"
    for executor in executors.values():
        executor.terminate()


def transitions(n=16, seed=11):
    r = rng(seed)
    return {"states": r.normal(size=(n, 4)).astype(np.float32), "actions": r.integers(0, 2, n).astype(np.int32),
            "rewards": r.normal(size=n).astype(np.float32), "terminals": r.random(n) < 0.2,
            "next_states": r.normal(size=(n, 4)).astype(np.float32)}


@pytest.mark.parametrize("root_class", [DQNAlgorithmComponent, ApexAlgorithmComponent], ids=["dqn", "apex"])
def test_dqn_and_apex_update_parity(root_class):
    records_space = Dict(states=STATE_SPACE, actions=ACTION_SPACE, rewards=FloatBox(), terminals=BoolBox(),
                         next_states=STATE_SPACE, add_batch_rank=True)
    spaces = dict(records=records_space, importance_weights=FloatBox(add_batch_rank=True), time_percentage=float)
    executors, initial_weights = build_on_both(lambda: root_class(action_space=ACTION_SPACE, **DQN_CONFIG), spaces,
                                               ["update_from_batch", "get_td_errors"])
    batch = transitions()
    weights = rng(12).uniform(0.3, 1.0, len(batch["rewards"])).astype(np.float32)
    outputs = {}
    for backend in BACKENDS:
        executor = executors[backend]
        td_before = executor.execute("get_td_errors", batch)
        loss, td_errors = executor.execute("update_from_batch", batch, weights, 0.3)
        # The update's TD errors are those of the weights before the step.
        np.testing.assert_allclose(td_errors, td_before, rtol=1e-5, atol=1e-6)
        outputs[backend] = dict(loss=loss, td_errors=td_errors, td_after=executor.execute("get_td_errors", batch))
    assert np.isfinite(outputs["tf"]["loss"]) and np.abs(outputs["tf"]["td_errors"]).sum() > 0
    assert_same_after_update(executors, initial_weights, outputs)


def unroll_batch(T=5, B=3, seed=13):
    r = rng(seed)
    terminals = r.random((T, B)) < 0.2
    truncation = np.where(terminals & (r.random((T, B)) < 0.5), r.normal(size=(T, B)), 0.0).astype(np.float32)
    unroll = {"states": r.normal(size=(T, B, 4)).astype(np.float32),
              "actions": r.integers(0, 2, (T, B)).astype(np.int32),
              "rewards": r.normal(size=(T, B)).astype(np.float32), "terminals": terminals,
              "truncation_values": truncation,
              "behaviour_log_probs": np.log(r.uniform(0.2, 0.8, (T, B))).astype(np.float32),
              "behaviour_values": r.normal(size=(T, B)).astype(np.float32)}
    return unroll, {"states": r.normal(size=(B, 4)).astype(np.float32)}


@pytest.mark.parametrize("root_class, loss_spec", [
    (IMPALAAlgorithmComponent, {"weight_entropy": 0.01, "weight_baseline": 0.5, "time_reduction": "mean"}),
    (APPOAlgorithmComponent, {"clip_ratio": 0.2, "weight_entropy": 0.01, "weight_baseline": 0.5}),
], ids=["impala", "appo"])
def test_impala_and_appo_update_parity(root_class, loss_spec):
    step = dict(states=STATE_SPACE, actions=ACTION_SPACE, rewards=FloatBox(), terminals=BoolBox(),
                truncation_values=FloatBox(), behaviour_log_probs=FloatBox(), behaviour_values=FloatBox())
    spaces = dict(unroll=Dict(step, add_batch_rank=True, add_time_rank=True, time_major=True),
                  bootstrap=Dict(states=STATE_SPACE, add_batch_rank=True), time_percentage=float)
    executors, initial_weights = build_on_both(
        lambda: root_class(action_space=ACTION_SPACE, loss_spec=loss_spec, **IMPALA_CONFIG), spaces, ["update"])
    unroll, bootstrap = unroll_batch()
    outputs = {b: executors[b].execute("update", unroll, bootstrap, 0.3) for b in BACKENDS}
    assert set(outputs["tf"]) >= {"loss", "grad_norm"} and np.isfinite(outputs["tf"]["loss"])
    assert_same_after_update(executors, initial_weights, outputs)


def test_r2d2_update_parity():
    root_probe = R2D2AlgorithmComponent(action_space=ACTION_SPACE, **R2D2_CONFIG)
    burn_in, T, B, units = root_probe.burn_in, root_probe.memory.train_length, 3, root_probe.lstm_units
    lstm_state = Tuple(FloatBox(shape=(units,)), FloatBox(shape=(units,)), add_batch_rank=True)
    step = dict(states=STATE_SPACE, actions=ACTION_SPACE, rewards=FloatBox(), terminals=BoolBox(),
                bootstrap=BoolBox(), resets=BoolBox(), mask=BoolBox())
    spaces = dict(sequences=Dict(step, add_batch_rank=True, add_time_rank=True), initial_states=lstm_state,
                  importance_weights=FloatBox(add_batch_rank=True), time_percentage=float,
                  burn_in_states=STATE_SPACE.with_batch_rank().with_time_rank(time_major=False),
                  burn_in_resets=BoolBox(add_batch_rank=True, add_time_rank=True))
    executors, initial_weights = build_on_both(
        lambda: R2D2AlgorithmComponent(action_space=ACTION_SPACE, **R2D2_CONFIG), spaces, ["update_from_batch"])
    r = rng(14)
    mask = np.ones((B, T), bool)
    mask[1, 4:] = False  # An episode that ended: zero padding after its last step.
    bootstrap = np.zeros((B, T), bool)
    bootstrap[2, 3] = True  # A time-limit truncation: the step holding the final observation.
    terminals = np.zeros((B, T), bool)
    terminals[1, 3] = True
    resets = np.zeros((B, T), bool)
    resets[0, 2] = True
    sequences = {"states": r.normal(size=(B, T, 4)).astype(np.float32),
                 "actions": r.integers(0, 2, (B, T)).astype(np.int32),
                 "rewards": r.normal(size=(B, T)).astype(np.float32), "terminals": terminals,
                 "bootstrap": bootstrap, "resets": resets, "mask": mask}
    initial = tuple(r.normal(size=(B, units)).astype(np.float32) * 0.5 for _ in range(2))
    weights = r.uniform(0.3, 1.0, B).astype(np.float32)
    burn_in_states = r.normal(size=(B, burn_in, 4)).astype(np.float32)
    burn_in_resets = np.zeros((B, burn_in), bool)
    outputs = {}
    for backend in BACKENDS:
        loss, priorities = executors[backend].execute("update_from_batch", sequences, initial, weights, 0.3,
                                                      burn_in_states=burn_in_states, burn_in_resets=burn_in_resets)
        outputs[backend] = dict(loss=loss, priorities=priorities)
    assert np.isfinite(outputs["tf"]["loss"]) and outputs["tf"]["priorities"].shape == (B,)
    assert_same_after_update(executors, initial_weights, outputs)
