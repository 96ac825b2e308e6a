"""N-step transitions assembled per environment id."""
import numpy as np

from rlgraph.trajectories.env_slots import CountedSlotsBuilder, EnvSlots, as_env_ids, check_step, step_signature
from rlgraph.utils.errors import RLGraphError
from rlgraph.utils.validation import Int, Number, check_args

#: The step keys every call of ``NStepBuilder.add`` needs.
REQUIRED_KEYS = ("states", "actions", "rewards", "next_states", "terminals", "truncations")


class NStepBuilder(CountedSlotsBuilder):
    """Turns per-step transitions of environments, keyed by env id, into n-step transitions.

    Each id's steps fill a window of up to n steps. A window is complete when the id has n pending steps
    (its oldest step is emitted and the window slides by one) or when a step ends the episode (``terminals``
    or ``truncations``): then all pending steps of the id are emitted, each with its return cut at that end,
    and the id starts afresh. An item for the step at window position 0 holds its ``states``, ``actions`` and
    every other (carried) key of that step, ``rewards = sum_k discount^k r_k`` over the window's steps up to
    and including the one that ended the episode, ``next_states`` of the window's last step, and
    ``terminals``: that last step was terminal (a truncated window keeps False and is bootstrapped as if it
    had spanned n steps). With ``n_step = 1`` steps pass straight through (the caller's arrays, not copies).

    Rows may come for any subset of ids in any order; ids may start and stop at any time (``drop``). Storage
    is a ring of n rows per live id (``EnvSlots``); all ids of a call are handled with numpy at once.

    Args:
        n_step: The number of steps n (>= 1).
        discount: The discount factor (>= 0).
    """

    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(n_step=Int(min=1), discount=Number(min=0.0))

    def __init__(self, n_step, discount):
        owner = type(self).__name__
        args = check_args(owner, self.ARG_RULES, dict(n_step=n_step, discount=discount))
        self.n_step, self.discount = args["n_step"], args["discount"]
        self._discounts = np.array([self.discount ** k for k in range(self.n_step)], np.float32)
        self._slots = EnvSlots(owner, fields=dict(head=(np.int64, 0), count=(np.int64, 0)),
                               stores=dict(steps=self.n_step))
        self._range = np.arange(self.n_step)
        # The fast path: (signature of the last step that passed all checks, EnvSlots.version, its keys with
        # their storage arrays).
        self._fast = None

    def add(self, env_ids, step):
        """Adds one step for each of ``env_ids``; returns the n-step transitions this completes.

        Args:
            env_ids: Int array-like [K] of unique, non-negative env ids.
            step: Dict with the keys "states", "actions", "rewards", "next_states", "terminals",
                "truncations" and any others (carried from each window's first step), values (nested
                dicts/tuples allowed) with leading dimension K.

        Returns:
            None if no window was completed, else a dict of M items: "states", "actions" and the carried keys
            (of the window's first step), "rewards" (float32 n-step returns), "next_states" (of the window's
            last step), "terminals" (bool) and "env_ids" (int64) [M]; items ordered by the ids' order in this
            call, an id's items oldest first.
        """
        slots = self._slots.cached_slots(env_ids)
        fast = self._fast
        if slots is not None and fast is not None and fast[1] == self._slots.version and \
                step_signature(step) == fast[0]:
            # A step like the last one (same ids, keys, dtypes and shapes): it passes the same checks.
            ids, checked = env_ids, step
            if self.n_step == 1:
                return self._pass_through(ids, step)
            head, count = self._fields["head"][slots], self._fields["count"][slots]
            index = slots * self.n_step + (head + count) % self.n_step
            for key, target in fast[2]:
                target[index] = step[key]
        else:
            self._fast = None  # (A call that fails leaves none.)
            owner = type(self).__name__
            ids = as_env_ids(owner, env_ids)
            checked = check_step(owner, step, ids.size, required=REQUIRED_KEYS, reserved=("env_ids",))
            for key, dtype in (("rewards", np.float32), ("terminals", bool), ("truncations", bool)):
                if checked[key].ndim != 1:
                    raise RLGraphError(f"{owner}: step['{key}'] must have shape ({ids.size},), got "
                                       f"{checked[key].shape}.")
                checked[key] = checked[key].astype(dtype, copy=False)
            slots = self._slots.lookup(ids)
            if ids.size == 0:
                return None
            if self.n_step == 1:
                self._remember(env_ids, step, checked)
                return self._pass_through(ids, checked)
            head, count = self._fields["head"][slots], self._fields["count"][slots]
            self._slots.write("steps", slots, (head + count) % self.n_step, checked)
            self._remember(env_ids, step, checked)
        return self._emit(ids, slots, head, count, checked)

    @property
    def _fields(self):
        return self._slots.fields

    @staticmethod
    def _pass_through(ids, step):
        out = {k: v for k, v in step.items() if k != "truncations"}
        out["env_ids"] = ids
        return out

    def _remember(self, env_ids, step, checked):
        """Notes the signature and storage arrays of a step that passed all checks as it was (no conversion)."""
        signature = step_signature(step)
        if not signature or not all(type(v) is np.ndarray for v in step.values()) or \
                any(checked[k] is not step[k] for k in ("rewards", "terminals", "truncations")) or \
                self._slots.cached_slots(env_ids) is None:
            return
        targets = [] if self.n_step == 1 else self._slots.targets("steps", list(step))
        if targets is not None:
            self._fast = (signature, self._slots.version, list(zip(step, targets)))

    def _emit(self, ids, slots, head, count, step):
        """Advances the windows of ``slots`` (their step was just written at ``head + count``) and returns the
        items they complete."""
        n, fields = self.n_step, self._slots.fields
        count = count + 1
        done = step["terminals"] | step["truncations"]
        if not done.any():  # Only windows that are full emit (their oldest step); the others fill up.
            full = count == n
            if full.all():  # The steady state: every window emits its oldest step and slides by one.
                fields["head"][slots] = (head + 1) % n
            else:
                fields["count"][slots] = np.where(full, n - 1, count)
                fields["head"][slots] = np.where(full, (head + 1) % n, head)
                if not full.any():
                    return None
                slots, head, ids = slots[full], head[full], ids[full]
            return self._items(slots, head, None, None, np.array(ids, np.int64), step)
        full = ~done & (count == n)
        fields["count"][slots] = np.where(done, 0, np.where(full, n - 1, count))
        fields["head"][slots] = np.where(done, 0, np.where(full, (head + 1) % n, head))
        # Items: all pending steps of ids whose episode ended, the oldest step of ids with full windows.
        num_rows = np.where(done, count, full.astype(np.int64))
        row_slot, row_head, row_count, row_ids = (np.repeat(a, num_rows) for a in (slots, head, count, ids))
        start = np.repeat(np.cumsum(num_rows) - num_rows, num_rows)
        j = np.arange(row_slot.size) - start  # The item's first step, counted from the id's oldest step.
        return self._items(row_slot, row_head, row_count, j, row_ids, step)

    def _items(self, row_slot, row_head, row_count, j, row_ids, step):
        """The items of rows ``row_slot``: the window from its ``j``-th pending step to its ``row_count``-th
        (``row_count``, ``j`` None: full windows from their oldest step)."""
        n = self.n_step
        store = self._slots.stores["steps"]
        flat = len(store.arrays) == len(step)  # Flat values: taken straight from the storage arrays.
        if j is None:
            positions = (row_head[:, None] + self._range[None, :]) % n
            first, last = row_head, (row_head + (n - 1)) % n
        else:
            offsets = j[:, None] + self._range[None, :]
            positions = (row_head[:, None] + offsets) % n
            first, last = (row_head + j) % n, (row_head + row_count - 1) % n
        if flat:
            base = row_slot * n
            rewards = store.arrays["rewards"].take(base[:, None] + positions)
        else:
            rewards = self._slots.gather("steps", row_slot[:, None], positions, keys=["rewards"])["rewards"]
        terms = rewards * self._discounts
        if j is not None:
            terms = np.where(offsets < row_count[:, None], terms, np.float32(0.0))
        returns = np.zeros(row_slot.size, np.float32)
        for k in range(n):  # Summed in float32 in step order (as NStepBuffer did): equal returns bit for bit.
            returns += terms[:, k]
        carried = [k for k in step if k not in ("rewards", "next_states", "terminals", "truncations")]
        if flat:
            first, last = base + first, base + last
            out = {k: store.arrays[k].take(first, axis=0) for k in carried}
            out["rewards"] = returns
            out["next_states"] = store.arrays["next_states"].take(last, axis=0)
            out["terminals"] = store.arrays["terminals"].take(last, axis=0)
        else:
            out = self._slots.gather("steps", row_slot, first, keys=carried)
            out["rewards"] = returns
            out.update(self._slots.gather("steps", row_slot, last, keys=["next_states", "terminals"]))
        out["env_ids"] = row_ids
        return out
