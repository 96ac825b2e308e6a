"""Multiplies inputs by a constant factor."""
from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.utils.backend import tf
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.validation import Number, check_args


class Multiply(Preprocessor):
    """``inputs * factor``; integer inputs are cast to float32 first. Dict/Tuple inputs: every leaf.

    Args:
        factor: The factor (a number).
    """

    __aliases__ = ("multiply", "scale")

    default_scope = "multiply"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(factor=Number())

    def __init__(self, factor, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.factor = check_args("Multiply", Multiply.ARG_RULES, dict(factor=factor))["factor"]

    def check_input_spaces(self, input_spaces, action_space=None):
        self.check_numeric_leaves(input_spaces["inputs"])

    @graph_fn(backend="tf", split_ops=True)
    def _graph_fn_preprocess(self, inputs):
        x = inputs if inputs.dtype.is_floating else tf.cast(inputs, tf.float32)
        return x * self.factor

    @graph_fn(backend="pytorch", split_ops=True)
    def _graph_fn_preprocess(self, inputs):
        x = inputs if inputs.is_floating_point() else inputs.float()
        return x * self.factor
