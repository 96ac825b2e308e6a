"""Resizes images with bilinear or area interpolation."""
from rlgraph.backends.ops import area_weights  # noqa: F401  (the "area" weights, kept importable from here)
from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.spaces import BoxSpace
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, OneOf, check_args


class ImageResize(Preprocessor):
    """Resizes images ``[H, W, C]`` or ``[H, W]`` (any leading ranks) to ``[height, width, ...]``, as float32.

    "bilinear" samples at pixel centers (half-pixel offsets, no anti-aliasing), as ``tf.image.resize`` and
    ``torch.nn.functional.interpolate(align_corners=False)`` do. "area" averages each output pixel's exact
    footprint (a box filter), as ``tf.image.resize(method="area")`` does; PyTorch applies the same weights as
    two matrix products (PyTorch's own "area" mode rounds footprints to whole pixels).

    Args:
        width: Output width.
        height: Output height.
        interpolation: "bilinear" or "area".
    """

    __aliases__ = ("resize", "image-resize")

    default_scope = "image-resize"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(width=Int(min=1), height=Int(min=1), interpolation=OneOf("bilinear", "area", ignore_case=True))

    def __init__(self, width, height, interpolation="bilinear", scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        args = check_args("ImageResize", ImageResize.ARG_RULES,
                          dict(width=width, height=height, interpolation=interpolation))
        self.width = args["width"]
        self.height = args["height"]
        self.interpolation = args["interpolation"]
        self._item_rank = None
        self._in_shape = self._out_shape = None  # Item shapes (the input's with a channel axis).

    def check_input_spaces(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        if not isinstance(space, BoxSpace) or space.rank not in (2, 3):
            raise RLGraphSpaceError(f"ImageResize, API method 'preprocess', argument 'inputs': expected images of "
                                    f"shape [H, W, C] or [H, W] (plus batch/time ranks), got {space!r}.")
        self.check_numeric_leaves(space)

    def create_variables(self, input_spaces, action_space=None):
        shape = input_spaces["inputs"].shape
        self._item_rank = len(shape)
        self._in_shape = shape if len(shape) == 3 else shape + (1,)
        self._out_shape = (self.height, self.width) + shape[2:]

    @graph_fn
    def _graph_fn_preprocess(self, inputs):
        ops = self.ops
        images = ops.reshape(ops.cast(inputs, "float32"), (-1,) + self._in_shape)
        out = ops.resize_images(images, (self.height, self.width), self.interpolation)
        leading = ops.shape(inputs)[:ops.ndim(inputs) - self._item_rank]
        return ops.reshape(out, tuple(leading) + self._out_shape)
