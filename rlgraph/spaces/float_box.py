"""Continuous box space."""
import numpy as np

from rlgraph.spaces.box_space import BoxSpace, _fmt_bound
from rlgraph.spaces.space import default_rng
from rlgraph.utils.errors import RLGraphSpaceError


class FloatBox(BoxSpace):
    """A box of floats in ``[low, high]`` (both inclusive; default unbounded: ``(-inf, inf)``).

    Sampling draws uniformly where both bounds are finite, standard-normally where both are infinite,
    and ``low + Exp(1)`` / ``high - Exp(1)`` where only one bound is finite.

    Args:
        low: Lower bound (scalar or array; default -inf).
        high: Upper bound (scalar or array; default inf).
        shape: Shape of one item; None infers it from array bounds (else ``()``).
        dtype: A float dtype (default float32).
        add_batch_rank: Whether values carry a leading batch rank.
        add_time_rank: Whether values carry a leading time rank.
        time_major: Whether the time rank comes before the batch rank.
    """

    __aliases__ = ("float", "continuous")

    def __init__(self, low=None, high=None, shape=None, dtype="float32", add_batch_rank=False, add_time_rank=False,
                 time_major=False):
        super().__init__(
            shape=shape,
            low=-np.inf if low is None else low,
            high=np.inf if high is None else high,
            dtype="float32" if dtype is None else dtype,
            add_batch_rank=add_batch_rank,
            add_time_rank=add_time_rank,
            time_major=time_major,
        )

    def _resolve_dtype(self, dtype):
        dt = super()._resolve_dtype(dtype)
        if dt.kind != "f":
            raise RLGraphSpaceError(f"FloatBox: dtype must be a float type, got {dt}.")
        return dt

    def _convert_bound(self, value, name):
        try:
            arr = np.asarray(value)
        except Exception as e:
            raise RLGraphSpaceError(f"FloatBox: `{name}` is not numeric: {value!r} ({e}).") from None
        if arr.dtype.kind not in "biuf":
            raise RLGraphSpaceError(f"FloatBox: `{name}` must be numeric, got {value!r}.")
        with np.errstate(over="ignore"):
            arr = arr.astype(self._dtype) + self._dtype.type(0)  # "+ 0" turns -0.0 into 0.0
        if np.isnan(arr).any():
            raise RLGraphSpaceError(f"FloatBox: `{name}` must not be NaN, got {value!r}.")
        return arr

    def _check_bounds(self):
        bad = self._low > self._high
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise RLGraphSpaceError(
                f"FloatBox: low > high ({self._low[idx]} > {self._high[idx]}"
                + (f" at index {idx})." if idx else ").")
            )

    @property
    def is_bounded(self):
        """Whether all bounds are finite."""
        return bool(np.isfinite(self._low).all() and np.isfinite(self._high).all())

    def _bounds_mismatch(self, arr):
        with np.errstate(invalid="ignore"):
            ok = (arr >= self._low) & (arr <= self._high)
        if ok.all():
            return None
        v, item_idx, idx = self._first_bad(arr, ok)
        at = f" at index {idx}" if idx else ""
        return f"value {v} outside [{self._low[item_idx]}, {self._high[item_idx]}]{at}"

    def sample(self, size=None, rng=None):
        rng = default_rng() if rng is None else rng
        out_shape = self._size_tuple(size) + self._shape
        low = np.broadcast_to(self._low.astype(np.float64), out_shape)
        high = np.broadcast_to(self._high.astype(np.float64), out_shape)
        lf, hf = np.isfinite(low), np.isfinite(high)
        out = np.empty(out_shape, dtype=np.float64)
        m = lf & hf
        if m.any():
            u = rng.random(int(m.sum()))
            out[m] = low[m] * (1.0 - u) + high[m] * u
        m = lf & ~hf
        if m.any():
            out[m] = low[m] + rng.exponential(size=int(m.sum()))
        m = ~lf & hf
        if m.any():
            out[m] = high[m] - rng.exponential(size=int(m.sum()))
        m = ~lf & ~hf
        if m.any():
            out[m] = rng.standard_normal(int(m.sum()))
        with np.errstate(over="ignore"):
            out = out.astype(self._dtype)
        out = np.clip(out, self._low, self._high).astype(self._dtype, copy=False)
        return self._finish(out, size)

    def zeros(self, size=None):
        """All zeros, clipped into ``[low, high]``."""
        out_shape = self._size_tuple(size) + self._shape
        out = np.clip(np.zeros(out_shape, dtype=self._dtype), self._low, self._high).astype(self._dtype, copy=False)
        return self._finish(out, size)

    def _bounds_repr(self):
        if not (np.isfinite(self._low).any() or np.isfinite(self._high).any()):
            return ""
        low, high = self.low, self.high
        if np.ndim(low) == 0 and np.ndim(high) == 0:
            return f"[{_fmt_bound(low)}, {_fmt_bound(high)}]"
        return f"low={self._array_repr(self._low)}, high={self._array_repr(self._high)}"
