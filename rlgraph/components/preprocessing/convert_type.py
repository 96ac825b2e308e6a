"""Casts inputs to another dtype."""
import numpy as np

from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.validation import Rule, check_args

_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


class DTypeName(Rule):
    """A rule (``rlgraph.utils.validation``): a dtype numpy reads (``"float32"``, ``"uint8"``, ``np.int64``,
    ``"f4"``, ...) among ``_DTYPES``; normalized to its name."""

    def describe(self):
        return f"a dtype, one of {', '.join(_DTYPES)}"

    def ok(self, value):
        try:
            name = np.dtype(value).name if value is not None else None
        except TypeError:
            name = None
        return (True, name) if name in _DTYPES else (False, None)

    def json(self):
        return {"type": "string", "minLength": 1, "examples": list(_DTYPES)}


class ConvertType(Preprocessor):
    """Casts inputs to ``to_dtype`` (floats to integers truncate toward zero; to bool: non-zero is True).
    Dict/Tuple inputs: every leaf.

    Args:
        to_dtype: One of float16, float32, float64, int8, int16, int32, int64, uint8, bool.
    """

    __aliases__ = ("convert-type", "cast")

    default_scope = "convert-type"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(to_dtype=DTypeName())

    def __init__(self, to_dtype="float32", scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.to_dtype = check_args("ConvertType", ConvertType.ARG_RULES, dict(to_dtype=to_dtype))["to_dtype"]

    def check_input_spaces(self, input_spaces, action_space=None):
        self.check_numeric_leaves(input_spaces["inputs"], allow_bool=True)

    @graph_fn(split_ops=True)
    def _graph_fn_preprocess(self, inputs):
        return self.ops.cast(inputs, self.to_dtype)  # To bool: non-zero (NaN too) is True on every backend.
