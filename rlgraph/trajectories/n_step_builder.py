"""N-step transitions assembled per environment id."""
import numpy as np

from rlgraph.trajectories.env_slots import CountedSlotsBuilder, EnvSlots, as_env_ids, check_step
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
        owner = type(self).__name__
        ids = as_env_ids(owner, env_ids)
        step = check_step(owner, step, ids.size, required=REQUIRED_KEYS, reserved=("env_ids",))
        for key, dtype in (("rewards", np.float32), ("terminals", bool), ("truncations", bool)):
            if step[key].ndim != 1:
                raise RLGraphError(f"{owner}: step['{key}'] must have shape ({ids.size},), got {step[key].shape}.")
            step[key] = step[key].astype(dtype, copy=False)
        slots = self._slots.lookup(ids)
        if ids.size == 0:
            return None
        if self.n_step == 1:
            out = {k: v for k, v in step.items() if k != "truncations"}
            out["env_ids"] = ids
            return out
        n, fields = self.n_step, self._slots.fields
        head, count = fields["head"][slots], fields["count"][slots]
        self._slots.write("steps", slots, (head + count) % n, step)
        count = count + 1
        done = step["terminals"] | step["truncations"]
        full = ~done & (count == n)
        fields["count"][slots] = np.where(done, 0, np.where(full, n - 1, count))
        fields["head"][slots] = np.where(done, 0, np.where(full, (head + 1) % n, head))
        # Items: all pending steps of ids whose episode ended, the oldest step of ids with full windows.
        if done.any():
            num_rows = np.where(done, count, full.astype(np.int64))
            row_slot, row_head, row_count, row_ids = (np.repeat(a, num_rows) for a in (slots, head, count, ids))
            start = np.repeat(np.cumsum(num_rows) - num_rows, num_rows)
            j = np.arange(row_slot.size) - start  # The item's first step, counted from the id's oldest step.
        elif full.any():
            row_slot, row_head, row_ids = slots[full], head[full], ids[full]
            row_count, j = np.full(row_slot.size, n), np.zeros(row_slot.size, np.int64)
        else:
            return None
        offsets = j[:, None] + np.arange(n)[None, :]
        rewards = self._slots.gather("steps", row_slot[:, None], (row_head[:, None] + offsets) % n,
                                     keys=["rewards"])["rewards"]
        terms = np.where(offsets < row_count[:, None], rewards * self._discounts, np.float32(0.0))
        returns = np.zeros(row_slot.size, np.float32)
        for k in range(n):  # Summed in float32 in step order (as NStepBuffer did): equal returns bit for bit.
            returns += terms[:, k]
        first, last = (row_head + j) % n, (row_head + row_count - 1) % n
        carried = [k for k in step if k not in ("rewards", "next_states", "terminals", "truncations")]
        out = self._slots.gather("steps", row_slot, first, keys=carried)
        out["rewards"] = returns
        out.update(self._slots.gather("steps", row_slot, last, keys=["next_states", "terminals"]))
        out["env_ids"] = row_ids
        return out
