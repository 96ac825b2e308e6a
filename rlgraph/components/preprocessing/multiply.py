"""Multiplies inputs by a constant factor."""
from rlgraph.components.preprocessing.preprocessor import Preprocessor
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

    @graph_fn(split_ops=True)
    def _graph_fn_preprocess(self, inputs):
        # Integers: multiplied in float32 (PyTorch: in place on the fresh float copy, one allocation).
        return self.ops.multiply(inputs, self.factor, None if self.ops.is_floating(inputs) else "float32")
