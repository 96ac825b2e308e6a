"""Checks API arguments against their spaces before any backend call."""
import numpy as np

from rlgraph.spaces import BoxSpace, ContainerSpace, Dict, FloatBox, IntBox, TextBox
from rlgraph.utils.errors import RLGraphAPIError, RLGraphSpaceError

PYTHON_TYPES = (int, float, bool)


def describe_value(x):
    """A short description of a value for error messages."""
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(x)}"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    return f"{type(x).__name__} {x!r}"[:120]


def make_input_checker(space, api_method, arg, component):
    """Returns ``check(x) -> x'``: ``x`` converted to the space's dtype, or an ``RLGraphSpaceError``.

    Arrays (and dicts/tuples of arrays) that already have each leaf's dtype and shape pass with a few attribute
    comparisons per leaf (and the bounds check where the space has finite bounds); anything else takes the
    general path, which converts or raises.
    """
    where = f"API method '{api_method}' of '{component}', argument '{arg}'"

    if space in PYTHON_TYPES:
        ok = {int: (int, np.integer), float: (int, float, np.integer, np.floating), bool: (bool, np.bool_)}[space]

        def check_scalar(x):
            if isinstance(x, ok) and not (space is not bool and isinstance(x, (bool, np.bool_))):
                return space(x)
            raise RLGraphSpaceError(f"{where}: expected a Python {space.__name__}, got {describe_value(x)}.")
        return check_scalar

    def slow(x):
        reason = space.describe_mismatch(x)
        if reason is not None:
            raise RLGraphSpaceError(f"{where}: expected {space!r}, got {describe_value(x)}: {reason}.")
        flat = space.flatten_value(x)
        spaces = space.flatten()
        cast = {k: np.asarray(v, dtype=None if isinstance(spaces[k], TextBox) else spaces[k].dtype)
                for k, v in flat.items()}
        return space.unflatten(cast)

    fast = _fast_checker(space)
    if fast is None:
        return slow

    def check(x):
        try:
            return fast(x)
        except _Mismatch:
            return slow(x)
    return check


class _Mismatch(Exception):
    """Raised by a fast checker for a value it does not take as is; the slow path then checks (and names the
    error of) the whole value."""


def _fast_checker(space):
    """``fast(x) -> x'`` for values that already have each leaf's exact dtype and shape, raising ``_Mismatch``
    otherwise (the slow path then converts or reports); None for spaces without a fast path (text leaves).

    Container values come back rebuilt as the slow path rebuilds them (dicts in the space's key order, tuples),
    their leaf arrays untouched.
    """
    if isinstance(space, ContainerSpace):
        keys, children = space._child_keys(), [_fast_checker(c) for c in space._children()]
        if any(c is None for c in children):
            return None
        pairs = tuple(zip(keys, children))
        if isinstance(space, Dict):
            n = len(pairs)

            def check_dict(x):
                if type(x) is not dict or len(x) != n:
                    raise _Mismatch
                try:
                    return {k: c(x[k]) for k, c in pairs}
                except KeyError:
                    raise _Mismatch from None
            return check_dict
        n = len(children)

        def check_tuple(x):
            if type(x) is not tuple or len(x) != n:
                raise _Mismatch
            return tuple(c(v) for c, v in zip(children, x))
        return check_tuple
    if not isinstance(space, BoxSpace) or isinstance(space, TextBox):
        return None
    dtype = np.dtype(space.dtype)
    if isinstance(space, IntBox):
        # A box spanning its dtype's whole range (e.g. uint8 images) cannot be left by a value of that dtype.
        info = np.iinfo(dtype)
        needs_bounds = not (np.all(np.asarray(space.low) <= info.min) and np.all(np.asarray(space.high) > info.max))
    else:
        needs_bounds = isinstance(space, FloatBox) and (np.any(np.isfinite(space.low)) or
                                                         np.any(np.isfinite(space.high)))
    lead = int(space.has_batch_rank) + int(space.has_time_rank)
    shape = tuple(space.shape)
    ndim = lead + len(shape)
    ndarray = np.ndarray
    bounds = space._bounds_mismatch if needs_bounds else None

    def check(x):
        if type(x) is ndarray and x.dtype == dtype and x.ndim == ndim and x.shape[lead:] == shape and \
                (bounds is None or bounds(x) is None):
            return x
        raise _Mismatch
    return check


def bind_arguments(api_method, params, args, kwargs, component):
    """Maps positional and keyword ``args`` of an ``execute`` call onto the parameter names ``params``."""
    if len(args) > len(params):
        raise RLGraphAPIError(f"API method '{api_method}' of '{component}' takes {len(params)} argument(s) "
                              f"({', '.join(params)}), got {len(args)}.")
    values = dict(zip(params, args))
    for k, v in kwargs.items():
        if k not in params:
            raise RLGraphAPIError(f"API method '{api_method}' of '{component}' has no argument '{k}' "
                                  f"(arguments: {', '.join(params)}).")
        if k in values:
            raise RLGraphAPIError(f"API method '{api_method}': argument '{k}' given twice.")
        values[k] = v
    return values
