"""Fixed-length, overlapping sequences with their initial recurrent state (R2D2), assembled per environment id."""
import numpy as np
import optree

from rlgraph.trajectories.env_slots import CountedSlotsBuilder, EnvSlots, as_env_ids, check_step
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from rlgraph.utils.validation import Int, check_args


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
    """

    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(sequence_length=Int(min=1), stride=Int(min=1), start_padding=Int(min=0))

    def __init__(self, sequence_length, stride, start_padding=0, state_key="internal_states", mask_key="mask"):
        owner = type(self).__name__
        args = check_args(owner, self.ARG_RULES, dict(sequence_length=sequence_length, stride=stride,
                                                      start_padding=start_padding))
        self.length, self.stride, self.padding = args["sequence_length"], args["stride"], args["start_padding"]
        if self.stride > self.length:
            raise RLGraphSpecError(f"{owner}: stride must be <= sequence_length ({self.length}), got {stride!r}.")
        if self.padding >= self.length:
            raise RLGraphSpecError(f"{owner}: start_padding must lie in [0, {self.length}), got {start_padding!r}.")
        for name, key in (("state_key", state_key), ("mask_key", mask_key)):
            if not isinstance(key, str) or not key:
                raise RLGraphSpecError(f"{owner}: {name} must be a non-empty str, got {key!r}.")
        if state_key == mask_key or "env_ids" in (state_key, mask_key):
            raise RLGraphSpecError(f"{owner}: state_key and mask_key must differ from each other and from "
                                   f"'env_ids', got {state_key!r} and {mask_key!r}.")
        self.state_key, self.mask_key = state_key, mask_key
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

    def add(self, env_ids, step, dones, bootstrap_ids=None, bootstrap_step=None):
        """Adds one step for each of ``env_ids``; returns the sequences this completes.

        Args:
            env_ids: Int array-like [K] of unique, non-negative env ids.
            step: Dict of per-row values (nested dicts/tuples allowed) with leading dimension K, including
                ``state_key`` (the recurrent state before the step).
            dones: Bool [K]: the episode ended with this step.
            bootstrap_ids: A subset of ``env_ids`` that get one extra step right after this one, before the
                episode end is handled (e.g. the final observation of a truncated episode).
            bootstrap_step: That extra step, with the structure of ``step`` and leading dim
                ``len(bootstrap_ids)``.

        Returns:
            None if no sequence was completed, else a dict of B sequences: every step key except
            ``state_key`` as ``[B, L, ...]`` (zero-padded), ``mask_key`` bool ``[B, L]`` (False on padding
            after an episode end), ``state_key`` the state at each sequence's first row (structure of
            ``step[state_key]``, leading dim B) and "env_ids" int64 [B]. Order: sequences filled by the step,
            then by the bootstrap step, then those cut at episode ends, each group in the ids' call order.
        """
        owner = type(self).__name__
        ids = as_env_ids(owner, env_ids)
        reserved = (self.mask_key, "env_ids")
        step = check_step(owner, step, ids.size, required=(self.state_key,), reserved=reserved)
        dones = np.asarray(dones)
        if dones.shape != ids.shape:
            raise RLGraphError(f"{owner}: dones must have shape {ids.shape} (one flag per env id), got {dones.shape}.")
        dones = dones.astype(bool, copy=False)
        boot_ids = None
        if bootstrap_ids is not None and len(bootstrap_ids):
            boot_ids = as_env_ids(owner, bootstrap_ids, "bootstrap_ids")
            if bootstrap_step is None:
                raise RLGraphError(f"{owner}: bootstrap_ids given without a bootstrap_step.")
            bootstrap_step = check_step(owner, bootstrap_step, boot_ids.size, "bootstrap_step",
                                        required=(self.state_key,), reserved=reserved)
            if optree.tree_structure(bootstrap_step) != optree.tree_structure(step) or any(
                    b.shape[1:] != s.shape[1:] for b, s in zip(optree.tree_leaves(bootstrap_step),
                                                               optree.tree_leaves(step))):
                raise RLGraphError(f"{owner}: bootstrap_step must have the structure and row shapes of step.")
            found = np.isin(boot_ids, ids)
            if not found.all():
                raise RLGraphError(f"{owner}: bootstrap_ids must be a subset of this call's env_ids; "
                                   f"{boot_ids[~found][:10].tolist()} are not.")
            if np.unique(boot_ids).size != boot_ids.size:
                raise RLGraphError(f"{owner}: bootstrap_ids must be unique.")
            order = np.argsort(ids)
            boot_rows = order[np.searchsorted(ids, boot_ids, sorter=order)]  # Their rows in this call.
        slots = self._slots.lookup(ids)
        if ids.size == 0:
            return None
        # Check the structures before anything changes, so that a bad call leaves the builder as it was.
        self._slots.check("steps", step)
        if boot_ids is not None:
            self._slots.check("steps", bootstrap_step, "bootstrap_step")
        f = self._slots.fields
        if self.padding:
            starting = slots[f["starting"][slots]]
            if starting.size:
                self._slots.zero("steps", starting[:, None], np.arange(self.padding)[None, :])
                f["count"][starting] = f["covered"][starting] = self.padding
        f["starting"][slots] = False
        out = []
        self._write(slots, step)
        self._emit_full(slots, ids, out)
        if boot_ids is not None:
            self._write(slots[boot_rows], bootstrap_step)
            self._emit_full(slots[boot_rows], boot_ids, out)
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
