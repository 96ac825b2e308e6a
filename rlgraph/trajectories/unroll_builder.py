"""Fixed-length unrolls (IMPALA, APPO) assembled per environment id."""
import numpy as np
import optree

from rlgraph.trajectories.env_slots import CountedSlotsBuilder, EnvSlots, as_env_ids, check_step, step_signature
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.validation import Int, check


def _keys(owner, name, keys):
    if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
        raise RLGraphSpecError(f"{owner}: {name} must be a list of step keys (str), got {keys!r}.")
    return tuple(keys)


class UnrollBuilder(CountedSlotsBuilder):
    """Collects the steps of each environment id into unrolls of T consecutive steps.

    Per id, steps are collected until it has T of them; then its unroll is emitted and its next unroll starts
    with its next step (no overlap). Episode ends do not cut unrolls: episode-end flags are just data. Keys in
    ``first_keys`` are kept only from the first step of each unroll (e.g. the recurrent state before it),
    keys in ``last_keys`` only from the last one (e.g. the bootstrap observation ``next_states``); all other
    keys are kept for all T steps.

    Rows may come for any subset of ids in any order; ids may start and stop at any time (``drop``). Storage
    is ``[slots, T, ...]`` per key (``EnvSlots``); all ids of a call are handled with numpy at once.

    Args:
        unroll_length: T (>= 1).
        first_keys: Step keys kept from each unroll's first step only.
        last_keys: Step keys kept from each unroll's last step only.
    """

    def __init__(self, unroll_length, first_keys=(), last_keys=()):
        owner = type(self).__name__
        unroll_length = check(owner, "unroll_length", unroll_length, Int(min=1))
        self.unroll_length = int(unroll_length)
        self.first_keys = _keys(owner, "first_keys", first_keys)
        self.last_keys = _keys(owner, "last_keys", last_keys)
        self._slots = EnvSlots(owner, fields=dict(count=(np.int64, 0)),
                               stores=dict(unroll=self.unroll_length, first=None))
        self._time = np.arange(self.unroll_length)[:, None]
        # The fast path: (signature of the last step that passed all checks, EnvSlots.version, the storage
        # arrays of its unroll keys and first keys).
        self._fast = None

    def add(self, env_ids, step):
        """Adds one step for each of ``env_ids``; returns the unrolls this completes.

        Args:
            env_ids: Int array-like [K] of unique, non-negative env ids.
            step: Dict of per-row values (nested dicts/tuples allowed) with leading dimension K; it must hold
                the ``first_keys`` and ``last_keys``.

        Returns:
            None if no unroll was completed, else (all arrays copies) ``{"unroll": {key: [T, M, ...]}
            (time-major, every key but the first and last keys), "first": {key: [M, ...]}, "last": {key:
            [M, ...]}, "env_ids": int64 [M]}`` for the M ids completed, in their order in this call.
        """
        slots = self._slots.cached_slots(env_ids)
        fast = self._fast
        if slots is not None and fast is not None and fast[1] == self._slots.version and \
                step_signature(step) == fast[0]:
            return self._add_fast(env_ids, slots, step, fast[2], fast[3])
        self._fast = None  # (A call that fails leaves none.)
        out = self._add(env_ids, step)
        self._remember(env_ids, step)
        return out

    def _remember(self, env_ids, step):
        """Notes the signature and the storage arrays of a step that passed all checks (for ``_add_fast``)."""
        signature = step_signature(step)
        if not signature or not all(type(v) is np.ndarray for v in step.values()) or \
                self._slots.cached_slots(env_ids) is None:
            return
        special = set(self.first_keys) | set(self.last_keys)
        unroll_keys = [k for k in step if k not in special]
        unroll = self._slots.targets("unroll", unroll_keys)
        first = self._slots.targets("first", self.first_keys) if self.first_keys else []
        if unroll is None or first is None:
            return
        self._fast = (signature, self._slots.version, list(zip(unroll_keys, unroll)),
                      list(zip(self.first_keys, first)))

    def _add_fast(self, ids, slots, step, unroll, first):
        """``add`` for a step like the last one (same ids, keys, dtypes and shapes): no checks, no lookup."""
        T, counts = self.unroll_length, self._slots.fields["count"]
        count = counts[slots]
        index = slots * T + count
        for key, target in unroll:
            target[index] = step[key]
        if first:
            starting = count == 0
            if starting.all():
                for key, target in first:
                    target[slots] = step[key]
            elif starting.any():
                rows = slots[starting]
                for key, target in first:
                    target[rows] = step[key][starting]
        count += 1
        done = count == T
        if not done.any():
            counts[slots] = count
            return None
        counts[slots] = np.where(done, 0, count)
        return self._emit(ids, slots, done, step)

    def _add(self, env_ids, step):
        owner = type(self).__name__
        ids = as_env_ids(owner, env_ids)
        step = check_step(owner, step, ids.size, required=self.first_keys + self.last_keys)
        slots = self._slots.lookup(ids)
        if ids.size == 0:
            return None
        special = set(self.first_keys) | set(self.last_keys)
        count = self._slots.fields["count"][slots]
        self._slots.write("unroll", slots, count, {k: v for k, v in step.items() if k not in special})
        if self.first_keys:
            starting = count == 0
            if starting.all():
                self._slots.write("first", slots, None, {k: step[k] for k in self.first_keys})
            elif starting.any():
                self._slots.write("first", slots[starting], None,
                                  optree.tree_map(lambda x: x[starting], {k: step[k] for k in self.first_keys}))
        count = count + 1
        done = count == self.unroll_length
        self._slots.fields["count"][slots] = np.where(done, 0, count)
        if not done.any():
            return None
        return self._emit(ids, slots, done, step)

    def _emit(self, ids, slots, done, step):
        """The unrolls of the ids marked ``done`` (their T-th step was just written)."""
        done_slots = slots[done]
        return dict(unroll=self._slots.gather("unroll", done_slots[None, :], self._time),
                    first=self._slots.gather("first", done_slots) if self.first_keys else {},
                    last=optree.tree_map(lambda x: x[done], {k: step[k] for k in self.last_keys}),
                    env_ids=ids[done])
