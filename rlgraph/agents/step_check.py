"""Checks of one observed environment step, before anything of it reaches an actor, builder or learner."""
import difflib

import numpy as np
import optree

from rlgraph.spaces import BoxSpace, FloatBox, IntBox, TextBox
from rlgraph.utils.errors import RLGraphAPIError, RLGraphSpaceError


def _describe(x):
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    return f"{type(x).__name__} {x!r}"[:120]


def _preview(arr):
    flat = arr.reshape(-1)[:4].tolist()
    return f"{flat}{' ...' if arr.size > 4 else ''}"


class StepCheck:
    """Checks the arguments of ``Agent.observe`` against the agent's spaces, vectorized (no loop over rows).

    Every argument must have one row per environment (the rows of ``terminals``):

    - ``states``, ``next_states``: the state space's structure, shape and dtype (values are not scanned: they
      come from the environment, and ``get_actions`` already checked the states it acted on);
    - ``actions``: in the action space; discrete actions within their bounds and of an integer dtype (``0.7``
      or ``5`` for two actions are refused); continuous actions finite (they may leave the box: a policy's
      samples do, the environment gets them clipped);
    - ``rewards``: finite numbers; ``terminals``/``truncations``: bools, or numbers that are all 0 or 1
      (strings such as ``"no"`` are refused, not read as True); ``env_ids``: integers;
    - extras: only the keys the actor's ``get_actions`` returns (``extras_keys``; any other keyword raises an
      ``RLGraphAPIError`` naming it), each with one row per environment.

    ``check`` returns the arguments converted to the spaces' dtypes, or raises ``RLGraphSpaceError`` naming
    the argument, what was expected and what was received.
    """

    def __init__(self, owner, state_space, action_space, extras_keys=None):
        self.owner = owner
        self.extras_keys = None if extras_keys is None else frozenset(extras_keys)
        self.state_space, self.action_space = state_space, action_space
        self._batched_states = state_space.with_batch_rank()
        self._batched_actions = action_space.with_batch_rank()
        # Per space, decided once (isinstance checks against the space classes are not free on every step):
        # None for spaces checked as a whole, else (item shape, dtype, "int" / "float" / None for the scan).
        self._plans = {id(space): self._plan(space) for space in (state_space, action_space)}

    @staticmethod
    def _plan(space):
        if not isinstance(space, BoxSpace) or isinstance(space, TextBox):
            return None
        kind = "int" if isinstance(space, IntBox) else "float" if isinstance(space, FloatBox) else None
        return tuple(space.shape), space.dtype, kind

    def error(self, arg, text):
        return RLGraphSpaceError(f"{self.owner}.observe(): argument '{arg}': {text}")

    # --- per argument ---------------------------------------------------------------------------------
    def flags(self, arg, value, n=None):
        arr = value if type(value) is np.ndarray else np.asarray(value)
        if arr.dtype != np.bool_:
            if arr.dtype.kind not in "iuf" or not ((arr == 0) | (arr == 1)).all():
                raise self.error(arg, f"expected bools (true/false, or numbers 0/1), one per environment, got "
                                      f"{_describe(arr)} (values {_preview(arr)}).")
            arr = arr.astype(np.bool_)
        if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
            rows = f"({n},)" if n is not None else "(N,)"
            raise self.error(arg, f"expected shape {rows} (one flag per row of terminals), got shape {arr.shape}.")
        return arr

    def rows(self, arg, value, space, batched, n, scan):
        """``value`` as a batch of ``n`` items of ``space`` (``batched``: with a batch rank); ``scan``: also check
        the values (bounds, finite)."""
        plan = self._plans[id(space)] if id(space) in self._plans else self._plan(space)
        if plan is not None:
            item_shape, dtype, kind = plan
            try:
                arr = value if type(value) is np.ndarray else np.asarray(value)
            except Exception as e:  # Ragged lists and the like.
                raise self.error(arg, f"cannot convert {type(value).__name__} to an array ({e}).") from None
            if arr.shape[:1] != (n,) or arr.shape[1:] != item_shape:
                shape = (n,) + item_shape
                raise self.error(arg, f"expected shape {shape} ({n} rows of {space!r}, one per row of terminals), got "
                                      f"shape {arr.shape}.")
            if arr.dtype != dtype:
                if not space._accepts_dtype(arr.dtype):
                    raise self.error(arg, f"expected dtype {space.dtype} ({space!r}), got {arr.dtype} (values "
                                          f"{_preview(arr)}).")
                arr = arr.astype(dtype)
            if scan:
                if kind == "int":
                    reason = batched._bounds_mismatch(arr)
                    if reason is not None:
                        raise self.error(arg, f"expected {space!r}, got {reason}.")
                elif kind == "float" and not np.isfinite(arr).all():
                    raise self.error(arg, f"expected finite values, got {_preview(arr[~np.isfinite(arr)])} at row(s) "
                                          f"{np.flatnonzero(~np.isfinite(arr).reshape(n, -1).all(1)).tolist()[:8]}.")
            return arr
        reason = batched.describe_mismatch(value)
        if reason is not None:
            raise self.error(arg, f"expected {batched!r}, got {_describe(value)}: {reason}.")
        for leaf in optree.tree_leaves(value):
            if np.shape(leaf)[:1] != (n,):
                raise self.error(arg, f"expected {n} rows (one per environment), got a leaf of shape "
                                      f"{np.shape(leaf)}.")
        return value

    def unknown_extras(self, extras):
        """Raises the error for keywords of ``observe`` that are no extras of ``get_actions``."""
        unknown = sorted(k for k in extras if k not in self.extras_keys)
        known = sorted(self.extras_keys)
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise RLGraphAPIError(f"{self.owner}.observe(): unknown keyword argument(s) {unknown}{hint}: observe takes "
                              f"states, actions, rewards, next_states, terminals, truncations, env_ids and the extras "
                              f"that get_actions(..., return_extras=True) returns ({known}), or no extras at all.")

    # --- a whole step ---------------------------------------------------------------------------------
    def check(self, states, actions, rewards, next_states, terminals, truncations, env_ids, extras):
        """``(states, actions, rewards, next_states, terminals, truncations, env_ids)``, checked and converted."""
        terminals = self.flags("terminals", terminals)
        n = terminals.shape[0]
        truncations = np.zeros(n, np.bool_) if truncations is None else self.flags("truncations", truncations, n)
        rewards_arr = rewards if type(rewards) is np.ndarray else np.asarray(rewards)
        if rewards_arr.dtype.kind not in "iuf":
            raise self.error("rewards", f"expected numbers, got {_describe(rewards_arr)} (values "
                                        f"{_preview(rewards_arr)}).")
        if rewards_arr.shape != (n,):
            raise self.error("rewards", f"expected shape ({n},) (one reward per row of terminals), got shape "
                                        f"{rewards_arr.shape}.")
        if not np.isfinite(rewards_arr).all():
            bad = np.flatnonzero(~np.isfinite(rewards_arr))
            raise self.error("rewards", f"expected finite numbers, got {rewards_arr[bad[0]]} at row {bad[0]}.")
        states = self.rows("states", states, self.state_space, self._batched_states, n, scan=False)
        next_states = self.rows("next_states", next_states, self.state_space, self._batched_states, n, scan=False)
        actions = self.rows("actions", actions, self.action_space, self._batched_actions, n, scan=True)
        if env_ids is not None:
            env_ids = env_ids if type(env_ids) is np.ndarray else np.asarray(env_ids)
            if env_ids.shape != (n,) or env_ids.dtype.kind not in "iu":
                raise self.error("env_ids", f"expected {n} integer ids (one per row), got {_describe(env_ids)}.")
        if self.extras_keys is not None and not self.extras_keys.issuperset(extras):
            self.unknown_extras(extras)
        for key, value in extras.items():
            for leaf in optree.tree_leaves(value):
                if isinstance(leaf, np.ndarray) and leaf.ndim and leaf.shape[0] != n:
                    raise self.error(key, f"expected {n} rows (what get_actions returned for these states), got "
                                          f"shape {leaf.shape}.")
        return states, actions, rewards_arr, next_states, terminals, truncations, env_ids
