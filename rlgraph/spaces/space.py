"""The abstract base class of all spaces.

A space describes the shape, dtype and bounds of one item (a single observation, action, ...) plus
whether values carry a leading batch rank and/or time rank. Shapes reported by ``shape`` never include
those leading ranks; ``get_shape`` adds them on request. Time-major spaces lay values out as
``(T, B, ...)``, batch-major ones as ``(B, T, ...)``.
"""
import abc
import collections
import copy

import numpy as np

from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.specifiable import Specifiable

# Module-level default random generator for ``Space.sample``.
_RNG = np.random.default_rng()


def set_sample_seed(seed=None):
    """Re-seeds the module-level generator that ``Space.sample`` uses when no ``rng`` is given."""
    global _RNG
    _RNG = np.random.default_rng(seed)


def default_rng():
    """Returns the module-level generator that ``Space.sample`` uses when no ``rng`` is given."""
    return _RNG


def join_flat_key(prefix, key):
    """Joins a flat-key prefix and a child key with "/" (an empty prefix gives the key itself)."""
    return f"{prefix}/{key}" if prefix else str(key)


def key_note(prefix):
    """Returns the "key 'a/b': " prefix used in mismatch messages ("" at the root)."""
    return f"key '{prefix}': " if prefix else ""


def _as_flag(value, name):
    """Validates a rank flag: a bool (or 0/1)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise RLGraphSpaceError(f"`{name}` must be a bool, got {value!r}.")


class Space(Specifiable, metaclass=abc.ABCMeta):
    """Abstract base class of all spaces.

    Args:
        add_batch_rank: Whether values carry a leading batch rank.
        add_time_rank: Whether values carry a leading time rank.
        time_major: Whether the time rank comes before the batch rank (only matters with a time rank).
    """

    def __init__(self, add_batch_rank=False, add_time_rank=False, time_major=False):
        self.has_batch_rank = False
        self.has_time_rank = False
        self.time_major = False
        self._set_ranks(add_batch_rank, add_time_rank, time_major)

    # ------------------------------------------------------------------ ranks

    def _set_ranks(self, add_batch_rank, add_time_rank, time_major):
        """Sets the rank flags in place (containers also set them on all children)."""
        self.has_batch_rank = _as_flag(add_batch_rank, "add_batch_rank")
        self.has_time_rank = _as_flag(add_time_rank, "add_time_rank")
        self.time_major = _as_flag(time_major, "time_major")

    @property
    def num_leading_ranks(self):
        """Number of leading (batch/time) ranks that values of this space carry."""
        return int(self.has_batch_rank) + int(self.has_time_rank)

    @property
    def batch_axis(self):
        """Index of the batch rank in values (None without a batch rank)."""
        if not self.has_batch_rank:
            return None
        return 1 if (self.has_time_rank and self.time_major) else 0

    @property
    def time_axis(self):
        """Index of the time rank in values (None without a time rank)."""
        if not self.has_time_rank:
            return None
        return 0 if (self.time_major or not self.has_batch_rank) else 1

    def _leading_dims(self, with_batch_rank=True, with_time_rank=True):
        """Leading dims in this space's own layout; True/negative -> None, int -> size, falsy -> left out."""

        def dim(flag):
            if flag is True or isinstance(flag, (np.bool_,)):
                return None
            if isinstance(flag, (int, np.integer)):
                return None if flag < 0 else int(flag)
            raise RLGraphSpaceError(f"get_shape: rank flag must be a bool or an int, got {flag!r}.")

        b = dim(with_batch_rank) if (self.has_batch_rank and with_batch_rank) else "skip"
        t = dim(with_time_rank) if (self.has_time_rank and with_time_rank) else "skip"
        order = (t, b) if self.time_major else (b, t)
        return tuple(d for d in order if d != "skip")

    def _rank_note(self):
        """Human-readable description of the leading ranks, e.g. " (batch rank)"."""
        if self.has_batch_rank and self.has_time_rank:
            return " (time+batch ranks, time-major)" if self.time_major else " (batch+time ranks)"
        if self.has_batch_rank:
            return " (batch rank)"
        if self.has_time_rank:
            return " (time rank)"
        return ""

    def _rank_tags(self):
        """Short rank tags for reprs, e.g. ["batch", "time-major"]."""
        tags = []
        if self.has_batch_rank:
            tags.append("batch")
        if self.has_time_rank:
            tags.append("time-major" if self.time_major else "time")
        return tags

    def _layout_key(self):
        """Rank layout used in equality (``time_major`` only counts with a time rank)."""
        return self.has_batch_rank, self.has_time_rank, bool(self.time_major and self.has_time_rank)

    def with_batch_rank(self, add_batch_rank=True):
        """Returns a deep copy of this space with the batch rank added (or removed)."""
        new = copy.deepcopy(self)
        new._set_ranks(add_batch_rank, self.has_time_rank, self.time_major)
        return new

    def with_time_rank(self, add_time_rank=True, time_major=None):
        """Returns a deep copy with the time rank added (or removed); ``time_major=None`` keeps it."""
        new = copy.deepcopy(self)
        new._set_ranks(self.has_batch_rank, add_time_rank, self.time_major if time_major is None else time_major)
        return new

    def strip_ranks(self):
        """Returns a deep copy of this space without batch and time ranks (``time_major`` reset)."""
        new = copy.deepcopy(self)
        new._set_ranks(False, False, False)
        return new

    # ------------------------------------------------------------------ structure

    @property
    @abc.abstractmethod
    def shape(self):
        """Shape of one item, without batch/time ranks (containers: nested dict/tuple of shapes)."""

    @property
    @abc.abstractmethod
    def dtype(self):
        """Numpy dtype of values (containers: nested dict/tuple of dtypes)."""

    @property
    @abc.abstractmethod
    def rank(self):
        """``len(shape)`` (containers: nested dict/tuple of ranks)."""

    @property
    @abc.abstractmethod
    def flat_dim(self):
        """Number of scalars in one item (containers: summed over all children)."""

    @abc.abstractmethod
    def get_shape(self, with_batch_rank=False, with_time_rank=False):
        """Returns the shape with the requested leading ranks (containers: nested)."""

    # ------------------------------------------------------------------ values

    @staticmethod
    def _size_tuple(size):
        """Normalizes a ``size`` argument (None, int or tuple of ints) to a tuple."""
        if size is None:
            return ()
        if isinstance(size, (int, np.integer)) and not isinstance(size, (bool, np.bool_)):
            dims = (int(size),)
        elif isinstance(size, (tuple, list)):
            dims = tuple(size)
            for d in dims:
                if not isinstance(d, (int, np.integer)) or isinstance(d, (bool, np.bool_)):
                    raise RLGraphSpaceError(f"sample/zeros: `size` must hold ints, got {size!r}.")
            dims = tuple(int(d) for d in dims)
        else:
            raise RLGraphSpaceError(f"sample/zeros: `size` must be None, an int or a tuple of ints, got {size!r}.")
        if any(d < 0 for d in dims):
            raise RLGraphSpaceError(f"sample/zeros: `size` must not be negative, got {size!r}.")
        return dims

    @abc.abstractmethod
    def sample(self, size=None, rng=None):
        """Returns random values of this space.

        Args:
            size: None for one item without batch/time dims; an int for one leading dim of that size; a
                tuple for exactly those leading dims (in this space's own layout, e.g. (T, B) if time-major).
            rng: A ``numpy.random.Generator`` (default: the module-level one).

        Returns:
            A numpy array (a numpy scalar for a scalar space and ``size=None``); containers give python
            dicts/tuples of those.
        """

    @abc.abstractmethod
    def zeros(self, size=None):
        """Returns all-zero values (clipped into the bounds) in the same layout as ``sample``."""

    @abc.abstractmethod
    def _mismatch(self, x, prefix):
        """Returns None if ``x`` is in this space, else a reason (``prefix`` is the flat key so far)."""

    def contains(self, x):
        """Returns whether ``x`` (with exactly this space's leading ranks) is in this space."""
        return self._mismatch(x, "") is None

    def describe_mismatch(self, x):
        """Returns None if ``x`` is in this space, else a short reason naming the flat key."""
        return self._mismatch(x, "")

    # ------------------------------------------------------------------ flattening

    @abc.abstractmethod
    def _flatten(self, prefix, out):
        """Adds (flat key -> primitive space) entries to ``out``."""

    @abc.abstractmethod
    def _flatten_value(self, value, prefix, out):
        """Adds (flat key -> leaf value) entries to ``out``; raises RLGraphSpaceError on a mismatch."""

    @abc.abstractmethod
    def _unflatten(self, flat, prefix, used):
        """Builds the nested value from ``flat``; records consumed keys in ``used``."""

    @abc.abstractmethod
    def _map(self, fn, prefix):
        """Returns the space with every primitive space ``s`` at flat key ``k`` replaced by ``fn(k, s)``."""

    def flatten(self):
        """Returns an OrderedDict flat key -> primitive space (Dict keys sorted, Tuple in order, depth-first).

        Dict levels are joined with "/", Tuple indices are decimal strings; a primitive space flattens to
        ``{"": self}``.
        """
        out = collections.OrderedDict()
        self._flatten("", out)
        return out

    def flatten_value(self, value):
        """Returns an OrderedDict flat key -> leaf value, with the same keys as ``flatten()``.

        Raises:
            RLGraphSpaceError: If the structure of ``value`` does not match (names the key).
        """
        out = collections.OrderedDict()
        self._flatten_value(value, "", out)
        return out

    def unflatten(self, flat_mapping):
        """Builds a nested value (python dicts/tuples) in this space's structure from a flat mapping.

        Leaves may be values or spaces. Every flat key of this space must be present and no others.

        Raises:
            RLGraphSpaceError: On a missing or unexpected key.
        """
        used = set()
        result = self._unflatten(flat_mapping, "", used)
        extra = [k for k in flat_mapping if k not in used]
        if extra:
            raise RLGraphSpaceError(f"unflatten: unexpected key '{extra[0]}' (space keys: {list(self.flatten())}).")
        return result

    def map(self, fn):
        """Returns a new space with each primitive space ``s`` at flat key ``k`` replaced by ``fn(k, s)``.

        Containers are rebuilt with their own ranks (which they pass down to the new children).
        """
        return self._map(fn, "")

    # ------------------------------------------------------------------ conversion

    @classmethod
    def from_gymnasium(cls, gym_space, add_batch_rank=False, add_time_rank=False, time_major=False):
        """Converts a ``gymnasium.spaces.Space`` into an rlgraph space (see ``space_utils``)."""
        from rlgraph.spaces.space_utils import space_from_gymnasium

        return space_from_gymnasium(
            gym_space, add_batch_rank=add_batch_rank, add_time_rank=add_time_rank, time_major=time_major
        )

    @classmethod
    def from_spec(cls, spec=None, _path=None, **kwargs):
        """Like ``Specifiable.from_spec``; additionally accepts a gymnasium space.

        For Dict specs, keys that are no constructor keywords are taken as child spaces
        (``{"type": "dict", "obs": {...}}`` equals ``{"type": "dict", "spaces": {"obs": {...}}}``).
        """
        if spec is not None and type(spec).__module__.split(".")[0] == "gymnasium":
            return cls.from_gymnasium(spec, **kwargs)
        if isinstance(spec, dict):
            from rlgraph.spaces.dict_space import Dict

            klass = cls.lookup_class(spec["type"], f"{_path or cls.__name__}.type") if "type" in spec else cls
            if issubclass(klass, Dict):
                spec = dict(spec)
                spec.update(kwargs)
                kwargs = {}
                reserved = {"type", "spaces", "add_batch_rank", "add_time_rank", "time_major"}
                children = dict(spec.get("spaces") or {})
                for k in [k for k in spec if k not in reserved]:
                    children[k] = spec.pop(k)
                spec["spaces"] = children
        return super().from_spec(spec, _path=_path, **kwargs)

    # ------------------------------------------------------------------ equality, repr

    @abc.abstractmethod
    def _eq_key(self):
        """A hashable key; two spaces are equal iff their classes and keys are equal."""

    def __eq__(self, other):
        if self is other:
            return True
        if type(self) is not type(other):
            return False
        return self._eq_key() == other._eq_key()

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((type(self).__name__, self._eq_key()))

    @abc.abstractmethod
    def _repr(self, with_ranks):
        """Returns the repr, with or without the rank tags."""

    def __repr__(self):
        return self._repr(True)

    def __str__(self):
        return self._repr(True)
