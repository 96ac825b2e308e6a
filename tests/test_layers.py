"""Layers: Conv2DLayer, ActivationLayer, ReshapeLayer, ConcatLayer against numpy references, on both backends."""
import numpy as np
import pytest

from rlgraph import rlgraph_api
from rlgraph.components import Component
from rlgraph.components.layers import ActivationLayer, ConcatLayer, Conv2DLayer, Layer, LSTMLayer, ReshapeLayer
from rlgraph.spaces import Dict, FloatBox, IntBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphAPIError, RLGraphError, RLGraphSpaceError, RLGraphSpecError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

RNG = np.random.default_rng(3)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# --- numpy references ------------------------------------------------------------------------------------
def conv2d_reference(x, kernel, bias, stride, padding):
    """NHWC convolution by explicit loops; "same" pads as TensorFlow documents (extra padding after)."""
    kh, kw = kernel.shape[:2]
    sh, sw = stride
    if padding == "same":
        pads = []
        for size, k, s in ((x.shape[1], kh, sh), (x.shape[2], kw, sw)):
            out = int(np.ceil(size / s))
            total = max((out - 1) * s + k - size, 0)
            pads.append((total // 2, total - total // 2))
        x = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
    out_h, out_w = (x.shape[1] - kh) // sh + 1, (x.shape[2] - kw) // sw + 1
    out = np.zeros((x.shape[0], out_h, out_w, kernel.shape[3]), np.float64)
    for i in range(out_h):
        for j in range(out_w):
            patch = x[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :]
            for f in range(kernel.shape[3]):
                out[:, i, j, f] = (patch * kernel[:, :, :, f]).sum(axis=(1, 2, 3))
    return out + bias


# --- Conv2DLayer ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel_size,strides,padding", [(3, 1, "valid"), ((3, 2), 2, "same"), (2, (2, 3), "same"),
                                                         (4, 3, "valid")])
def test_conv2d_matches_numpy(backend, kernel_size, strides, padding):
    layer = Conv2DLayer(filters=3, kernel_size=kernel_size, strides=strides, padding=padding, activation="relu",
                        bias_initializer="normal")
    test = ComponentTest(layer, dict(inputs=FloatBox(shape=(8, 7, 2), add_batch_rank=True)), backend=backend)
    x = rand(4, 8, 7, 2)
    kernel, bias = test.read_variable_values("conv2d/kernel", "conv2d/bias")
    assert kernel.shape == (*((kernel_size,) * 2 if isinstance(kernel_size, int) else kernel_size), 2, 3)
    stride = (strides, strides) if isinstance(strides, int) else strides
    expected = np.maximum(conv2d_reference(x, kernel, bias, stride, padding), 0.0)
    test.test(("call", [x]), expected_outputs=expected, decimals=5)


def test_conv2d_keeps_time_and_batch_ranks(backend):
    layer = Conv2DLayer(filters=2, kernel_size=3, strides=2, padding="same", bias_initializer="normal")
    space = FloatBox(shape=(6, 5, 3), add_batch_rank=True, add_time_rank=True, time_major=True)
    test = ComponentTest(layer, dict(inputs=space), backend=backend)
    out_space = test.meta_graph.api["call"].outputs.space
    assert out_space == FloatBox(shape=(3, 3, 2), add_batch_rank=True, add_time_rank=True, time_major=True)
    x = rand(3, 2, 6, 5, 3)
    kernel, bias = test.read_variable_values("conv2d/kernel", "conv2d/bias")
    expected = conv2d_reference(x.reshape(6, 6, 5, 3), kernel, bias, (2, 2), "same").reshape(3, 2, 3, 3, 2)
    test.test(("call", [x]), expected_outputs=expected, decimals=5)


def test_conv2d_backends_agree():
    run_on_backends(lambda: Layer.from_spec({"type": "Conv2D", "filters": 4, "kernel_size": [3, 2], "strides": 2,
                                             "padding": "same", "activation": "tanh", "bias_initializer": "normal"}),
                    dict(inputs=FloatBox(shape=(9, 8, 3), add_batch_rank=True)), [("call", [rand(3, 9, 8, 3)])])


def test_conv2d_rejects_bad_inputs_and_specs():
    with pytest.raises(RLGraphSpaceError, match="FloatBox of shape \\[height, width, channels\\]"):
        ComponentTest(Conv2DLayer(2, 3), dict(inputs=FloatBox(shape=(8, 8), add_batch_rank=True)), backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="convert-type"):
        ComponentTest(Conv2DLayer(2, 3), dict(inputs=IntBox(256, shape=(8, 8, 1), add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="smaller than the 5x5 kernel"):
        ComponentTest(Conv2DLayer(2, 5), dict(inputs=FloatBox(shape=(4, 8, 1), add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphSpecError, match="padding"):
        Conv2DLayer(2, 3, padding="full")
    with pytest.raises(RLGraphSpecError, match="kernel_size"):
        Conv2DLayer(2, (3, 0))


# --- ActivationLayer ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["relu", "tanh", "softmax", None])
def test_activation_layer_matches_numpy(backend, activation):
    x = rand(4, 3)
    expected = {"relu": np.maximum(x, 0.0), "tanh": np.tanh(x), None: x,
                "softmax": np.exp(x) / np.exp(x).sum(-1, keepdims=True)}[activation]
    test = ComponentTest(ActivationLayer(activation), dict(inputs=FloatBox(shape=(3,), add_batch_rank=True)),
                         backend=backend)
    test.test(("call", [x]), expected_outputs=expected, decimals=6)


def test_activation_layer_checks():
    with pytest.raises(RLGraphSpecError, match=r"^Layer\.activation: expected an activation name .*got 'relu6'"):
        Layer.from_spec({"type": "activation", "activation": "relu6"})
    with pytest.raises(RLGraphSpaceError, match="expected a FloatBox"):
        ComponentTest(ActivationLayer("relu"), dict(inputs=IntBox(3, add_batch_rank=True)), backend="pytorch")


# --- ReshapeLayer ------------------------------------------------------------------------------------------
def test_reshape_flattens_items_with_any_leading_ranks(backend):
    test = ComponentTest(ReshapeLayer(flatten=True), dict(inputs=FloatBox(shape=(2, 3), add_batch_rank=True,
                                                                          add_time_rank=True)), backend=backend)
    x = rand(4, 3, 2, 3)
    test.test(("call", [x]), expected_outputs=x.reshape(4, 3, 6))
    scalar = ComponentTest(ReshapeLayer(flatten=True), dict(inputs=FloatBox(add_batch_rank=True)), backend=backend)
    scalar.test(("call", [np.array([1.0, 2.0], np.float32)]), expected_outputs=[[1.0], [2.0]])


def test_reshape_one_hot_and_new_shape(backend):
    # IntBox in [2, 5): values are shifted by low=2 before one-hot encoding.
    space = IntBox(low=2, high=5, shape=(2,), add_batch_rank=True)
    test = ComponentTest(ReshapeLayer(flatten=True, one_hot_categories=True), dict(inputs=space), backend=backend)
    x = np.array([[2, 4], [3, 3]], np.int32)
    expected = np.array([[1, 0, 0, 0, 0, 1], [0, 1, 0, 0, 1, 0]], np.float32)
    out = test.test(("call", [x]), expected_outputs=expected)
    assert out.dtype == np.float32
    reshaped = ComponentTest(ReshapeLayer(new_shape=(-1, 2)), dict(inputs=FloatBox(shape=(6,), add_batch_rank=True)),
                             backend=backend)
    x = rand(3, 6)
    reshaped.test(("call", [x]), expected_outputs=x.reshape(3, 3, 2))


def test_reshape_container_inputs_leaf_by_leaf(backend):
    space = Dict(image=FloatBox(shape=(2, 2)), action=IntBox(3), add_batch_rank=True)
    test = ComponentTest(ReshapeLayer(flatten=True, one_hot_categories=True), dict(inputs=space), backend=backend)
    image, action = rand(2, 2, 2), np.array([2, 0], np.int32)
    test.test(("call", [dict(image=image, action=action)]),
              expected_outputs=dict(image=image.reshape(2, 4), action=np.eye(3, dtype=np.float32)[action]))


@pytest.mark.parametrize("time_major", [True, False])
def test_fold_and_unfold_time_rank(backend, time_major):
    class FoldUnfold(Component):
        """Folds the time rank, then unfolds it while flattening the items."""

        def __init__(self):
            self.fold = ReshapeLayer(fold_time_rank=True, scope="fold")
            self.unfold = ReshapeLayer(unfold_time_rank=True, flatten=True, scope="unfold")
            super().__init__(self.fold, self.unfold, scope="root")

        @rlgraph_api
        def fold_only(self, inputs):
            return self.fold.call(inputs)

        @rlgraph_api
        def fold_unfold(self, inputs):
            return self.unfold.call(self.fold.call(inputs), inputs)

    space = FloatBox(shape=(3, 2), add_batch_rank=True, add_time_rank=True, time_major=time_major)
    test = ComponentTest(FoldUnfold(), dict(inputs=space), backend=backend)
    assert test.meta_graph.api["fold_only"].outputs.space == FloatBox(shape=(3, 2), add_batch_rank=True)
    assert test.meta_graph.api["fold_unfold"].outputs.space == FloatBox(
        shape=(6,), add_batch_rank=True, add_time_rank=True, time_major=time_major)
    x = rand(4, 3, 3, 2)  # [T, B] if time-major, else [B, T].
    test.test(("fold_only", [x]), expected_outputs=x.reshape(12, 3, 2))
    test.test(("fold_unfold", [x]), expected_outputs=x.reshape(4, 3, 6))


def test_reshape_checks():
    with pytest.raises(RLGraphSpaceError, match="fold_time_rank needs a space with batch and time ranks"):
        ComponentTest(ReshapeLayer(fold_time_rank=True), dict(inputs=FloatBox(shape=(3,), add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="'orig_inputs': expected a space with batch and time ranks"):
        ComponentTest(ReshapeLayer(unfold_time_rank=True), dict(inputs=FloatBox(shape=(2,), add_batch_rank=True),
                                                                orig_inputs=FloatBox(add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphAPIError, match="needs orig_inputs"):
        ComponentTest(ReshapeLayer(unfold_time_rank=True), dict(inputs=FloatBox(shape=(2,), add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="one_hot_categories=True needs an IntBox with uniform finite bounds"):
        ComponentTest(ReshapeLayer(one_hot_categories=True), dict(inputs=IntBox(add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="less than the 4 categories"):
        ComponentTest(ReshapeLayer(one_hot_categories=3), dict(inputs=IntBox(4, add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="cannot be reshaped to \\(4,\\)"):
        ComponentTest(ReshapeLayer(new_shape=4), dict(inputs=FloatBox(shape=(3,), add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphSpecError, match="not both"):
        ReshapeLayer(flatten=True, new_shape=(2, 3))
    with pytest.raises(RLGraphSpecError, match="not both"):
        ReshapeLayer(fold_time_rank=True, unfold_time_rank=True)


def test_reshape_backends_agree():
    space = Dict(image=FloatBox(shape=(2, 3)), action=IntBox(4, shape=(2,)), add_batch_rank=True)
    run_on_backends(lambda: ReshapeLayer(flatten=True, one_hot_categories=True), dict(inputs=space),
                    [("call", [space.sample(5)])])


# --- ConcatLayer -------------------------------------------------------------------------------------------
class _ConcatRoot(Component):
    """A root with named arguments (root API methods cannot take ``*inputs``)."""

    def __init__(self, axis=-1):
        self.concat = ConcatLayer(axis=axis)
        super().__init__(self.concat, scope="root")

    @rlgraph_api
    def call(self, a, b, c):
        return self.concat.call(a, b, c)


def test_concat_last_axis_and_item_axis(backend):
    spaces = dict(a=FloatBox(shape=(2,), add_batch_rank=True), b=FloatBox(shape=(1,), add_batch_rank=True),
                  c=FloatBox(shape=(3,), add_batch_rank=True))
    a, b, c = rand(4, 2), rand(4, 1), rand(4, 3)
    test = ComponentTest(_ConcatRoot(), spaces, backend=backend)
    test.test(("call", [a, b, c]), expected_outputs=np.concatenate([a, b, c], axis=1))
    # axis=0 is the first item axis, i.e. axis 2 of [T, B, ...] values.
    spaces = {k: FloatBox(shape=(n, 2), add_batch_rank=True, add_time_rank=True) for k, n in zip("abc", (1, 2, 3))}
    a, b, c = rand(2, 3, 1, 2), rand(2, 3, 2, 2), rand(2, 3, 3, 2)
    test = ComponentTest(_ConcatRoot(axis=0), spaces, backend=backend)
    test.test(("call", [a, b, c]), expected_outputs=np.concatenate([a, b, c], axis=2))


def test_concat_checks():
    spaces = dict(a=FloatBox(shape=(2, 2), add_batch_rank=True), b=FloatBox(shape=(3, 1), add_batch_rank=True),
                  c=FloatBox(shape=(3, 2), add_batch_rank=True))
    with pytest.raises(RLGraphSpaceError, match="'inputs\\[1\\]'.*cannot be concatenated"):
        ComponentTest(_ConcatRoot(), spaces, backend="pytorch")
    spaces["b"] = FloatBox(shape=(2, 2), add_batch_rank=True, add_time_rank=True)
    with pytest.raises(RLGraphSpaceError, match="cannot be concatenated"):
        ComponentTest(_ConcatRoot(axis=0), spaces, backend="pytorch")
    spaces = dict(a=FloatBox(add_batch_rank=True), b=FloatBox(add_batch_rank=True), c=FloatBox(add_batch_rank=True))
    with pytest.raises(RLGraphSpaceError, match="flatten scalars first"):
        ComponentTest(_ConcatRoot(), spaces, backend="pytorch")


def test_concat_backends_agree():
    spaces = dict(a=FloatBox(shape=(2,), add_batch_rank=True), b=FloatBox(shape=(1,), add_batch_rank=True),
                  c=FloatBox(shape=(3,), add_batch_rank=True))
    run_on_backends(_ConcatRoot, spaces, [("call", [rand(4, 2), rand(4, 1), rand(4, 3)])])


# --- specs ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,cls", [
    ({"type": "conv2d", "filters": 2, "kernel_size": 3}, Conv2DLayer),
    ({"type": "Conv2DLayer", "filters": 2, "kernel_size": 3}, Conv2DLayer),
    ({"type": "LSTM", "units": 4}, LSTMLayer),
    ({"type": "lstm_layer", "units": 4}, LSTMLayer),
    ({"type": "activation", "activation": "tanh"}, ActivationLayer),
    ({"type": "reshape", "flatten": True}, ReshapeLayer),
    ({"type": "Concat", "axis": 0}, ConcatLayer),
])
def test_layers_from_spec(spec, cls):
    assert type(Layer.from_spec(spec)) is cls


def test_layer_spec_rejects_unknown_keys():
    with pytest.raises(RLGraphSpecError, match="unknown key 'filter'"):
        Layer.from_spec({"type": "conv2d", "filter": 2, "kernel_size": 3})
    with pytest.raises(RLGraphError):
        Layer.from_spec({"type": "conv3d"})
