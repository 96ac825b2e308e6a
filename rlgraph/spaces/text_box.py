"""Text (string) box space."""
import numpy as np

from rlgraph.spaces.box_space import BoxSpace
from rlgraph.spaces.space import default_rng
from rlgraph.utils.errors import RLGraphSpaceError

_CHARSET = np.array(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "))


class TextBox(BoxSpace):
    """A box of strings (dtype ``np.str_``, numpy unicode; no bounds).

    Contains str/unicode arrays (also bytes and object arrays holding only str/bytes). ``sample`` gives
    random strings of 1-8 alphanumeric characters; ``zeros`` gives empty strings.

    Args:
        shape: Shape of one item (default ``()``).
        dtype: Must be a str/unicode dtype if given (accepted for spec compatibility).
        add_batch_rank: Whether values carry a leading batch rank.
        add_time_rank: Whether values carry a leading time rank.
        time_major: Whether the time rank comes before the batch rank.
    """

    __aliases__ = ("text", "str", "string")

    def __init__(self, shape=None, dtype=None, add_batch_rank=False, add_time_rank=False, time_major=False):
        super().__init__(
            shape=shape, dtype=np.str_ if dtype is None else dtype, add_batch_rank=add_batch_rank,
            add_time_rank=add_time_rank, time_major=time_major,
        )

    def _resolve_dtype(self, dtype):
        dt = super()._resolve_dtype(dtype)
        if dt.kind != "U":
            raise RLGraphSpaceError(f"TextBox: dtype must be a unicode str type, got {dt}.")
        return np.dtype(np.str_)

    def _accepts_dtype(self, dt):
        return dt.kind in "US" or dt.kind == "O"

    def _bounds_mismatch(self, arr):
        if arr.dtype.kind != "O":
            return None
        for v in arr.ravel().tolist():
            if not isinstance(v, (str, bytes)):
                return f"expected str values, got {type(v).__name__} {v!r}"
        return None

    def sample(self, size=None, rng=None):
        rng = default_rng() if rng is None else rng
        out_shape = self._size_tuple(size) + self._shape
        n = int(np.prod(out_shape, dtype=np.int64))
        lengths = rng.integers(1, 9, size=n)
        chars = rng.integers(0, len(_CHARSET), size=int(lengths.sum()))
        words, pos = [], 0
        for length in lengths.tolist():
            words.append("".join(_CHARSET[chars[pos:pos + length]].tolist()))
            pos += length
        out = np.array(words, dtype=np.str_).reshape(out_shape)
        return self._finish(out, size)

    def zeros(self, size=None):
        """Empty strings."""
        return self._finish(np.full(self._size_tuple(size) + self._shape, "", dtype=np.str_), size)

    def _repr_dtype(self):
        return []
