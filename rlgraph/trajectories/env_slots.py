"""The environment-id -> row-slot table that all trajectory builders share.

Builders receive rows for any subset of environment ids, in any order. ``EnvSlots`` maps each id to a row
slot of preallocated numpy storage (lazily allocated from the first step, grown by doubling when more ids are
live than slots exist) and keeps per-slot bookkeeping arrays (counters, flags). Slots of dropped ids are
reused, so the storage stays bounded by the number of ids live at one time. Lookups are vectorized
(``np.searchsorted`` on a sorted id table, plus a fast path for the same ids as in the previous call): no
Python loop over environments.
"""
import numpy as np
import optree

from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphError


def as_env_ids(owner, env_ids, name="env_ids"):
    """``env_ids`` as a 1-D int64 array of non-negative ids; raises ``RLGraphError`` otherwise."""
    ids = np.asarray(env_ids)
    if ids.ndim != 1:
        raise RLGraphError(f"{owner}: {name} must be a 1-D array of ints, got shape {ids.shape}.")
    if ids.size == 0:
        return ids.astype(np.int64)
    if ids.dtype.kind not in "iu":
        raise RLGraphError(f"{owner}: {name} must hold ints, got dtype {ids.dtype}.")
    ids = ids.astype(np.int64, copy=False)
    if ids.min() < 0:
        raise RLGraphError(f"{owner}: {name} must be >= 0, got {ids[ids < 0][:5].tolist()}.")
    return ids


def step_signature(step):
    """``((key, dtype, shape), ...)`` of a flat dict of numpy arrays, else None.

    Builders remember the signature of the last step that passed all their checks: a step with the same
    signature (and the same env ids) passes them too, so its checks are skipped (the per-step fast path).
    """
    if type(step) is not dict:
        return None
    try:
        return tuple([(k, v.dtype, v.shape) for k, v in step.items()])
    except AttributeError:  # A nested value or a list.
        return None


def _path_name(path):
    return "/".join(str(p) for p in path)


def check_step(owner, step, num_rows, name="step", required=(), reserved=()):
    """Checks a step dict and returns a shallow copy whose leaves are numpy arrays.

    Args:
        owner: Named in error messages.
        step: A dict of per-row values (nested dicts/tuples allowed; a list is one array-like value), leading
            dimension ``num_rows``.
        num_rows: The expected leading dimension (the number of env ids).
        name: The argument's name in error messages.
        required: Keys that must be present.
        reserved: Keys that must be absent (the builder adds them to its output).

    Raises:
        RLGraphError: Not a dict, a required key missing, a reserved key present, or a leaf whose leading
            dimension is not ``num_rows``.
    """
    if not isinstance(step, dict):
        raise RLGraphError(f"{owner}: {name} must be a dict of per-row values, got {type(step).__name__}.")
    missing = [k for k in required if k not in step]
    if missing:
        raise RLGraphError(f"{owner}: {name} lacks the required key(s) {missing}; it has {sorted(map(str, step))}.")
    clash = [k for k in reserved if k in step]
    if clash:
        raise RLGraphError(f"{owner}: {name} must not have the key(s) {clash}: the builder adds them to its output.")
    if all(type(v) is np.ndarray for v in step.values()):  # A flat dict of arrays (the usual step): no tree walk.
        for k, v in step.items():
            if v.ndim == 0 or v.shape[0] != num_rows:
                raise RLGraphError(f"{owner}: {name}['{k}'] has shape {v.shape}; expected a leading dimension of "
                                   f"{num_rows} (one row per env id).")
        return dict(step)
    leaves, spec = optree.tree_flatten(step, is_leaf=lambda x: isinstance(x, list))
    leaves = [np.asarray(leaf) for leaf in leaves]
    for i, leaf in enumerate(leaves):
        if leaf.ndim == 0 or leaf.shape[0] != num_rows:
            path = _path_name(optree.tree_paths(step, is_leaf=lambda x: isinstance(x, list))[i])
            raise RLGraphError(f"{owner}: {name}['{path}'] has shape {leaf.shape}; expected a leading dimension of "
                               f"{num_rows} (one row per env id).")
    return optree.tree_unflatten(spec, leaves)


class _Store:
    """Per-slot storage of one nested structure.

    Leaves are kept flat, ``[capacity * width, ...]`` (``[capacity, ...]`` for width None), and addressed by
    ``slot * width + position``: one index array per call serves every leaf.
    """

    def __init__(self, width):
        self.width = width
        self.spec = None
        self.leaves = None
        self.tree = None
        self.arrays = None
        self.rows = None  # (dtype, row shape) per leaf: what a write must match.

    def allocate(self, leaves, spec, capacity):
        self.spec = spec
        self.rows = [(leaf.dtype, leaf.shape[1:]) for leaf in leaves]
        self._set_leaves([np.zeros((capacity * (self.width or 1),) + shape, dtype) for dtype, shape in self.rows])

    def grow(self, capacity):
        new = []
        for leaf in self.leaves:
            grown = np.zeros((capacity * (self.width or 1),) + leaf.shape[1:], leaf.dtype)
            grown[:leaf.shape[0]] = leaf
            new.append(grown)
        self._set_leaves(new)

    def _set_leaves(self, leaves):
        self.leaves = leaves
        self.tree = optree.tree_unflatten(self.spec, leaves)
        # Top-level keys holding one array are gathered without a tree traversal.
        self.arrays = {k: v for k, v in self.tree.items() if isinstance(v, np.ndarray)}

    def index(self, slots, positions):
        return slots if self.width is None else slots * self.width + positions


class EnvSlots:
    """Maps environment ids to row slots with growable per-slot numpy storage and bookkeeping arrays.

    Args:
        owner: The builder's name, used in error messages.
        fields: ``{name: (dtype, fill)}``: per-slot arrays ``fields[name]`` (shape ``[capacity]``), set to
            ``fill`` for new and released slots.
        stores: ``{name: width}``: per-slot storages of nested step values, ``[capacity, width, ...]`` (or
            ``[capacity, ...]`` for width None), allocated from the first values written to them.
    """

    def __init__(self, owner, fields=None, stores=None):
        self.owner = owner
        self._field_specs = {k: (np.dtype(d), f) for k, (d, f) in (fields or {}).items()}
        self._store_widths = dict(stores or {})
        #: Counts replacements of the storage and field arrays (fast paths that hold them check it).
        self.version = 0
        self.clear()

    def clear(self):
        """Forgets all ids and frees the storage (the next writes may have another structure)."""
        self.version += 1
        self.capacity = 0
        self._ids = np.zeros(0, np.int64)     # Live ids, sorted.
        self._id_slots = np.zeros(0, np.int64)  # The slot of each id in ``_ids``.
        self._free = np.zeros(0, np.int64)    # Free slots, ascending.
        self.fields = {k: np.zeros(0, d) for k, (d, _) in self._field_specs.items()}
        self.stores = {k: _Store(w) for k, w in self._store_widths.items()}
        self._cache = None

    @property
    def num_ids(self):
        """The number of live ids."""
        return int(self._ids.size)

    @property
    def live_slots(self):
        """The slots of all live ids (int64 array)."""
        return self._id_slots

    # --- ids -> slots ----------------------------------------------------------------------------------------
    def lookup(self, ids):
        """The slots of ``ids`` (unique int64 ids, see ``as_env_ids``), allocating slots for new ids.

        Returns:
            A read-only int64 array of slots, aligned with ``ids``.
        """
        cache = self._cache
        if cache is not None and cache[0].shape == ids.shape and np.array_equal(cache[0], ids):
            return cache[1]
        if np.unique(ids).size != ids.size:
            values, counts = np.unique(ids, return_counts=True)
            raise RLGraphError(f"{self.owner}: env_ids must be unique within one call; repeated: "
                               f"{values[counts > 1][:10].tolist()}.")
        slots, known = self.find(ids)
        new = ~known
        if new.any():
            fresh = self._allocate(int(new.sum()))
            slots[new] = fresh
            ids_all = np.concatenate([self._ids, ids[new]])
            order = np.argsort(ids_all, kind="stable")
            self._ids = ids_all[order]
            self._id_slots = np.concatenate([self._id_slots, fresh])[order]
        slots.flags.writeable = False
        self._cache = (ids.copy(), slots, ids.tobytes())
        return slots

    def cached_slots(self, env_ids):
        """The slots of ``env_ids`` if they are an int64 numpy array equal to the ids of the previous ``lookup``
        (checked then), else None: the per-step fast path of a vector of environments."""
        cache = self._cache
        if cache is None or type(env_ids) is not np.ndarray or env_ids.dtype != np.int64 or \
                env_ids.shape != cache[0].shape or env_ids.tobytes() != cache[2]:
            return None
        return cache[1]

    def find(self, ids):
        """``(slots, known)`` of ``ids`` without allocating: ``known`` marks live ids (others get slot -1)."""
        slots = np.full(ids.shape, -1, np.int64)
        if self._ids.size == 0 or ids.size == 0:
            return slots, np.zeros(ids.shape, bool)
        pos = np.minimum(np.searchsorted(self._ids, ids), self._ids.size - 1)
        known = self._ids[pos] == ids
        slots[known] = self._id_slots[pos[known]]
        return slots, known

    def release(self, slots):
        """Frees the (live, unique) ``slots``: their ids are forgotten, their fields reset, the slots reused."""
        slots = np.asarray(slots, np.int64)
        if slots.size == 0:
            return
        keep = ~np.isin(self._id_slots, slots)
        self._ids, self._id_slots = self._ids[keep], self._id_slots[keep]
        self._free = np.sort(np.concatenate([self._free, slots]))
        for name, (_, fill) in self._field_specs.items():
            self.fields[name][slots] = fill
        self._cache = None

    def _allocate(self, n):
        if self._free.size < n:
            self._grow(max(2 * self.capacity, self.capacity + n - self._free.size, 8))
        slots, self._free = self._free[:n], self._free[n:]
        return slots

    def _grow(self, capacity):
        self.version += 1
        old = self.capacity
        for name, (dtype, fill) in self._field_specs.items():
            grown = np.full(capacity, fill, dtype)
            grown[:old] = self.fields[name]
            self.fields[name] = grown
        for store in self.stores.values():
            if store.leaves is not None:
                store.grow(capacity)
        self._free = np.concatenate([self._free, np.arange(old, capacity, dtype=np.int64)])
        self.capacity = capacity

    # --- storage ---------------------------------------------------------------------------------------------
    def write(self, name, slots, positions, values):
        """Writes ``values`` (leaves ``[K, ...]``) to store ``name`` at ``slots`` and ``positions`` (None for
        a store without width); the first write fixes the store's structure, row shapes and dtypes."""
        store = self.stores[name]
        leaves, spec = optree.tree_flatten(values)
        if store.leaves is None:
            store.allocate(leaves, spec, self.capacity)
            self.version += 1
        self._check(store, leaves, spec, values, "step")
        index = store.index(slots, positions)
        for leaf, target in zip(leaves, store.leaves):
            target[index] = leaf

    def check(self, name, values, what="step"):
        """Checks ``values`` against the structure, row shapes and dtypes of store ``name`` (anything goes
        before its first write)."""
        leaves, spec = optree.tree_flatten(values)
        self._check(self.stores[name], leaves, spec, values, what)

    def _check(self, store, leaves, spec, values, what):
        if store.leaves is None:
            return
        if spec != store.spec:
            raise RLGraphError(f"{self.owner}: the {what}'s structure differs from earlier steps': expected "
                               f"{store.spec}, got {spec}. Call reset() to start over with another structure.")
        rows = [(leaf.dtype, leaf.shape[1:]) for leaf in leaves]
        if rows == store.rows:
            return
        for i, ((dtype, shape), (target_dtype, target_shape)) in enumerate(zip(rows, store.rows)):
            if shape != target_shape or not np.can_cast(dtype, target_dtype, "same_kind"):
                where = _path_name(optree.tree_paths(values)[i])
                raise RLGraphError(f"{self.owner}: {what} value '{where}' has rows of shape {shape} and dtype "
                                   f"{dtype}; earlier steps had {target_shape} and {target_dtype}. Call reset() to "
                                   f"start over with other shapes or dtypes.")

    def zero(self, name, slots, positions):
        """Sets the rows of store ``name`` at ``slots`` and ``positions`` to zero (no-op before allocation)."""
        store = self.stores[name]
        if store.leaves is not None:
            index = store.index(slots, positions)
            for target in store.leaves:
                target[index] = 0

    def gather(self, name, slots, positions=None, keys=None):
        """Copies of the rows of store ``name`` at ``slots`` (and ``positions``; index arrays broadcast together,
        the result has their shape in front).

        Args:
            keys: Top-level keys of the stored dict to gather (default: all).
        """
        store = self.stores[name]
        if store.tree is None:
            return {}
        index = store.index(slots, positions)
        out = {}
        for k in store.tree if keys is None else keys:
            array = store.arrays.get(k)
            out[k] = array.take(index, axis=0) if array is not None else \
                optree.tree_map(lambda a: a.take(index, axis=0), store.tree[k])
        return out

    def targets(self, name, keys):
        """The storage arrays of the top-level ``keys`` of store ``name`` (flat rows ``slot * width +
        position``), or None if the store is not allocated or any key holds a nested value. Valid while
        ``version`` stays the same."""
        arrays = self.stores[name].arrays
        if arrays is None or any(k not in arrays for k in keys):
            return None
        return [arrays[k] for k in keys]

    def keys(self, name):
        """The top-level keys of store ``name`` (empty before its first write)."""
        tree = self.stores[name].tree
        return [] if tree is None else list(tree)

    # --- run state -------------------------------------------------------------------------------------------
    def get_state(self):
        """A copy of the whole table: ids, slots, fields and stores (each store's structure as a skeleton tree
        with leaf numbers, its leaves as arrays), for ``set_state``."""
        stores = {}
        for name, store in self.stores.items():
            stores[name] = None if store.leaves is None else dict(
                structure=optree.tree_unflatten(store.spec, list(range(len(store.leaves)))),
                leaves=[leaf.copy() for leaf in store.leaves])
        return dict(capacity=int(self.capacity), ids=self._ids.copy(), id_slots=self._id_slots.copy(),
                    free=self._free.copy(), fields={k: v.copy() for k, v in self.fields.items()}, stores=stores)

    def set_state(self, state):
        """Restores what ``get_state`` returned (checked first: a state that does not fit changes nothing).

        Raises:
            RLGraphCheckpointError: The state is not one of a table with these fields and stores.
        """
        def bad(what):
            return RLGraphCheckpointError(f"{self.owner}: the stored trajectory state does not fit: {what}.")
        try:
            capacity = int(state["capacity"])
            ids, id_slots, free = (np.asarray(state[k], np.int64) for k in ("ids", "id_slots", "free"))
            fields, stores = dict(state["fields"]), dict(state["stores"])
        except (KeyError, TypeError, ValueError) as e:
            raise bad(f"{type(e).__name__}: {e}") from None
        if set(fields) != set(self._field_specs) or set(stores) != set(self._store_widths):
            raise bad(f"fields {sorted(fields)} and stores {sorted(stores)}, expected {sorted(self._field_specs)} "
                      f"and {sorted(self._store_widths)}")
        if ids.shape != id_slots.shape or ids.ndim != 1 or ids.size + free.size != capacity:
            raise bad(f"{ids.size} ids, {id_slots.size} slots and {free.size} free slots for a capacity of {capacity}")
        new_fields = {}
        for name, (dtype, _) in self._field_specs.items():
            value = np.asarray(fields[name])
            if value.shape != (capacity,):
                raise bad(f"field '{name}' has shape {value.shape}, expected ({capacity},)")
            new_fields[name] = value.astype(dtype, copy=True)
        new_stores = {}
        for name, width in self._store_widths.items():
            store, saved = _Store(width), stores[name]
            if saved is not None:
                leaves = [np.array(leaf, copy=True) for leaf in saved["leaves"]]
                spec = optree.tree_structure(saved["structure"])
                if spec.num_leaves != len(leaves) or any(
                        leaf.ndim == 0 or leaf.shape[0] != capacity * (width or 1) for leaf in leaves):
                    raise bad(f"store '{name}' does not hold {spec.num_leaves} arrays of {capacity * (width or 1)} "
                              f"rows")
                store.spec = spec
                store.rows = [(leaf.dtype, leaf.shape[1:]) for leaf in leaves]
                store._set_leaves(leaves)
            new_stores[name] = store
        self.capacity = capacity
        self._ids, self._id_slots, self._free = ids.copy(), id_slots.copy(), free.copy()
        self.fields, self.stores = new_fields, new_stores
        self._cache = None
        self.version += 1


class CountedSlotsBuilder:
    """Base of the builders that keep their pending steps per id in ``EnvSlots`` (``self._slots``) with a slot
    field "count"; ``_pending`` says how many of a slot's steps are pending (default: all it holds)."""

    @property
    def num_pending_steps(self):
        """Steps held that no emitted item holds yet, over all ids."""
        return self._pending(self._slots.live_slots)

    def _pending(self, slots):
        """The pending steps of ``slots`` (int [K] of slot indices), summed."""
        return int(self._slots.fields["count"][slots].sum())

    def reset(self):
        """Drops all pending steps of all ids."""
        self._slots.clear()

    def get_state(self):
        """The pending steps of all ids (numpy arrays and ints), for ``set_state``."""
        return self._slots.get_state()

    def set_state(self, state):
        """Restores what ``get_state`` returned (``RLGraphCheckpointError`` if it does not fit)."""
        self._slots.set_state(state)

    def drop(self, env_ids):
        """Forgets the pending steps of ``env_ids`` (unknown ids are ignored); returns how many were dropped."""
        ids = as_env_ids(type(self).__name__, env_ids)
        slots, known = self._slots.find(ids)
        slots = np.unique(slots[known])
        dropped = self._pending(slots)
        self._slots.release(slots)
        return dropped
