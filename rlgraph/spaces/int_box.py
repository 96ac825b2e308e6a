"""Discrete (integer) box space."""
import numpy as np

from rlgraph.spaces.box_space import BoxSpace, _fmt_bound
from rlgraph.spaces.space import default_rng
from rlgraph.utils.errors import RLGraphSpaceError


class IntBox(BoxSpace):
    """A box of integers in ``[low, high)`` (``high`` is always EXCLUSIVE).

    ``IntBox(n)`` is categorical in ``[0, n)`` (``n`` may be an array, e.g. for multi-discrete spaces);
    ``IntBox(high=n)`` is the same; ``IntBox()`` is unbounded (the dtype's whole range).

    Bounds are stored as int64 for dtypes narrower than 64 bits, so that ``high`` can be ``max + 1``
    (e.g. ``IntBox(256, dtype="uint8")`` holds all uint8 values); for (u)int64 they have the dtype
    itself and ``high`` is at most the dtype's max.

    Args:
        low: Lower bound (inclusive; scalar or array). Alone (without ``high``) it is taken as ``n``.
        high: Upper bound (exclusive; scalar or array).
        shape: Shape of one item; None infers it from array bounds (else ``()``).
        dtype: An integer dtype (default int32).
        add_batch_rank: Whether values carry a leading batch rank.
        add_time_rank: Whether values carry a leading time rank.
        time_major: Whether the time rank comes before the batch rank.
    """

    __aliases__ = ("int", "discrete", "categorical")

    def __init__(self, low=None, high=None, shape=None, dtype="int32", add_batch_rank=False, add_time_rank=False,
                 time_major=False):
        dtype = "int32" if dtype is None else dtype
        if low is not None and high is None:
            low, high = 0, low
        elif low is None and high is not None:
            low = 0
        elif low is None and high is None:
            dt = self._resolve_dtype(dtype)
            low, high = np.iinfo(dt).min, self._high_limit(dt)
        super().__init__(
            shape=shape, low=low, high=high, dtype=dtype, add_batch_rank=add_batch_rank,
            add_time_rank=add_time_rank, time_major=time_major,
        )

    def _resolve_dtype(self, dtype):
        dt = super()._resolve_dtype(dtype)
        if dt.kind not in "iu":
            raise RLGraphSpaceError(f"IntBox: dtype must be an integer type, got {dt}.")
        return dt

    def _convert_bound(self, value, name):
        try:
            arr = np.asarray(value)
        except Exception as e:
            raise RLGraphSpaceError(f"IntBox: `{name}` is not numeric: {value!r} ({e}).") from None
        if arr.dtype.kind == "f":
            if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
                raise RLGraphSpaceError(f"IntBox: `{name}` must hold finite integer values, got {value!r}.")
        elif arr.dtype.kind not in "biu":
            raise RLGraphSpaceError(f"IntBox: `{name}` must hold integers, got {value!r}.")
        info = np.iinfo(self._dtype)
        limit = self._high_limit(self._dtype)
        if arr.size and (int(arr.min()) < info.min or int(arr.max()) > limit):
            raise RLGraphSpaceError(
                f"IntBox: `{name}` {value!r} is outside the range of {self._dtype} bounds [{info.min}, {limit}]."
            )
        return arr.astype(self._bound_dtype(self._dtype))

    @staticmethod
    def _bound_dtype(dtype):
        """Dtype in which bounds are stored: int64 for dtypes narrower than 64 bits, else the dtype."""
        return np.dtype(np.int64) if dtype.itemsize < 8 else dtype

    @classmethod
    def _high_limit(cls, dtype):
        """Largest allowed (exclusive) ``high``: ``max + 1`` where the bound dtype can hold it."""
        return min(int(np.iinfo(dtype).max) + 1, int(np.iinfo(cls._bound_dtype(dtype)).max))

    def _check_bounds(self):
        bad = self._low >= self._high
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise RLGraphSpaceError(
                f"IntBox: need low < high (high is exclusive), got low={self._low[idx]}, high={self._high[idx]}"
                + (f" at index {idx}." if idx else ".")
            )

    @property
    def is_unbounded(self):
        """Whether the bounds span the full range of a dtype of 32 or more bits (as ``IntBox()`` does).

        The full range of a narrower dtype (e.g. uint8 in ``[0, 256)``) counts as bounded (categorical).
        """
        if self._dtype.itemsize < 4:
            return False
        full_low = (self._low == np.iinfo(self._dtype).min).all()
        return bool(full_low and (self._high == self._high_limit(self._dtype)).all())

    @property
    def num_categories(self):
        """``high - low`` (python int) if both bounds are uniform and the box is bounded, else None."""
        if self.is_unbounded:
            return None
        low, high = self.low, self.high
        if np.ndim(low) == 0 and np.ndim(high) == 0:
            return int(high) - int(low)
        return None

    def _bounds_mismatch(self, arr):
        ok = (arr >= self._low) & (arr < self._high)
        if ok.all():
            return None
        v, item_idx, idx = self._first_bad(arr, ok)
        at = f" at index {idx}" if idx else ""
        return f"value {v} outside [{self._low[item_idx]}, {self._high[item_idx]}){at}"

    def sample(self, size=None, rng=None):
        rng = default_rng() if rng is None else rng
        out_shape = self._size_tuple(size) + self._shape
        out = rng.integers(self._low, self._high, size=out_shape, dtype=self._dtype)
        return self._finish(np.asarray(out, dtype=self._dtype), size)

    def zeros(self, size=None):
        """All zeros, clipped into ``[low, high - 1]``."""
        out_shape = self._size_tuple(size) + self._shape
        out = np.clip(np.zeros(out_shape, dtype=self._dtype), self._low, self._high - 1).astype(self._dtype, copy=False)
        return self._finish(out, size)

    def _bounds_repr(self):
        if self.is_unbounded:
            return ""
        low, high = self.low, self.high
        if np.ndim(low) == 0 and np.ndim(high) == 0:
            return _fmt_bound(high) if low == 0 else f"[{_fmt_bound(low)}, {_fmt_bound(high)})"
        if np.ndim(low) == 0 and low == 0:
            return self._array_repr(self._high)
        return f"low={self._array_repr(self._low)}, high={self._array_repr(self._high)}"
