"""Base class of the primitive (non-container) spaces: n-dimensional arrays of one dtype."""
import numpy as np

from rlgraph.spaces.space import Space, key_note
from rlgraph.utils.errors import RLGraphSpaceError


def normalize_shape(shape, owner="BoxSpace"):
    """Turns None, an int or a sequence of ints into a shape tuple (None stays None)."""
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise RLGraphSpaceError(
            f"{owner}: `shape` must be None, an int or a sequence of ints, got {shape!r}."
        ) from None
    for d in dims:
        if not isinstance(d, (int, np.integer)) or isinstance(d, (bool, np.bool_)) or d < 0:
            raise RLGraphSpaceError(f"{owner}: `shape` must hold non-negative ints, got {shape!r}.")
    return tuple(int(d) for d in dims)


def _preview(arr, n=3):
    """Returns the first few values of ``arr`` as a short string."""
    flat = np.ravel(arr)
    items = ", ".join(str(v) for v in flat[:n].tolist())
    return items + (", ..." if flat.size > n else "")


def _fmt_bound(v):
    """Formats one scalar bound compactly (python repr of the scalar)."""
    return repr(v.item() if isinstance(v, np.generic) else v)


class BoxSpace(Space):
    """A primitive space: arrays of a fixed ``shape`` and ``dtype``, optionally bounded by ``low``/``high``.

    ``low``/``high`` are stored broadcast to ``shape``; the properties return a numpy scalar when all
    entries are equal and an array of shape ``shape`` otherwise (None for unbounded kinds such as
    BoolBox and TextBox).

    Args:
        shape: Shape of one item (int or sequence); None infers it from array bounds (else ``()``).
        low: Lower bound (scalar or array), or None.
        high: Upper bound (scalar or array), or None.
        dtype: Numpy dtype (or anything ``np.dtype`` accepts).
        add_batch_rank: Whether values carry a leading batch rank.
        add_time_rank: Whether values carry a leading time rank.
        time_major: Whether the time rank comes before the batch rank.
    """

    def __init__(self, shape=None, low=None, high=None, dtype=None, add_batch_rank=False, add_time_rank=False,
                 time_major=False):
        self._dtype = self._resolve_dtype(dtype)
        shape = normalize_shape(shape, type(self).__name__)
        if low is None and high is None:
            self._low = self._high = None
            self._shape = shape if shape is not None else ()
        else:
            low_a = self._convert_bound(low, "low")
            high_a = self._convert_bound(high, "high")
            if shape is None:
                try:
                    shape = tuple(np.broadcast_shapes(low_a.shape, high_a.shape))
                except ValueError:
                    raise RLGraphSpaceError(
                        f"{type(self).__name__}: `low` shape {low_a.shape} and `high` shape {high_a.shape} "
                        f"do not broadcast."
                    ) from None
            try:
                self._low = np.array(np.broadcast_to(low_a, shape))
                self._high = np.array(np.broadcast_to(high_a, shape))
            except ValueError:
                raise RLGraphSpaceError(
                    f"{type(self).__name__}: `low` shape {low_a.shape} / `high` shape {high_a.shape} do not "
                    f"broadcast to `shape` {shape}."
                ) from None
            self._shape = shape
            self._check_bounds()
        super().__init__(add_batch_rank=add_batch_rank, add_time_rank=add_time_rank, time_major=time_major)

    # ------------------------------------------------------------------ hooks for subclasses

    def _resolve_dtype(self, dtype):
        """Validates and returns the numpy dtype (subclasses restrict the kind)."""
        try:
            return np.dtype(dtype)
        except TypeError:
            raise RLGraphSpaceError(f"{type(self).__name__}: invalid dtype {dtype!r}.") from None

    def _convert_bound(self, value, name):
        """Converts one bound to an array of this space's dtype."""
        raise RLGraphSpaceError(f"{type(self).__name__} takes no `{name}`.")

    def _check_bounds(self):
        """Validates ``self._low``/``self._high`` (subclasses)."""

    def _bounds_mismatch(self, arr):
        """Returns a reason if ``arr`` (dtype and shape already fine) is out of bounds, else None."""
        return None

    def _accepts_dtype(self, dt):
        """Whether values of dtype ``dt`` belong to this space (``same_kind`` cast, or int -> int)."""
        if dt.kind in "iu" and self._dtype.kind in "iu":
            return True
        return bool(np.can_cast(dt, self._dtype, "same_kind"))

    # ------------------------------------------------------------------ properties

    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def rank(self):
        return len(self._shape)

    @property
    def flat_dim(self):
        return int(np.prod(self._shape, dtype=np.int64))

    @staticmethod
    def _collapse(arr):
        if arr is None:
            return None
        if arr.size > 0 and np.all(arr == arr.flat[0]):
            return arr.flat[0]
        return arr.copy()

    @property
    def low(self):
        """Lower bound: a numpy scalar if uniform, else an array of shape ``shape`` (None if unbounded kind)."""
        return self._collapse(self._low)

    @property
    def high(self):
        """Upper bound: a numpy scalar if uniform, else an array of shape ``shape`` (None if unbounded kind)."""
        return self._collapse(self._high)

    def get_shape(self, with_batch_rank=False, with_time_rank=False):
        """Returns ``shape`` with leading ranks.

        A rank is included only if the space has it and its flag is truthy; a flag of True (or a negative
        int) gives a ``None`` placeholder, a positive int gives that size. Time-major spaces put time
        first ((T, B, ...)), batch-major ones batch first ((B, T, ...)).
        """
        return self._leading_dims(with_batch_rank, with_time_rank) + self._shape

    # ------------------------------------------------------------------ values

    def _finish(self, arr, size):
        """Returns a numpy scalar for ``size=None`` on a scalar space, else the array."""
        if size is None and arr.ndim == 0:
            return arr[()]
        return arr

    def _mismatch(self, x, prefix):
        # Hot path (input checks of every API call): the messages' parts are only built for a mismatch.
        try:
            arr = x if type(x) is np.ndarray else np.asarray(x)
        except Exception as e:  # ragged lists and the like
            return f"{key_note(prefix)}cannot convert {type(x).__name__} to an array ({e})"
        n_lead = int(self.has_batch_rank) + int(self.has_time_rank)
        if arr.ndim != n_lead + len(self._shape) or arr.shape[n_lead:] != self._shape:
            expected = self.get_shape(with_batch_rank=True, with_time_rank=True)
            return f"{key_note(prefix)}expected shape {expected}{self._rank_note()}, got {tuple(arr.shape)}"
        if arr.dtype != self._dtype and not self._accepts_dtype(arr.dtype):
            return f"{key_note(prefix)}expected dtype {self._dtype}, got {arr.dtype} (values {_preview(arr)})"
        reason = self._bounds_mismatch(arr)
        if reason is not None:
            return key_note(prefix) + reason
        return None

    def _first_bad(self, arr, ok):
        """Returns (value, index-in-item, full index) of the first False entry of ``ok``."""
        idx = tuple(int(i) for i in np.argwhere(~ok)[0])
        item_idx = idx[self.num_leading_ranks:]
        return arr[idx], item_idx, idx

    # ------------------------------------------------------------------ flattening

    def _flatten(self, prefix, out):
        out[prefix] = self

    def _flatten_value(self, value, prefix, out):
        out[prefix] = value

    def _unflatten(self, flat, prefix, used):
        if prefix not in flat:
            raise RLGraphSpaceError(
                f"unflatten: missing key '{prefix}'" + (" (the root of a primitive space)" if not prefix else "") + "."
            )
        used.add(prefix)
        return flat[prefix]

    def _map(self, fn, prefix):
        return fn(prefix, self)

    # ------------------------------------------------------------------ equality, repr

    def _eq_key(self):
        def bounds(a):
            return None if a is None else tuple(a.ravel().tolist())

        return self._shape, self._dtype.str, bounds(self._low), bounds(self._high), self._layout_key()

    def _bounds_repr(self):
        """Bounds part of the repr ("" if none shown)."""
        return ""

    def _repr(self, with_ranks):
        parts = []
        b = self._bounds_repr()
        if b:
            parts.append(b)
        parts.append(f"shape={self._shape}")
        parts.extend(self._repr_dtype())
        if with_ranks:
            parts.extend(self._rank_tags())
        return f"{type(self).__name__}({', '.join(parts)})"

    def _repr_dtype(self):
        return [str(self._dtype)]

    @staticmethod
    def _array_repr(a):
        return np.array2string(a, threshold=6, edgeitems=2, separator=",").replace("\n", "")

