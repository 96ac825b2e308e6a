"""Fixed-length, overlapping sequences with their initial recurrent state (R2D2), assembled per environment id."""
import numpy as np
import optree

from rlgraph.trajectories.env_slots import CountedSlotsBuilder, EnvSlots, as_env_ids, check_step
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from rlgraph.utils.validation import Int, check_args


#: The keys of a step that steer ``SequenceBuilder.add`` and are not stored.
CONTROL_KEYS = ("dones", "bootstrap_rows", "bootstrap_step")


class SequenceBuilder(CountedSlotsBuilder):
    """Cuts the steps of each environment id into fixed-length, overlapping sequences (Kapturowski et al. 2019).

    The rule: with length ``L`` and stride ``S``, window ``k`` of an episode covers its steps
    ``[k S, k S + L)``; sequences never cross episode ends; when an episode ends, its remaining window is
    emitted if it holds steps that no emitted sequence covers, zero-padded to ``L`` (``mask`` False on the
    padding). Each step carries, under ``state_key``, the recurrent state the actor had before that step; a
    sequence keeps only the state of its first row.

    With ``start_padding = P > 0`` every episode is preceded by P zero rows (all keys zero, also the state),
    i.e. the rule above runs on the padded episode; the padding rows count as sequence rows (``mask`` True).
    With P the burn-in length, the first window burns in over the padding only and trains from the episode's
    first step on, so no step of an episode is left untrained.

    Rows may come for any subset of ids in any order; ids may start and stop at any time (``drop``). Storage
    is a ring of L rows per live id (``EnvSlots``); all ids of a call are handled with numpy at once.

    Args:
        sequence_length: L (>= 1).
        stride: S, in [1, L] (L minus the overlap).
        start_padding: P, zero rows before each episode, in [0, L).
        state_key: The step key of the recurrent state.
        mask_key: The output key of the validity mask.
        reset_key: None, or the key of a bool flag the builder adds to every step: True on an episode's first
            step when episodes are preceded by start padding (a recurrent learner restarts its state there),
            else False (R2D2's "resets").
    """

    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(sequence_length=Int(min=1), stride=Int(min=1), start_padding=Int(min=0))

    def __init__(self, sequence_length, stride, start_padding=0, state_key="internal_states", mask_key="mask",
                 reset_key=None):
        owner = type(self).__name__
        args = check_args(owner, self.ARG_RULES, dict(sequence_length=sequence_length, stride=stride,
                                                      start_padding=start_padding))
        self.length, self.stride, self.padding = args["sequence_length"], args["stride"], args["start_padding"]
        if self.stride > self.length:
            raise RLGraphSpecError(f"{owner}: stride must be <= sequence_length ({self.length}), got {stride!r}.")
        if self.padding >= self.length:
            raise RLGraphSpecError(f"{owner}: start_padding must lie in [0, {self.length}), got {start_padding!r}.")
        keys = (("state_key", state_key), ("mask_key", mask_key)) + ((("reset_key", reset_key),) if reset_key
                                                                     is not None else ())
        for name, key in keys:
            if not isinstance(key, str) or not key:
                raise RLGraphSpecError(f"{owner}: {name} must be a non-empty str, got {key!r}.")
        names = [key for _, key in keys]
        if len(set(names)) != len(names) or any(key in names for key in ("env_ids",) + CONTROL_KEYS):
            raise RLGraphSpecError(f"{owner}: state_key, mask_key and reset_key must differ from each other and "
                                   f"from {['env_ids', *CONTROL_KEYS]}, got {names}.")
        self.state_key, self.mask_key, self.reset_key = state_key, mask_key, reset_key
        self._reserved = (mask_key, "env_ids") + ((reset_key,) if reset_key is not None else ())
        # head: ring position of row 0; count: rows held; covered: leading rows held that need no new sequence
        # (start padding, rows an emitted sequence covers); starting: the next step is the first of an episode.
        self._slots = EnvSlots(owner, fields=dict(head=(np.int64, 0), count=(np.int64, 0), covered=(np.int64, 0),
                                                  starting=(bool, True)),
                               stores=dict(steps=self.length))

    def _pending(self, slots):
        """Steps held that no emitted sequence covers yet (start padding not counted). Dropping an id or
        ``reset`` also makes its next step the first of an episode (a released slot starts anew)."""
        f = self._slots.fields
        return int((f["count"][slots] - f["covered"][slots]).sum())

    def episode_starts(self, env_ids):
        """Bool [K]: whether the next step of each of ``env_ids`` is the first of an episode (new ids: True)."""
        ids = as_env_ids(type(self).__name__, env_ids)
        slots, known = self._slots.find(ids)
        starts = np.ones(ids.size, bool)
        starts[known] = self._slots.fields["starting"][slots[known]]
        return starts

    def add(self, env_ids, step):
        """Adds one step for each of ``env_ids``; returns the sequences this completes.

        Args:
            env_ids: Int array-like [K] of unique, non-negative env ids.
            step: Dict of per-row values (nested dicts/tuples allowed) with leading dimension K, including
                ``state_key`` (the recurrent state before the step), and the keys that steer the builder (not
                stored): "dones", bool [K]: the episode ended with this step; optionally "bootstrap_rows", rows
                of this step (ints in [0, K)) that get one extra step right after this one, before the episode
                end is handled (e.g. the final observation of a truncated episode), and "bootstrap_step", those
                extra steps: the structure of the stored step, leading dimension ``len(bootstrap_rows)``.

        Returns:
            None if no sequence was completed, else a dict of B sequences: every stored step key except
            ``state_key`` as ``[B, L, ...]`` (zero-padded), ``mask_key`` bool ``[B, L]`` (False on padding
            after an episode end), ``state_key`` the state at each sequence's first row (structure of
            ``step[state_key]``, leading dim B) and "env_ids" int64 [B]. Order: sequences filled by the step,
            then by the bootstrap step, then those cut at episode ends, each group in the ids' call order.
        """
        owner = type(self).__name__
        ids = as_env_ids(owner, env_ids)
        if not isinstance(step, dict):
            raise RLGraphError(f"{owner}: step must be a dict of per-row values, got {type(step).__name__}.")
        if "dones" not in step:
            raise RLGraphError(f"{owner}: step lacks the required key 'dones' (bool, one per env id: the episode "
                               f"ended with this step); it has {sorted(map(str, step))}.")
        step = dict(step)
        dones, boot_rows, boot = (step.pop(key, None) for key in CONTROL_KEYS)
        step = check_step(owner, step, ids.size, required=(self.state_key,), reserved=self._reserved)
        dones = np.asarray(dones)
        if dones.shape != ids.shape:
            raise RLGraphError(f"{owner}: step['dones'] must have shape {ids.shape} (one flag per env id), got "
                               f"{dones.shape}.")
        dones = dones.astype(bool, copy=False)
        if boot_rows is not None and len(boot_rows):
            boot_rows, boot = self._checked_bootstrap(owner, ids.size, step, boot_rows, boot)
        else:
            boot_rows = None
        slots = self._slots.lookup(ids)
        if ids.size == 0:
            return None
        f = self._slots.fields
        if self.reset_key is not None:
            step[self.reset_key] = f["starting"][slots] if self.padding else np.zeros(ids.size, bool)
            if boot_rows is not None:
                boot[self.reset_key] = np.zeros(boot_rows.size, bool)
        # Check the structures before anything changes, so that a bad call leaves the builder as it was.
        self._slots.check("steps", step)
        if boot_rows is not None:
            self._slots.check("steps", boot, "bootstrap_step")
        if self.padding:
            starting = slots[f["starting"][slots]]
            if starting.size:
                self._slots.zero("steps", starting[:, None], np.arange(self.padding)[None, :])
                f["count"][starting] = f["covered"][starting] = self.padding
        f["starting"][slots] = False
        out = []
        self._write(slots, step)
        self._emit_full(slots, ids, out)
        if boot_rows is not None:
            self._write(slots[boot_rows], boot)
            self._emit_full(slots[boot_rows], ids[boot_rows], out)
        if dones.any():
            ended = slots[dones]
            emit = f["count"][ended] > f["covered"][ended]
            if emit.any():
                out.append(self._gather(ended[emit], f["count"][ended[emit]], ids[dones][emit]))
            for name in ("head", "count", "covered"):
                f[name][ended] = 0
            f["starting"][ended] = True
        if not out:
            return None
        return optree.tree_map(lambda *xs: np.concatenate(xs), *out) if len(out) > 1 else out[0]

    def _checked_bootstrap(self, owner, num_rows, step, rows, boot):
        """``(rows, bootstrap step)`` checked: unique rows of this step and an extra step of the step's structure."""
        rows = np.asarray(rows)
        if rows.ndim != 1 or rows.dtype.kind not in "iu":
            raise RLGraphError(f"{owner}: step['bootstrap_rows'] must be a 1-D array of row indices, got "
                               f"{rows!r}.")
        rows = rows.astype(np.int64, copy=False)
        if rows.min() < 0 or rows.max() >= num_rows:
            raise RLGraphError(f"{owner}: step['bootstrap_rows'] must be rows of this step (in [0, {num_rows})), "
                               f"got {rows[(rows < 0) | (rows >= num_rows)][:10].tolist()}.")
        if np.unique(rows).size != rows.size:
            raise RLGraphError(f"{owner}: step['bootstrap_rows'] must be unique.")
        if boot is None:
            raise RLGraphError(f"{owner}: step['bootstrap_rows'] given without a step['bootstrap_step'].")
        boot = check_step(owner, boot, rows.size, "step['bootstrap_step']", required=(self.state_key,),
                          reserved=self._reserved)
        if optree.tree_structure(boot) != optree.tree_structure(step) or any(
                b.shape[1:] != s.shape[1:] for b, s in zip(optree.tree_leaves(boot), optree.tree_leaves(step))):
            raise RLGraphError(f"{owner}: step['bootstrap_step'] must have the structure and row shapes of the "
                               f"step.")
        return rows, boot

    def _write(self, slots, values):
        f = self._slots.fields
        self._slots.write("steps", slots, (f["head"][slots] + f["count"][slots]) % self.length, values)
        f["count"][slots] += 1

    def _emit_full(self, slots, ids, out):
        f = self._slots.fields
        full = f["count"][slots] == self.length
        if not full.any():
            return
        emitted = slots[full]
        out.append(self._gather(emitted, np.full(emitted.size, self.length), ids[full]))
        keep = self.length - self.stride
        f["head"][emitted] = (f["head"][emitted] + self.stride) % self.length
        f["count"][emitted] = f["covered"][emitted] = keep

    def _gather(self, slots, lengths, ids):
        """The sequences of rows ``[0, lengths[i])`` of ``slots``, zero-padded to L."""
        L, head = self.length, self._slots.fields["head"][slots]
        positions = (head[:, None] + np.arange(L)[None, :]) % L
        keys = [k for k in self._slots.keys("steps") if k != self.state_key]
        sequences = self._slots.gather("steps", slots[:, None], positions, keys=keys)
        mask = np.arange(L)[None, :] < lengths[:, None]
        if not mask.all():
            def zero(x):
                x[~mask] = 0
            optree.tree_map(zero, sequences)
        sequences[self.mask_key] = mask
        sequences.update(self._slots.gather("steps", slots, head, keys=[self.state_key]))
        sequences["env_ids"] = ids
        return sequences
