"""Clips inputs into an interval."""
import numpy as np

from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.validation import Number, check_args, spec_error


class Clip(Preprocessor):
    """``min(max(inputs, min_value), max_value)``, keeping the dtype (for integer inputs the bounds are rounded
    inward and limited to the dtype's range). Dict/Tuple inputs: every leaf.

    Args:
        min_value: The lower bound.
        max_value: The upper bound.
    """

    __aliases__ = ("clip",)

    default_scope = "clip"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(min_value=Number(finite=False), max_value=Number(finite=False))

    def __init__(self, min_value, max_value, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        check_args("Clip", Clip.ARG_RULES, dict(min_value=min_value, max_value=max_value))
        if min_value > max_value:
            raise spec_error("Clip", "min_value", f"{min_value} is greater than max_value {max_value}.")
        self.min_value = min_value
        self.max_value = max_value

    def check_input_spaces(self, input_spaces, action_space=None):
        self.check_numeric_leaves(input_spaces["inputs"])

    def bounds_for(self, int_range=None):
        """``(low, high)`` as Python numbers: floats, or for integer inputs with ``int_range = (min, max)`` of
        their dtype, ints rounded inward and limited to that range."""
        if int_range is None:
            return float(self.min_value), float(self.max_value)
        low = min(max(int(np.ceil(self.min_value)), int_range[0]), int_range[1])
        high = max(min(int(np.floor(self.max_value)), int_range[1]), int_range[0])
        return low, high

    @graph_fn(split_ops=True)
    def _graph_fn_preprocess(self, inputs):
        dtype = self.ops.dtype(inputs)
        info = None if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
        low, high = self.bounds_for(None if info is None else (int(info.min), int(info.max)))
        return self.ops.clip(inputs, low, high)
