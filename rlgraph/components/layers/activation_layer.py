"""A layer that only applies an activation function."""
from rlgraph.components.layers.activations import ActivationName, get_activation
from rlgraph.components.layers.layer import Layer
from rlgraph.spaces import FloatBox
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import check_args


class ActivationLayer(Layer):
    """``activation(inputs)``, element-wise (softmax: over the last axis).

    Args:
        activation: An activation name (see ``activations``); None or "linear" is the identity.
    """

    __aliases__ = ("activation",)

    default_scope = "activation"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(activation=ActivationName())

    def __init__(self, activation=None, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.activation = check_args("ActivationLayer", ActivationLayer.ARG_RULES,
                                     dict(activation=activation))["activation"]
        self._act = None

    def check_input_spaces(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        if not isinstance(space, FloatBox):
            raise RLGraphSpaceError(f"ActivationLayer, API method 'call', argument 'inputs': expected a FloatBox, "
                                    f"got {space!r}.")

    def create_variables(self, input_spaces, action_space=None):
        self._act = get_activation(self.activation, self.backend.name)

    @graph_fn
    def _graph_fn_call(self, inputs):
        # ``_act`` is the backend's own function, so one implementation serves both backends.
        return inputs if self._act is None else self._act(inputs)
