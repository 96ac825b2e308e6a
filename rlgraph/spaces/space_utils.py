"""Helpers around spaces: gymnasium conversion, inferring spaces from values, sanity checks."""
import logging

import numpy as np
import optree

from rlgraph.spaces.bool_box import BoolBox
from rlgraph.spaces.box_space import BoxSpace
from rlgraph.spaces.dict_space import Dict
from rlgraph.spaces.float_box import FloatBox
from rlgraph.spaces.int_box import IntBox
from rlgraph.spaces.space import Space
from rlgraph.spaces.text_box import TextBox
from rlgraph.spaces.tuple_space import Tuple
from rlgraph.utils.errors import RLGraphSpaceError

logger = logging.getLogger(__name__)


def _collapse_bound(arr):
    """Returns a scalar if all entries of ``arr`` are equal, else the array."""
    arr = np.asarray(arr)
    if arr.size > 0 and np.all(arr == arr.flat[0]):
        return arr.flat[0]
    return arr


def _int_high_from_inclusive(high, dtype, where):
    """Turns an inclusive gym upper bound into an exclusive one (clipped for (u)int64 at the max)."""
    limit = IntBox._high_limit(dtype)
    high = np.asarray(high)
    exclusive = [int(h) + 1 for h in high.ravel().tolist()]
    if any(h > limit for h in exclusive):
        logger.warning(
            "%s: upper bound reaches the max of %s; the exclusive IntBox high is clipped to %d (so that value "
            "is not contained).", where, dtype, limit,
        )
        exclusive = [min(h, limit) for h in exclusive]
    return _collapse_bound(np.array(exclusive, dtype=IntBox._bound_dtype(dtype)).reshape(high.shape))


def space_from_gymnasium(gym_space, add_batch_rank=False, add_time_rank=False, time_major=False):
    """Converts a ``gymnasium.spaces.Space`` into an rlgraph space.

    Box -> FloatBox (float dtypes), IntBox (integer dtypes; gym's inclusive high becomes ``high + 1``)
    or BoolBox (bool dtype); Discrete(n, start) -> IntBox(start, start + n); MultiDiscrete(nvec, start)
    -> IntBox(start, start + nvec); MultiBinary(n) -> BoolBox(shape); Text -> TextBox; Dict -> Dict;
    Tuple -> Tuple. Uniform bounds collapse to scalars. Integer dtypes of gym spaces are kept.

    Args:
        gym_space: The gymnasium space.
        add_batch_rank: Whether the result has a batch rank.
        add_time_rank: Whether the result has a time rank.
        time_major: Whether the time rank comes first.

    Raises:
        RLGraphSpaceError: For unsupported gymnasium spaces.
    """
    import gymnasium.spaces as gs

    ranks = dict(add_batch_rank=add_batch_rank, add_time_rank=add_time_rank, time_major=time_major)
    name = type(gym_space).__name__
    if isinstance(gym_space, gs.Box):
        dtype = np.dtype(gym_space.dtype)
        shape = tuple(gym_space.shape)
        if dtype.kind == "f":
            return FloatBox(low=_collapse_bound(gym_space.low), high=_collapse_bound(gym_space.high), shape=shape,
                            dtype=dtype, **ranks)
        if dtype.kind in "iu":
            return IntBox(low=_collapse_bound(gym_space.low),
                          high=_int_high_from_inclusive(gym_space.high, dtype, repr(gym_space)),
                          shape=shape, dtype=dtype, **ranks)
        if dtype.kind == "b":
            return BoolBox(shape=shape, **ranks)
        raise RLGraphSpaceError(f"space_from_gymnasium: unsupported Box dtype {dtype} in {gym_space!r}.")
    if isinstance(gym_space, gs.Discrete):
        start, n = int(gym_space.start), int(gym_space.n)
        return IntBox(low=start, high=start + n, dtype=np.dtype(gym_space.dtype), **ranks)
    if isinstance(gym_space, gs.MultiDiscrete):
        start = np.asarray(getattr(gym_space, "start", 0))
        nvec = np.asarray(gym_space.nvec)
        return IntBox(low=_collapse_bound(np.broadcast_to(start, nvec.shape)), high=_collapse_bound(start + nvec),
                      shape=tuple(nvec.shape), dtype=np.dtype(gym_space.dtype), **ranks)
    if isinstance(gym_space, gs.MultiBinary):
        return BoolBox(shape=tuple(gym_space.shape), **ranks)
    if isinstance(gym_space, gs.Text):
        return TextBox(**ranks)
    if isinstance(gym_space, gs.Dict):
        children = {}
        for k, v in gym_space.spaces.items():
            if not isinstance(k, str):
                raise RLGraphSpaceError(f"space_from_gymnasium: Dict keys must be strings, got {k!r} in {name}.")
            children[k] = space_from_gymnasium(v)
        return Dict(children, **ranks)
    if isinstance(gym_space, gs.Tuple):
        return Tuple(tuple(space_from_gymnasium(s) for s in gym_space.spaces), **ranks)
    raise RLGraphSpaceError(f"space_from_gymnasium: unsupported gymnasium space {name} ({gym_space!r}).")


def gymnasium_batch_size(gym_space):
    """The number of rows if ``gym_space`` may be gymnasium's ``batch_space`` output (a vector env's
    ``observation_space`` or ``action_space``), else None.

    Box and MultiBinary of rank >= 2 (a batch of non-scalar spaces): a leading dimension whose rows have equal
    bounds; MultiDiscrete: a leading dimension whose rows have equal ``nvec`` and ``start`` (a batch of Discrete
    or MultiDiscrete spaces); Dict and Tuple: children that agree. A single environment's space can pass this
    test too (e.g. an image Box with equal bounds): see ``vector_env_batch_size`` for a decision.
    """
    module = type(gym_space).__module__
    if not module.startswith("gymnasium"):
        return None
    import gymnasium.spaces as gs

    if isinstance(gym_space, (gs.Dict, gs.Tuple)):
        children = gym_space.spaces.values() if isinstance(gym_space, gs.Dict) else gym_space.spaces
        sizes = {gymnasium_batch_size(child) for child in children}
        return sizes.pop() if len(sizes) == 1 else None
    if isinstance(gym_space, gs.MultiDiscrete):
        parts = [np.asarray(gym_space.nvec), np.asarray(getattr(gym_space, "start", np.zeros_like(gym_space.nvec)))]
    elif isinstance(gym_space, gs.Box):
        parts = [np.asarray(gym_space.low), np.asarray(gym_space.high)]
    elif isinstance(gym_space, gs.MultiBinary):
        parts = [np.zeros(gym_space.shape)]
    else:
        return None
    if parts[0].ndim < (1 if isinstance(gym_space, gs.MultiDiscrete) else 2) or parts[0].shape[0] < 1:
        return None
    for arr in parts:
        if not (arr == arr[:1]).all():
            return None
    return int(parts[0].shape[0])


def vector_env_batch_size(state_space, action_space):
    """The number of environments if ``state_space`` and ``action_space`` are gymnasium spaces that look like a
    vector env's batched ``observation_space`` and ``action_space`` (both ``gymnasium_batch_size`` with the
    same number of rows), else None."""
    n = gymnasium_batch_size(action_space)
    if n is None or gymnasium_batch_size(state_space) != n:
        return None
    return n


def _leaf_space(value, n_strip, ranks):
    arr = np.asarray(value)
    if arr.ndim < n_strip:
        raise RLGraphSpaceError(
            f"get_space_from_value: value of shape {arr.shape} has fewer dims than the {n_strip} leading "
            f"ranks to strip."
        )
    shape = tuple(arr.shape[n_strip:])
    kind = arr.dtype.kind
    if kind == "f":
        return FloatBox(shape=shape, dtype=arr.dtype, **ranks)
    if kind in "iu":
        return IntBox(shape=shape, dtype=arr.dtype, **ranks)
    if kind == "b":
        return BoolBox(shape=shape, **ranks)
    if kind in "US" or (kind == "O" and all(isinstance(v, (str, bytes)) for v in arr.ravel().tolist())):
        return TextBox(shape=shape, **ranks)
    raise RLGraphSpaceError(f"get_space_from_value: cannot infer a space from a value of dtype {arr.dtype}: {value!r}.")


def get_space_from_value(value, add_batch_rank=False, add_time_rank=False, time_major=False):
    """Infers a space from a value.

    Numpy arrays/python scalars/lists give boxes (float -> FloatBox with the value's float dtype, int ->
    unbounded IntBox with the value's int dtype, bool -> BoolBox, str -> TextBox); python dicts/tuples
    give Dict/Tuple. One leading dim is stripped from each leaf's shape per requested rank.

    Args:
        value: The value.
        add_batch_rank: Whether the value has (and the space gets) a batch rank.
        add_time_rank: Whether the value has (and the space gets) a time rank.
        time_major: Whether the time rank comes first.
    """
    ranks = dict(add_batch_rank=add_batch_rank, add_time_rank=add_time_rank, time_major=time_major)
    n_strip = int(bool(add_batch_rank)) + int(bool(add_time_rank))
    nested = optree.tree_map(
        lambda leaf: _leaf_space(leaf, n_strip, ranks),
        value,
        is_leaf=lambda x: not isinstance(x, (dict, tuple)),
        none_is_leaf=True,
    )
    if isinstance(nested, Space):
        return nested
    if isinstance(nested, dict):
        return Dict(nested, **ranks)
    return Tuple(tuple(nested), **ranks)


def _as_types(types):
    return tuple(types) if isinstance(types, (tuple, list)) else (types,)


def sanity_check_space(space, allowed_types=None, non_allowed_types=None, must_have_batch_rank=None,
                       must_have_time_rank=None, rank=None, num_categories=None):
    """Raises RLGraphSpaceError unless ``space`` meets the given requirements.

    Args:
        space: The space to check.
        allowed_types: Space classes the space must be an instance of (any of them).
        non_allowed_types: Space classes the space must not be an instance of.
        must_have_batch_rank: If not None, required value of ``has_batch_rank``.
        must_have_time_rank: If not None, required value of ``has_time_rank``.
        rank: If not None, the required rank: an int or a (min, max) tuple (boxes only).
        num_categories: If not None, the required ``num_categories`` (IntBox only): an int or (min, max).
    """
    if not isinstance(space, Space):
        raise RLGraphSpaceError(f"expected a Space, got {space!r}.")
    if allowed_types is not None and not isinstance(space, _as_types(allowed_types)):
        names = [t.__name__ for t in _as_types(allowed_types)]
        raise RLGraphSpaceError(f"space {space!r} is not of an allowed type ({', '.join(names)}).")
    if non_allowed_types is not None and isinstance(space, _as_types(non_allowed_types)):
        raise RLGraphSpaceError(f"space {space!r} is of a non-allowed type.")
    if must_have_batch_rank is not None and space.has_batch_rank != bool(must_have_batch_rank):
        raise RLGraphSpaceError(
            f"space {space!r} must {'' if must_have_batch_rank else 'not '}have a batch rank."
        )
    if must_have_time_rank is not None and space.has_time_rank != bool(must_have_time_rank):
        raise RLGraphSpaceError(f"space {space!r} must {'' if must_have_time_rank else 'not '}have a time rank.")

    def in_range(v, req):
        if isinstance(req, (tuple, list)):
            lo, hi = req
            return (lo is None or v >= lo) and (hi is None or v <= hi)
        return v == req

    if rank is not None:
        if not isinstance(space, BoxSpace):
            raise RLGraphSpaceError(f"space {space!r} has no single rank (container).")
        if not in_range(space.rank, rank):
            raise RLGraphSpaceError(f"space {space!r} has rank {space.rank}, required {rank}.")
    if num_categories is not None:
        n = getattr(space, "num_categories", None)
        if n is None or not in_range(n, num_categories):
            raise RLGraphSpaceError(f"space {space!r} has num_categories {n}, required {num_categories}.")

