"""Checks of constructor arguments and input spaces shared by the RL-maths helpers and loss functions.

Backend-free; every failure is an rlgraph error naming the class, the argument and what was received.
"""
from rlgraph.spaces import BoolBox, FloatBox, IntBox, Space
from rlgraph.utils.errors import RLGraphSpaceError, RLGraphSpecError

#: The space types accepted for each ``kind`` of argument.
_KINDS = {
    "float": ((FloatBox,), "a FloatBox"),
    "int": ((IntBox,), "an IntBox"),
    # Terminal flags: bool, or 0/1 as ints or floats.
    "flag": ((BoolBox, IntBox, FloatBox), "a BoolBox (or 0/1 IntBox/FloatBox)"),
}


def layout_text(time_major):
    """Human-readable name of a sequence layout."""
    return "time-major [T, B]" if time_major else "batch-major [B, T]"


def _where(component, arg):
    apis = [name for name, info in component.api_methods.items() if arg in info.arg_names]
    methods = "/".join(f"'{a}'" for a in apis) or "?"
    return f"{type(component).__name__}, API method {methods}, argument '{arg}'"


def check_space(component, input_spaces, arg, kind="float", rank=0, ranks="batch", time_major=True,
                required=True):
    """Raises ``RLGraphSpaceError`` unless ``input_spaces[arg]`` fits; returns the space (or None).

    Args:
        component: The component whose API argument is checked (named in the message).
        input_spaces: The dict handed to ``check_input_spaces``.
        arg: The API argument's name.
        kind: "float", "int" or "flag" (terminals: bool or 0/1 numbers).
        rank: The rank of one item, without batch/time ranks (e.g. 0 for rewards, 1 for Q-values [A]); None:
            any.
        ranks: "batch" (a batch rank, no time rank), "sequence" (batch and time ranks in the layout
            ``time_major`` says) or "any" (whatever leading ranks).
        time_major: With ``ranks="sequence"``: whether [T, B] (True) or [B, T] (False) is expected.
        required: If False, a missing argument (passed as None) is fine.
    """
    space = input_spaces.get(arg)
    if space is None:
        if required:
            raise RLGraphSpaceError(f"{_where(component, arg)}: required, but no value (space) was given.")
        return None
    types, type_text = _KINDS[kind]
    if ranks == "batch":
        rank_text = "a batch rank and no time rank"
        ranks_ok = isinstance(space, Space) and space.has_batch_rank and not space.has_time_rank
    elif ranks == "sequence":
        rank_text = f"batch and time ranks, {layout_text(time_major)}"
        ranks_ok = isinstance(space, Space) and space.has_batch_rank and space.has_time_rank and \
            bool(space.time_major) == bool(time_major)
    else:
        rank_text, ranks_ok = "any leading ranks", True
    if not isinstance(space, types) or not ranks_ok or (rank is not None and space.rank != rank):
        rank_of = "" if rank is None else f" of rank {rank}"
        raise RLGraphSpaceError(f"{_where(component, arg)}: expected {type_text}{rank_of} with {rank_text}, "
                                f"got {space!r}.")
    return space


def check_same_item_shape(component, input_spaces, *args):
    """Raises ``RLGraphSpaceError`` unless the given (present) arguments have the same item shape."""
    present = [(a, input_spaces[a]) for a in args if input_spaces.get(a) is not None]
    for a, space in present[1:]:
        if tuple(space.shape) != tuple(present[0][1].shape):
            raise RLGraphSpaceError(f"{_where(component, a)}: expected the item shape {tuple(present[0][1].shape)} "
                                    f"of argument '{present[0][0]}', got {space!r}.")


def check_number(owner, name, value, low=None, high=None, integer=False, allow_none=False, positive=False):
    """Returns ``value`` as a float (int with ``integer``), or raises ``RLGraphSpecError``.

    Args:
        owner: The class name, for the message.
        name: The constructor argument's name.
        value: The value received.
        low: Smallest allowed value (inclusive), or None.
        high: Largest allowed value (inclusive), or None.
        integer: Require an int.
        allow_none: Let None through (returned as None).
        positive: Require ``value > 0``.
    """
    if value is None and allow_none:
        return None
    ok_types = (int,) if integer else (int, float)
    ok = not isinstance(value, bool) and isinstance(value, ok_types)
    ok = ok and (low is None or value >= low) and (high is None or value <= high) and value == value
    ok = ok and (not positive or value > 0)
    if not ok:
        bounds = " > 0" if positive else f" in [{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        kind = "an int" if integer else "a number"
        raise RLGraphSpecError(f"{owner}: {name} must be {kind}{bounds}{' or None' if allow_none else ''}, "
                               f"got {value!r}.")
    return int(value) if integer else float(value)
