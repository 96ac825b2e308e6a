"""Divides inputs by a constant divisor."""
from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.validation import Number, check_args


class Divide(Preprocessor):
    """``inputs / divisor`` (e.g. 255 for images); integer inputs are cast to float32 first. Dict/Tuple
    inputs: every leaf.

    Args:
        divisor: The divisor (a non-zero number).
    """

    __aliases__ = ("divide",)

    default_scope = "divide"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(divisor=Number(nonzero=True))

    def __init__(self, divisor, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.divisor = check_args("Divide", Divide.ARG_RULES, dict(divisor=divisor))["divisor"]

    def check_input_spaces(self, input_spaces, action_space=None):
        self.check_numeric_leaves(input_spaces["inputs"])

    @graph_fn(split_ops=True)
    def _graph_fn_preprocess(self, inputs):
        # Integers: divided in float32 (PyTorch: in place on the fresh float copy, one allocation).
        return self.ops.divide(inputs, self.divisor, None if self.ops.is_floating(inputs) else "float32")
