"""NeuralNetwork (feed-forward and recurrent) and MultiInputStreamNetwork against numpy references."""
import json

import numpy as np
import pytest

from rlgraph.components.neural_networks import MultiInputStreamNetwork, NeuralNetwork
from rlgraph.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphAPIError, RLGraphSpaceError, RLGraphSpecError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def relu(x):
    return np.maximum(x, 0.0)


def conv_valid(x, kernel, bias, stride):
    """NHWC 'valid' convolution by explicit loops over output positions."""
    kh, kw, _, filters = kernel.shape
    out_h, out_w = (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], out_h, out_w, filters))
    for i in range(out_h):
        for j in range(out_w):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.einsum("nhwc,hwcf->nf", patch, kernel)
    return out + bias


def lstm_unroll(x, kernel, recurrent_kernel, bias, h, c, resets):
    """Time-major LSTM (gates i, f, g, o; forget bias 1); the state is zeroed before steps where resets."""
    outputs = []
    for t in range(x.shape[0]):
        keep = ~resets[t][:, None]
        h, c = h * keep, c * keep
        i, f, g, o = np.split(x[t] @ kernel + h @ recurrent_kernel + bias, 4, axis=-1)
        c = sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs), h, c


# --- feed-forward ------------------------------------------------------------------------------------------
CONV_NET = [{"type": "conv2d", "filters": 2, "kernel_size": 3, "strides": 2, "activation": "relu",
             "bias_initializer": "normal"},
            {"type": "reshape", "flatten": True},
            {"type": "dense", "units": 3, "activation": "tanh", "bias_initializer": "normal"}]


def test_feed_forward_network_from_specs(backend, tmp_path):
    path = tmp_path / "net.json"
    path.write_text(json.dumps(CONV_NET))
    net = NeuralNetwork(layers=str(path))
    assert not net.is_recurrent and "call_recurrent" not in net.api_methods
    test = ComponentTest(net, dict(inputs=FloatBox(shape=(7, 6, 2), add_batch_rank=True)), backend=backend)
    w = test.read_variable_values(net)
    x = rand(4, 7, 6, 2)
    hidden = relu(conv_valid(x, w["neural-network/conv2d/kernel"], w["neural-network/conv2d/bias"], 2))
    expected = np.tanh(hidden.reshape(4, -1) @ w["neural-network/dense/kernel"] + w["neural-network/dense/bias"])
    test.test(("call", [x]), expected_outputs=expected, decimals=5)
    with pytest.raises(RLGraphAPIError, match="no API method 'call_recurrent'"):
        test.test(("call_recurrent", [x]))


def test_feed_forward_network_backends_agree():
    run_on_backends(lambda: NeuralNetwork(layers=CONV_NET), dict(inputs=FloatBox(shape=(7, 6, 2), add_batch_rank=True)),
                    [("call", [rand(3, 7, 6, 2)])])


def test_empty_network_is_the_identity(backend):
    test = ComponentTest(NeuralNetwork(), dict(inputs=FloatBox(shape=(2,), add_batch_rank=True)), backend=backend)
    x = rand(3, 2)
    test.test(("call", [x]), expected_outputs=x)


# --- recurrent ---------------------------------------------------------------------------------------------
RNN = [{"type": "dense", "units": 4, "activation": "relu", "bias_initializer": "normal"},
       {"type": "lstm", "units": 3, "bias_initializer": "normal"},
       {"type": "dense", "units": 2, "bias_initializer": "normal"}]
T, B = 5, 3


def rnn_spaces(time_major=True):
    return dict(inputs=FloatBox(shape=(2,), add_batch_rank=True, add_time_rank=True, time_major=time_major),
                internal_states=Tuple(FloatBox(shape=(3,)), FloatBox(shape=(3,)), add_batch_rank=True),
                resets=BoolBox(add_batch_rank=True, add_time_rank=True, time_major=time_major))


def rnn_reference(w, x, h, c, resets):
    hidden = relu(x @ w["neural-network/dense/kernel"] + w["neural-network/dense/bias"])
    outputs, h, c = lstm_unroll(hidden, w["neural-network/lstm/kernel"], w["neural-network/lstm/recurrent-kernel"],
                                w["neural-network/lstm/bias"], h, c, resets)
    return outputs @ w["neural-network/dense-1/kernel"] + w["neural-network/dense-1/bias"], (h, c)


def test_recurrent_network(backend):
    net = NeuralNetwork(layers=RNN)
    assert net.is_recurrent and "call_recurrent" in net.api_methods
    test = ComponentTest(net, rnn_spaces(), backend=backend)
    w = test.read_variable_values(net)
    x, h0, c0 = rand(T, B, 2), rand(B, 3), rand(B, 3)
    resets = np.zeros((T, B), bool)
    resets[2, 0] = resets[4, 2] = True
    expected = rnn_reference(w, x, h0, c0, resets)
    test.test(("call_recurrent", [x, (h0, c0), resets]), expected_outputs=expected, decimals=5)
    # call() starts from zeros without resets.
    zeros = np.zeros((B, 3), np.float32)
    test.test(("call", [x]), expected_outputs=rnn_reference(w, x, zeros, zeros, np.zeros((T, B), bool))[0],
              decimals=5)
    # Two calls that pass the state on equal one call over the whole sequence.
    first, state = test.test(("call_recurrent", [x[:2], (h0, c0), resets[:2]]))
    second, state = test.test(("call_recurrent", [x[2:], state, resets[2:]]))
    np.testing.assert_allclose(np.concatenate([first, second]), expected[0], atol=1e-5)
    np.testing.assert_allclose(state[0], expected[1][0], atol=1e-5)


def test_recurrent_network_batch_major_backends_agree():
    x, state = rand(B, T, 2), (rand(B, 3), rand(B, 3))
    resets = np.zeros((B, T), bool)
    resets[1, 3] = True
    run_on_backends(lambda: NeuralNetwork(layers=RNN), rnn_spaces(time_major=False),
                    [("call_recurrent", [x, state, resets]), ("call", [x])])


def test_network_spec_errors():
    with pytest.raises(RLGraphSpecError, match="at most one LSTM layer"):
        NeuralNetwork({"type": "lstm", "units": 2}, {"type": "lstm", "units": 2})
    with pytest.raises(RLGraphSpecError, match="not both"):
        NeuralNetwork({"type": "dense", "units": 2}, layers=[{"type": "dense", "units": 2}])
    with pytest.raises(RLGraphSpecError, match="unknown key 'unit'"):
        NeuralNetwork.from_spec({"layers": [{"type": "lstm", "unit": 2}]})


# --- multi-input streams -------------------------------------------------------------------------------------
STREAMS_SPEC = {
    "type": "multi-input-stream-network",
    "input_network_specs": {
        "image": [{"type": "conv2d", "filters": 2, "kernel_size": 3, "strides": 2, "activation": "relu",
                   "bias_initializer": "normal"}],
        "prev_action": [],
        "prev_reward": [],
    },
    "post_network_spec": [{"type": "dense", "units": 4, "activation": "relu", "bias_initializer": "normal"}],
}


def stream_inputs(lead):
    return dict(image=rand(*lead, 6, 6, 2), prev_action=RNG.integers(0, 3, lead).astype(np.int32),
                prev_reward=rand(*lead))


def streams_reference(w, inputs, scope="multi-input-stream-network"):
    """Conv + flatten on the image, one-hot action, reward as a vector of size 1, concatenated, dense."""
    image = inputs["image"]
    lead = image.shape[:-3]
    conv = relu(conv_valid(image.reshape(-1, 6, 6, 2), w[f"{scope}/stream-image/conv2d/kernel"],
                           w[f"{scope}/stream-image/conv2d/bias"], 2))
    concat = np.concatenate([conv.reshape(*lead, -1), np.eye(3)[inputs["prev_action"]],
                             inputs["prev_reward"][..., None]], axis=-1)
    return relu(concat @ w[f"{scope}/dense/kernel"] + w[f"{scope}/dense/bias"])


def stream_space(**ranks):
    return Dict(image=FloatBox(shape=(6, 6, 2)), prev_action=IntBox(3), prev_reward=FloatBox(), **ranks)


def test_multi_input_stream_network(backend):
    net = NeuralNetwork.from_spec(STREAMS_SPEC)
    assert isinstance(net, MultiInputStreamNetwork) and not net.is_recurrent
    test = ComponentTest(net, dict(inputs=stream_space(add_batch_rank=True)), backend=backend)
    w = test.read_variable_values(net)
    inputs = stream_inputs((4,))
    test.test(("call", [inputs]), expected_outputs=streams_reference(w, inputs), decimals=5)


def test_recurrent_multi_input_stream_network(backend):
    """IMPALA/R2D2 style: image, previous action and reward -> concat -> dense -> LSTM, on [T, B] inputs."""
    spec = dict(STREAMS_SPEC, post_network_spec=STREAMS_SPEC["post_network_spec"] + [
        {"type": "lstm", "units": 3, "bias_initializer": "normal"}])
    net = NeuralNetwork.from_spec(spec)
    assert net.is_recurrent
    spaces = dict(inputs=stream_space(add_batch_rank=True, add_time_rank=True, time_major=True),
                  internal_states=Tuple(FloatBox(shape=(3,)), FloatBox(shape=(3,)), add_batch_rank=True),
                  resets=BoolBox(add_batch_rank=True, add_time_rank=True, time_major=True))
    test = ComponentTest(net, spaces, backend=backend)
    w = test.read_variable_values(net)
    inputs, state = stream_inputs((T, B)), (rand(B, 3), rand(B, 3))
    resets = np.zeros((T, B), bool)
    resets[3, 1] = True
    scope = "multi-input-stream-network"
    expected = lstm_unroll(streams_reference(w, inputs), w[f"{scope}/lstm/kernel"],
                           w[f"{scope}/lstm/recurrent-kernel"], w[f"{scope}/lstm/bias"], *state, resets)
    test.test(("call_recurrent", [inputs, state, resets]), expected_outputs=(expected[0], expected[1:]), decimals=5)


def test_multi_input_stream_network_backends_agree():
    spec = dict(STREAMS_SPEC, post_network_spec=[{"type": "lstm", "units": 3}])
    space = stream_space(add_batch_rank=True, add_time_rank=True)
    run_on_backends(lambda: NeuralNetwork.from_spec(spec), dict(inputs=space), [("call", [stream_inputs((B, T))])])


def test_tuple_streams_without_flattening(backend):
    net = MultiInputStreamNetwork([[], [{"type": "dense", "units": 2}]], flatten_streams=False)
    space = Tuple(FloatBox(shape=(2,)), FloatBox(shape=(3,)), add_batch_rank=True)
    test = ComponentTest(net, dict(inputs=space), backend=backend)
    w = test.read_variable_values(net)
    a, b = rand(4, 2), rand(4, 3)
    scope = "multi-input-stream-network/stream-1/dense"
    dense = b @ w[f"{scope}/kernel"] + w[f"{scope}/bias"]
    test.test(("call", [(a, b)]), expected_outputs=np.concatenate([a, dense], axis=-1), decimals=5)


def test_multi_input_stream_network_checks():
    missing = Dict(image=FloatBox(shape=(6, 6, 2)), prev_action=IntBox(3), add_batch_rank=True)
    with pytest.raises(RLGraphSpaceError, match="do not match the streams"):
        ComponentTest(NeuralNetwork.from_spec(STREAMS_SPEC), dict(inputs=missing), backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="expected a Dict space"):
        ComponentTest(NeuralNetwork.from_spec(STREAMS_SPEC), dict(inputs=Tuple(FloatBox(), add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphSpecError, match="expected a list of layer specs"):
        MultiInputStreamNetwork({"image": {"type": "dense", "units": 2}})
