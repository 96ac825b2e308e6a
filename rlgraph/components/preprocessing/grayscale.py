"""Converts color images to gray scale."""
import numpy as np

from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.spaces import BoxSpace
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import ListOf, Number, check_args


class GrayScale(Preprocessor):
    """A weighted sum over the last (color) axis, by default with the ITU-R BT.601 luma weights
    (0.299, 0.587, 0.114) for RGB.

    The output is float32: ``[..., H, W]``, or ``[..., H, W, 1]`` with ``keep_rank``.

    Args:
        weights: One weight per color channel.
        keep_rank: Keep the color axis (with size 1) instead of dropping it.
    """

    __aliases__ = ("grayscale", "gray-scale")

    default_scope = "grayscale"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(weights=ListOf(Number(), min_items=1, what="a non-empty list of numbers"))

    def __init__(self, weights=(0.299, 0.587, 0.114), keep_rank=False, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        if isinstance(weights, (tuple, np.ndarray)):
            weights = list(weights)
        weights = check_args("GrayScale", GrayScale.ARG_RULES, dict(weights=weights))["weights"]
        self.weights = np.asarray(weights, dtype=np.float32)
        self.keep_rank = keep_rank

    def check_input_spaces(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        self.check_numeric_leaves(space)
        if not isinstance(space, BoxSpace) or space.rank < 1 or space.shape[-1] != self.weights.size:
            raise RLGraphSpaceError(f"GrayScale, API method 'preprocess', argument 'inputs': expected images whose "
                                    f"last axis has {self.weights.size} color channels, got {space!r}.")

    @graph_fn
    def _graph_fn_preprocess(self, inputs):
        ops = self.ops
        x = ops.cast(inputs, "float32")
        gray = ops.tensordot(x, ops.constant(self.weights, like=x), axes=1)
        return gray[..., None] if self.keep_rank else gray
