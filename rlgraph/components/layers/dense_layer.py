"""A fully connected layer."""
from rlgraph.components.layers.activations import ActivationName, get_activation
from rlgraph.components.layers.layer import Layer
from rlgraph.spaces import FloatBox
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, check_args


class DenseLayer(Layer):
    """``activation(inputs @ kernel + bias)`` over the last axis of a float input.

    Args:
        units: Number of output units.
        activation: Activation name (see ``activations``); None for linear.
        use_bias: Whether to add a bias.
        kernel_initializer: Initializer of the ``[in, units]`` kernel.
        bias_initializer: Initializer of the bias.
    """

    __aliases__ = ("dense",)

    default_scope = "dense"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(units=Int(min=1), activation=ActivationName())

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        args = check_args("DenseLayer", DenseLayer.ARG_RULES, dict(units=units, activation=activation))
        self.units = args["units"]
        self.activation = args["activation"]
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.kernel = self.bias = None
        self._act = None

    def check_input_spaces(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        if not isinstance(space, FloatBox) or space.rank < 1:
            raise RLGraphSpaceError(f"API method 'call', argument 'inputs': expected a FloatBox of rank >= 1 "
                                    f"(plus batch/time ranks), got {space!r}.")

    def create_variables(self, input_spaces, action_space=None):
        in_units = input_spaces["inputs"].shape[-1]
        self.kernel = self.get_variable("kernel", shape=(in_units, self.units), initializer=self.kernel_initializer)
        if self.use_bias:
            self.bias = self.get_variable("bias", shape=(self.units,), initializer=self.bias_initializer)
        self._act = get_activation(self.activation, self.backend.name)

    @graph_fn
    def _graph_fn_call(self, inputs):
        out = self.ops.linear(inputs, self.kernel, self.bias)  # Fused where the backend has it (torch.addmm).
        return out if self._act is None else self._act(out)
