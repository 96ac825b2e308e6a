"""Resizes images with bilinear or area interpolation."""
import numpy as np

from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.spaces import BoxSpace
from rlgraph.utils.backend import tf, torch
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, OneOf, check_args


def area_weights(size_in, size_out):
    """The ``[size_out, size_in]`` matrix of exact area (box-filter) interpolation along one axis.

    Output pixel i covers the input interval ``[i * s, (i + 1) * s)`` with ``s = size_in / size_out``; each
    input pixel is weighted by the length of its overlap with that interval, divided by ``s``.
    """
    scale = size_in / size_out
    lows = np.arange(size_out)[:, None] * scale
    pixels = np.arange(size_in)[None, :]
    overlap = np.minimum(lows + scale, pixels + 1) - np.maximum(lows, pixels)
    return (np.maximum(overlap, 0.0) / scale).astype(np.float32)


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
        self._area_h = self._area_w = None  # Area interpolation matrices [out, in] for PyTorch.

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
        if self.interpolation == "area":
            self._area_h = area_weights(shape[0], self.height)
            self._area_w = area_weights(shape[1], self.width)

    @graph_fn(backend="tf")
    def _graph_fn_preprocess(self, inputs):
        images = tf.reshape(tf.cast(inputs, tf.float32), (-1,) + self._in_shape)
        out = tf.image.resize(images, (self.height, self.width), method=self.interpolation, antialias=False)
        leading = tf.shape(inputs)[:inputs.shape.rank - self._item_rank]
        return tf.reshape(out, tf.concat([leading, self._out_shape], axis=0))

    @graph_fn(backend="pytorch")
    def _graph_fn_preprocess(self, inputs):
        images = inputs.float().reshape((-1,) + self._in_shape)
        if self.interpolation == "bilinear":
            out = torch.nn.functional.interpolate(images.permute(0, 3, 1, 2), size=(self.height, self.width),
                                                  mode="bilinear", align_corners=False, antialias=False)
            out = out.permute(0, 2, 3, 1)
        else:
            area_h = torch.as_tensor(self._area_h, device=inputs.device)
            area_w = torch.as_tensor(self._area_w, device=inputs.device)
            out = torch.einsum("ih,nhwc,jw->nijc", area_h, images, area_w)
        return out.reshape(inputs.shape[:inputs.dim() - self._item_rank] + self._out_shape)
