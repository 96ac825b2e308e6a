"""Casts inputs to another dtype."""
import numpy as np

from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.utils.backend import tf, torch
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphSpecError

_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


class ConvertType(Preprocessor):
    """Casts inputs to ``to_dtype`` (floats to integers truncate toward zero; to bool: non-zero is True).
    Dict/Tuple inputs: every leaf.

    Args:
        to_dtype: One of float16, float32, float64, int8, int16, int32, int64, uint8, bool.
    """

    __aliases__ = ("convert-type", "cast")

    default_scope = "convert-type"

    def __init__(self, to_dtype="float32", scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        try:
            name = np.dtype(to_dtype).name
        except TypeError:
            name = None
        if name not in _DTYPES:
            raise RLGraphSpecError(f"ConvertType: to_dtype must be one of {', '.join(_DTYPES)}, got {to_dtype!r}.")
        self.to_dtype = name

    def check_input_spaces(self, input_spaces, action_space=None):
        self.check_numeric_leaves(input_spaces["inputs"], allow_bool=True)

    @graph_fn(backend="tf", split_ops=True)
    def _graph_fn_preprocess(self, inputs):
        if self.to_dtype == "bool":
            return tf.not_equal(inputs, tf.zeros((), inputs.dtype))
        return tf.cast(inputs, self.to_dtype)

    @graph_fn(backend="pytorch", split_ops=True)
    def _graph_fn_preprocess(self, inputs):
        return inputs.to(getattr(torch, self.to_dtype))
