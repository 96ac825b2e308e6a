"""Tuple container space."""
from rlgraph.spaces.container_space import ContainerSpace, to_space
from rlgraph.spaces.space import key_note
from rlgraph.utils.errors import RLGraphSpaceError


class Tuple(ContainerSpace):
    """A space of python tuples (lists are accepted as values too) with a fixed number of children.

    Built from positional spaces, a single list/tuple of spaces, or ``spaces=[...]`` (for specs).
    Children may be spaces, nested python dicts/tuples, spec dicts or gymnasium spaces.

    Args:
        *components: The child spaces (or one list/tuple of them).
        spaces: Alternative to ``components`` (a list/tuple of child spaces).
        add_batch_rank: Whether values carry a leading batch rank (set on all children).
        add_time_rank: Whether values carry a leading time rank (set on all children).
        time_major: Whether the time rank comes before the batch rank (set on all children).
    """

    def __init__(self, *components, spaces=None, add_batch_rank=False, add_time_rank=False, time_major=False):
        if spaces is not None:
            if components:
                raise RLGraphSpaceError("Tuple: give the child spaces either positionally or as `spaces`, not both.")
            if not isinstance(spaces, (list, tuple)):
                raise RLGraphSpaceError(f"Tuple: `spaces` must be a list/tuple of spaces, got {spaces!r}.")
            components = tuple(spaces)
        elif len(components) == 1 and isinstance(components[0], (list, tuple)):
            components = tuple(components[0])
        self._spaces = tuple(to_space(c, f"Tuple index {i}") for i, c in enumerate(components))
        super().__init__(add_batch_rank=add_batch_rank, add_time_rank=add_time_rank, time_major=time_major)

    # ------------------------------------------------------------------ container hooks

    def _child_keys(self):
        return list(range(len(self._spaces)))

    def _children(self):
        return list(self._spaces)

    def _pack(self, values):
        return tuple(values)

    def _unpack(self, value, prefix):
        if not isinstance(value, (tuple, list)):
            return self._wrong_type_note(prefix, "a tuple", value)
        if len(value) != len(self._spaces):
            return f"{key_note(prefix)}expected a tuple of length {len(self._spaces)}, got length {len(value)}"
        return list(value)

    def _rebuild(self, children):
        return Tuple(tuple(children), add_batch_rank=self.has_batch_rank, add_time_rank=self.has_time_rank,
                     time_major=self.time_major)

    # ------------------------------------------------------------------ sequence interface

    def __getitem__(self, index):
        if isinstance(index, str):
            head, _, rest = index.partition("/")
            try:
                child = self._spaces[int(head)]
                return child[rest] if rest else child
            except (KeyError, IndexError, TypeError, ValueError):
                raise KeyError(f"Tuple space has no key {index!r} (length {len(self._spaces)}).") from None
        return self._spaces[index]

    def __len__(self):
        return len(self._spaces)

    def __iter__(self):
        return iter(self._spaces)
