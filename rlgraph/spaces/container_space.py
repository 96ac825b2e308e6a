"""Base class of nested spaces (Dict, Tuple)."""
import abc
import copy
from collections.abc import Mapping

from rlgraph.spaces.space import Space, join_flat_key, key_note
from rlgraph.utils.errors import RLGraphSpaceError


def to_space(value, where):
    """Turns a child given to a container into a (copied) space.

    Accepts spaces (deep-copied), gymnasium spaces, type names and spec dicts (a dict whose "type" is a
    str), other dicts (-> Dict) and tuples/lists (-> Tuple).

    Args:
        value: The child.
        where: Description of the child's place for error messages, e.g. "Dict key 'a'".
    """
    from rlgraph.spaces.dict_space import Dict
    from rlgraph.spaces.tuple_space import Tuple

    if isinstance(value, Space):
        return copy.deepcopy(value)
    if type(value).__module__.split(".")[0] == "gymnasium":
        from rlgraph.spaces.space_utils import space_from_gymnasium

        return space_from_gymnasium(value)
    if isinstance(value, str):
        return Space.from_spec(value, _path=where)
    if isinstance(value, Mapping):
        if isinstance(value.get("type"), str):
            return Space.from_spec(dict(value), _path=where)
        return Dict(value)
    if isinstance(value, (tuple, list)):
        return Tuple(tuple(value))
    raise RLGraphSpaceError(f"{where}: expected a space (or dict/tuple of spaces, or a spec), got {value!r}.")


class ContainerSpace(Space):
    """A space made of child spaces; its batch/time ranks are passed down to (and overwrite) all children.

    Nested properties (``shape``, ``dtype``, ``rank``, ``get_shape``) return python dicts/tuples in the
    container's structure; ``sample``/``zeros`` return python dicts/tuples of numpy values.
    """

    # ------------------------------------------------------------------ hooks

    @abc.abstractmethod
    def _child_keys(self):
        """Child keys in order (str for Dict, int for Tuple)."""

    @abc.abstractmethod
    def _children(self):
        """Child spaces in the order of ``_child_keys``."""

    @abc.abstractmethod
    def _pack(self, values):
        """Builds the python container (dict/tuple) from values in child order."""

    @abc.abstractmethod
    def _unpack(self, value, prefix):
        """Returns ``value``'s children in child order, or a mismatch reason (str)."""

    @abc.abstractmethod
    def _rebuild(self, children):
        """Returns a new container of this type with these children and this container's ranks."""

    # ------------------------------------------------------------------ ranks

    def _set_ranks(self, add_batch_rank, add_time_rank, time_major):
        super()._set_ranks(add_batch_rank, add_time_rank, time_major)
        for child in self._children():
            child._set_ranks(self.has_batch_rank, self.has_time_rank, self.time_major)

    # ------------------------------------------------------------------ properties

    def _nested(self, fn):
        return self._pack([fn(c) for c in self._children()])

    @property
    def shape(self):
        return self._nested(lambda c: c.shape)

    @property
    def dtype(self):
        return self._nested(lambda c: c.dtype)

    @property
    def rank(self):
        return self._nested(lambda c: c.rank)

    @property
    def flat_dim(self):
        return sum(c.flat_dim for c in self._children())

    def get_shape(self, with_batch_rank=False, with_time_rank=False):
        """Returns a nested dict/tuple of the children's ``get_shape`` results."""
        return self._nested(lambda c: c.get_shape(with_batch_rank=with_batch_rank, with_time_rank=with_time_rank))

    # ------------------------------------------------------------------ values

    def sample(self, size=None, rng=None):
        return self._nested(lambda c: c.sample(size=size, rng=rng))

    def zeros(self, size=None):
        return self._nested(lambda c: c.zeros(size=size))

    def _mismatch(self, x, prefix):
        items = self._unpack(x, prefix)
        if isinstance(items, str):
            return items
        for key, child, v in zip(self._child_keys(), self._children(), items):
            reason = child._mismatch(v, join_flat_key(prefix, key))
            if reason is not None:
                return reason
        return None

    # ------------------------------------------------------------------ flattening

    def _flatten(self, prefix, out):
        for key, child in zip(self._child_keys(), self._children()):
            child._flatten(join_flat_key(prefix, key), out)

    def _flatten_value(self, value, prefix, out):
        items = self._unpack(value, prefix)
        if isinstance(items, str):
            raise RLGraphSpaceError(f"flatten_value: {items}.")
        for key, child, v in zip(self._child_keys(), self._children(), items):
            child._flatten_value(v, join_flat_key(prefix, key), out)

    def _unflatten(self, flat, prefix, used):
        return self._pack([
            child._unflatten(flat, join_flat_key(prefix, key), used)
            for key, child in zip(self._child_keys(), self._children())
        ])

    def _map(self, fn, prefix):
        return self._rebuild([
            child._map(fn, join_flat_key(prefix, key)) for key, child in zip(self._child_keys(), self._children())
        ])

    # ------------------------------------------------------------------ equality, repr

    def _eq_key(self):
        return tuple(self._child_keys()), tuple(self._children()), self._layout_key()

    def _child_reprs(self):
        return [c._repr(False) for c in self._children()]

    def _repr(self, with_ranks):
        parts = self._child_reprs()
        if with_ranks:
            parts.extend(self._rank_tags())
        return f"{type(self).__name__}({', '.join(parts)})"

    @staticmethod
    def _wrong_type_note(prefix, expected, x):
        return f"{key_note(prefix)}expected {expected}, got {type(x).__name__}"
