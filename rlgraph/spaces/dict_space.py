"""Dict container space."""
from collections.abc import Mapping

from rlgraph.spaces.container_space import ContainerSpace, to_space
from rlgraph.spaces.space import join_flat_key
from rlgraph.utils.errors import RLGraphSpaceError


class Dict(ContainerSpace):
    """A space of python dicts with fixed (sorted) string keys.

    Built from a dict and/or keyword arguments; values may be spaces, nested python dicts/tuples/lists
    (converted to Dict/Tuple), spec dicts (``{"type": "float-box", ...}``) or gymnasium spaces. Keys must
    be non-empty strings without "/". ``space["a/b"]`` looks up nested children by flat key.

    Args:
        spaces: A dict of child spaces (optional).
        add_batch_rank: Whether values carry a leading batch rank (set on all children).
        add_time_rank: Whether values carry a leading time rank (set on all children).
        time_major: Whether the time rank comes before the batch rank (set on all children).
        **kwargs: More children by key.
    """

    def __init__(self, spaces=None, add_batch_rank=False, add_time_rank=False, time_major=False, **kwargs):
        merged = {}
        if spaces is not None:
            if isinstance(spaces, Dict):
                spaces = dict(spaces.items())
            if not isinstance(spaces, Mapping):
                raise RLGraphSpaceError(f"Dict: `spaces` must be a dict of spaces, got {spaces!r}.")
            merged.update(spaces)
        for k, v in kwargs.items():
            if k in merged:
                raise RLGraphSpaceError(f"Dict: key '{k}' given both in `spaces` and as a keyword.")
            merged[k] = v
        for k in merged:
            if not isinstance(k, str):
                raise RLGraphSpaceError(f"Dict: keys must be strings, got {k!r} ({type(k).__name__}).")
            if not k or "/" in k:
                raise RLGraphSpaceError(f"Dict: keys must be non-empty and must not contain '/', got {k!r}.")
        self._spaces = {k: to_space(merged[k], f"Dict key '{k}'") for k in sorted(merged)}
        super().__init__(add_batch_rank=add_batch_rank, add_time_rank=add_time_rank, time_major=time_major)

    # ------------------------------------------------------------------ container hooks

    def _child_keys(self):
        return list(self._spaces)

    def _children(self):
        return list(self._spaces.values())

    def _pack(self, values):
        return dict(zip(self._spaces, values))

    def _unpack(self, value, prefix):
        if not isinstance(value, Mapping):
            return self._wrong_type_note(prefix, "a dict", value)
        for k in self._spaces:
            if k not in value:
                return f"missing key '{join_flat_key(prefix, k)}'"
        extra = sorted(str(k) for k in value if k not in self._spaces)
        if extra:
            return f"unexpected key '{join_flat_key(prefix, extra[0])}'"
        return [value[k] for k in self._spaces]

    def _rebuild(self, children):
        return Dict(dict(zip(self._spaces, children)), add_batch_rank=self.has_batch_rank,
                    add_time_rank=self.has_time_rank, time_major=self.time_major)

    # ------------------------------------------------------------------ mapping interface

    def __getitem__(self, key):
        try:
            if isinstance(key, str) and "/" in key:
                head, _, rest = key.partition("/")
                return self._spaces[head][rest]
            return self._spaces[key]
        except (KeyError, IndexError, TypeError, ValueError):
            raise KeyError(f"Dict space has no key {key!r} (keys: {list(self._spaces)}).") from None

    def get(self, key, default=None):
        """Returns the child at ``key`` (a flat key "a/b" works too), or ``default``."""
        try:
            return self[key]
        except (KeyError, IndexError, TypeError):
            return default

    def keys(self):
        return self._spaces.keys()

    def values(self):
        return self._spaces.values()

    def items(self):
        return self._spaces.items()

    def __len__(self):
        return len(self._spaces)

    def __contains__(self, key):
        return key in self._spaces

    def __iter__(self):
        return iter(self._spaces)

    def _child_reprs(self):
        return [
            f"{k if k.isidentifier() else repr(k)}={c._repr(False)}" for k, c in self._spaces.items()
        ]

