"""A 2D convolution layer on NHWC images."""
from rlgraph.backends.ops import same_padding
from rlgraph.components.layers.activations import ActivationName, get_activation
from rlgraph.components.layers.layer import Layer
from rlgraph.spaces import FloatBox
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, Ints, OneOf, check_args


def _pair(value):
    """A checked int or pair of ints (``Ints(length=2)``) -> a tuple of two ints."""
    return (value, value) if isinstance(value, int) else tuple(value)


class Conv2DLayer(Layer):
    """``activation(conv2d(inputs, kernel) + bias)`` on images of shape ``[height, width, channels]``.

    Inputs are channels-last (NHWC) on both backends, with any leading batch/time ranks. The kernel has the
    TensorFlow layout ``[kernel_h, kernel_w, in_channels, filters]`` on both backends (``ops.conv2d`` transposes
    it for PyTorch), so the same seed gives the same weights. "same" padding follows TensorFlow
    (output size ``ceil(size / stride)``; an odd total padding puts the extra row/column after).

    Args:
        filters: Number of output channels.
        kernel_size: An int or ``(kernel_h, kernel_w)``.
        strides: An int or ``(stride_h, stride_w)``.
        padding: "valid" (no padding) or "same".
        activation: Activation name (see ``activations``); None for linear.
        use_bias: Whether to add a bias.
        kernel_initializer: Initializer of the kernel.
        bias_initializer: Initializer of the bias.
    """

    __aliases__ = ("conv2d", "conv-2d", "convolution")

    default_scope = "conv2d"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(filters=Int(min=1), kernel_size=Ints(min=1, length=2), strides=Ints(min=1, length=2),
                     padding=OneOf("valid", "same", ignore_case=True), activation=ActivationName())

    def __init__(self, filters, kernel_size, strides=1, padding="valid", activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        args = check_args("Conv2DLayer", Conv2DLayer.ARG_RULES, dict(filters=filters, kernel_size=kernel_size,
                                                                     strides=strides, padding=padding,
                                                                     activation=activation))
        self.filters = args["filters"]
        self.kernel_size = _pair(args["kernel_size"])
        self.strides = _pair(args["strides"])
        self.padding = args["padding"]
        self.activation = args["activation"]
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.kernel = self.bias = None
        self._act = None
        self._in_shape = self._out_shape = None

    def check_input_spaces(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        if not isinstance(space, FloatBox) or space.rank != 3:
            raise RLGraphSpaceError(f"Conv2DLayer, API method 'call', argument 'inputs': expected a FloatBox of "
                                    f"shape [height, width, channels] (plus batch/time ranks), got {space!r}. "
                                    f"Convert integer images with a 'convert-type' preprocessor first.")
        height, width = space.shape[:2]
        kh, kw = self.kernel_size
        if self.padding == "valid" and (height < kh or width < kw):
            raise RLGraphSpaceError(f"Conv2DLayer, API method 'call', argument 'inputs': images of "
                                    f"{height}x{width} are smaller than the {kh}x{kw} kernel with 'valid' padding.")

    def create_variables(self, input_spaces, action_space=None):
        height, width, channels = input_spaces["inputs"].shape
        (kh, kw), (sh, sw) = self.kernel_size, self.strides
        if self.padding == "valid":
            out_h, out_w = (height - kh) // sh + 1, (width - kw) // sw + 1
        else:
            out_h, out_w = same_padding(height, kh, sh)[0], same_padding(width, kw, sw)[0]
        self._in_shape = (height, width, channels)
        self._out_shape = (out_h, out_w, self.filters)
        self.kernel = self.get_variable("kernel", shape=(kh, kw, channels, self.filters),
                                        initializer=self.kernel_initializer)
        if self.use_bias:
            self.bias = self.get_variable("bias", shape=(self.filters,), initializer=self.bias_initializer)
        self._act = get_activation(self.activation, self.backend.name)

    @graph_fn
    def _graph_fn_call(self, inputs):
        ops = self.ops
        shape = ops.shape(inputs)
        out = ops.conv2d(ops.reshape(inputs, (-1,) + self._in_shape), self.kernel, self.bias, self.strides,
                         self.padding)
        if self._act is not None:
            out = self._act(out)
        # PyTorch: the copy into NHWC order (its convolution runs in NCHW).
        return ops.reshape(out, tuple(shape[:-3]) + self._out_shape)
