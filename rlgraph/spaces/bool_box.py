"""Boolean box space."""
import numpy as np

from rlgraph.spaces.box_space import BoxSpace
from rlgraph.spaces.space import default_rng
from rlgraph.utils.errors import RLGraphSpaceError


class BoolBox(BoxSpace):
    """A box of bools (dtype ``bool``; no bounds: ``low``/``high`` are None).

    Args:
        shape: Shape of one item (default ``()``).
        dtype: Must be bool-like if given (accepted for spec compatibility).
        add_batch_rank: Whether values carry a leading batch rank.
        add_time_rank: Whether values carry a leading time rank.
        time_major: Whether the time rank comes before the batch rank.
    """

    __aliases__ = ("bool", "binary")

    def __init__(self, shape=None, dtype=None, add_batch_rank=False, add_time_rank=False, time_major=False):
        super().__init__(
            shape=shape, dtype=np.bool_ if dtype is None else dtype, add_batch_rank=add_batch_rank,
            add_time_rank=add_time_rank, time_major=time_major,
        )

    def _resolve_dtype(self, dtype):
        dt = super()._resolve_dtype(dtype)
        if dt.kind != "b":
            raise RLGraphSpaceError(f"BoolBox: dtype must be bool, got {dt}.")
        return dt

    def sample(self, size=None, rng=None):
        rng = default_rng() if rng is None else rng
        out = rng.random(self._size_tuple(size) + self._shape) < 0.5
        return self._finish(np.asarray(out, dtype=np.bool_), size)

    def zeros(self, size=None):
        return self._finish(np.zeros(self._size_tuple(size) + self._shape, dtype=np.bool_), size)

    def _repr_dtype(self):
        return []
