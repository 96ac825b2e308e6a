"""The R2D2 agent: recurrent replay DQN on stored sequences with burn-in (Kapturowski et al. 2019)."""
import logging

import numpy as np
import optree

from rlgraph.agents.agent import Agent, batch_size_of
from rlgraph.components.algorithms.r2d2_algorithm_component import END_KEY, STATE_KEY, R2D2AlgorithmComponent
from rlgraph.components.explorations.exploration import apex_epsilon
from rlgraph.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError

logger = logging.getLogger(__name__)

DEFAULT_UPDATE_SPEC = dict(batch_size=64, update_interval=16, updates_per_interval=1, steps_before_update=2000,
                           sync_interval=2500)
DEFAULT_MEMORY_SPEC = dict(type="sequence-replay", capacity=10000, burn_in_length=40, train_length=40, overlap=40,
                           alpha=0.9, beta=0.6)
#: Per-step keys of the learner's sequences (besides the memory's ``mask``).
SEQUENCE_KEYS = ("states", "actions", "rewards", "terminals", "bootstrap", "resets")


class R2D2Agent(Agent):
    """Recurrent Replay Distributed DQN (Kapturowski et al. 2019), local execution.

    The actor keeps one LSTM state per environment (the worker passes it back through ``internal_states``
    and zeroes it at episode starts). ``observe`` assembles fixed-length, overlapping sequences per
    environment from the per-step calls (``SequenceAssembler``, numpy over all environments at once), each
    with the recurrent state the actor had at its first step, and inserts them into the ``SequenceReplay``.
    The learner samples sequences by priority, burns the LSTM in over their first ``burn_in_length`` steps
    from the stored state (no gradient), trains on the rest with n-step double-Q targets under the value
    rescaling h, and writes the priorities ``eta max|delta| + (1 - eta) mean|delta|`` back
    (``R2D2AlgorithmComponent``). Exploration is epsilon-greedy with a fixed epsilon per environment as in
    Ape-X/R2D2 (``actor_epsilons="apex"``: ``0.4 ** (1 + 7 i / (N - 1))``) or one scheduled epsilon.

    Args:
        memory_spec: The ``SequenceReplay``: ``capacity`` (sequences), ``burn_in_length``, ``train_length``,
            ``overlap``, ``alpha``, ``beta`` (R2D2: 40, 40, 40, 0.9, 0.6).
        exploration_spec: The epsilon schedule used when ``actor_epsilons`` is None, e.g.
            ``{"epsilon_spec": ["linear", 1.0, 0.02]}``.
        actor_epsilons: None (the schedule), "apex" (Ape-X epsilons over the environments), a dict
            ``{"base": 0.4, "alpha": 7.0}`` for other Ape-X constants, or a list with one epsilon per env.
        update_spec: ``batch_size`` (sequences), ``update_interval`` (env steps between updates),
            ``updates_per_interval``, ``steps_before_update`` (env steps before the first update),
            ``sync_interval`` (env steps between target-network syncs).
        schedule_timesteps: Env steps over which schedules (epsilon, learning rate) run from start to end.
        dueling: Dueling Q-heads.
        n_step: The n of the n-step targets (R2D2: 5).
        eta: Priority mix (R2D2: 0.9).
        rescaling_epsilon: The epsilon of the value rescaling (R2D2: 1e-3).
        huber_loss: Huber instead of squared TD errors.
        pad_episode_starts: Precede each episode by ``burn_in_length`` zero steps, its first step flagged in
            ``resets`` (the learner zeroes the LSTM state there), so the first window trains from the episode's
            first step on with the actor's exact (zero) state; without it the first ``burn_in_length`` steps of
            every episode only ever serve as burn-in.
        **kwargs: See ``Agent`` (``discount`` defaults to R2D2's 0.997 here).
    """

    __aliases__ = ("r2d2",)

    def __init__(self, state_space, action_space, memory_spec=None, exploration_spec=None, actor_epsilons="apex",
                 update_spec=None, schedule_timesteps=100000, dueling=True, n_step=5, eta=0.9, rescaling_epsilon=1e-3,
                 huber_loss=False, pad_episode_starts=True, **kwargs):
        kwargs.setdefault("discount", 0.997)
        if memory_spec is not None and not isinstance(memory_spec, dict):
            raise RLGraphSpecError(f"R2D2Agent.memory_spec: expected a dict, got {memory_spec!r}.")
        self.memory_spec = dict(DEFAULT_MEMORY_SPEC, **(memory_spec or {}))
        self.exploration_spec = exploration_spec or {"epsilon_spec": ["linear", 1.0, 0.05]}
        self.update_spec = dict(DEFAULT_UPDATE_SPEC)
        unknown = set(update_spec or {}) - set(DEFAULT_UPDATE_SPEC)
        if unknown:
            raise RLGraphSpecError(f"R2D2Agent.update_spec: unknown key(s) {sorted(unknown)}; accepted: "
                                   f"{', '.join(DEFAULT_UPDATE_SPEC)}.")
        self.update_spec.update(update_spec or {})
        for key, value in self.update_spec.items():
            low = 0 if key == "steps_before_update" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise RLGraphSpecError(f"R2D2Agent.update_spec.{key}: expected a positive int, got {value!r}.")
        if isinstance(schedule_timesteps, bool) or not isinstance(schedule_timesteps, int) or schedule_timesteps < 1:
            raise RLGraphSpecError(f"R2D2Agent.schedule_timesteps: expected a positive int, got "
                                   f"{schedule_timesteps!r}.")
        self.schedule_timesteps = schedule_timesteps
        self.actor_epsilons_spec = _check_actor_epsilons(actor_epsilons)
        self.dueling, self.n_step, self.eta = bool(dueling), n_step, eta
        self.rescaling_epsilon, self.huber_loss = rescaling_epsilon, bool(huber_loss)
        self.pad_episode_starts = bool(pad_episode_starts)
        super().__init__(state_space, action_space, **kwargs)
        memory = self.root.memory
        self.burn_in = memory.burn_in_length
        self.assembler = SequenceAssembler(memory.sequence_length, memory.stride,
                                           start_padding=self.burn_in if self.pad_episode_starts else 0)
        self.actor_epsilons = None
        self._apex_epsilons = None
        self.last_update_timestep = 0
        self.last_sync_timestep = 0
        # Sequences inserted by this process (a loaded model comes without its replay memory's contents).
        self.stored_sequences = 0

    def build_root(self):
        if not isinstance(self.action_space, IntBox) or self.action_space.num_categories is None \
                or self.action_space.shape != ():
            raise RLGraphSpecError(f"R2D2Agent needs a discrete scalar (IntBox(n)) action space, got "
                                   f"{self.action_space!r}.")
        root = R2D2AlgorithmComponent(
            self.network_spec, self.action_space, self.memory_spec, self.exploration_spec, self.optimizer_spec,
            preprocessing_spec=self.preprocessing_spec, dueling=self.dueling, n_step=self.n_step,
            discount=self.discount, eta=self.eta, rescaling_epsilon=self.rescaling_epsilon,
            huber_loss=self.huber_loss)
        self.lstm_units = units = root.lstm_units
        lstm_state = Tuple(FloatBox(shape=(units,)), FloatBox(shape=(units,)))
        step_spaces = dict(states=self.state_space, actions=self.action_space, rewards=FloatBox(), terminals=BoolBox(),
                           bootstrap=BoolBox(), resets=BoolBox())
        self.record_space = Dict(step_spaces, **{END_KEY: BoolBox(), STATE_KEY: lstm_state}, add_batch_rank=True)
        sequence = self.state_space.with_batch_rank().with_time_rank(time_major=False)
        spaces = dict(states=sequence, internal_states=lstm_state.with_batch_rank(), time_percentage=float,
                      epsilon=FloatBox(add_batch_rank=True), records=self.record_space, batch_size=int,
                      sequences=Dict(step_spaces, mask=BoolBox(), add_batch_rank=True, add_time_rank=True),
                      initial_states=lstm_state.with_batch_rank(),
                      indices=IntBox(shape=(), dtype="int64", add_batch_rank=True),
                      importance_weights=FloatBox(add_batch_rank=True))
        if root.burn_in > 0:
            spaces["burn_in_states"] = sequence
            spaces["burn_in_resets"] = BoolBox(add_batch_rank=True, add_time_rank=True)
        return root, spaces

    @property
    def time_percentage(self):
        return min(1.0, self.timesteps / self.schedule_timesteps)

    # --- acting -----------------------------------------------------------------------------------------
    def set_actor_epsilons(self, epsilons):
        """Fixes one exploration epsilon per environment row; None returns to the configured behaviour."""
        self.actor_epsilons = None if epsilons is None else np.asarray(epsilons, np.float32)

    def initial_internal_states(self, num_envs):
        """Zero LSTM states ``(h, c)`` for ``num_envs`` environments."""
        zeros = np.zeros((num_envs, self.lstm_units), np.float32)
        return zeros, zeros.copy()

    def _epsilons(self, num_envs):
        """One epsilon per env row: set_actor_epsilons' values, else the configured ones."""
        epsilons = self.actor_epsilons
        if epsilons is None:
            spec = self.actor_epsilons_spec
            if isinstance(spec, dict):
                if self._apex_epsilons is None or len(self._apex_epsilons) != num_envs:
                    self._apex_epsilons = np.atleast_1d(np.asarray(
                        apex_epsilon(np.arange(num_envs), num_envs, base=spec["base"], alpha=spec["alpha"]),
                        np.float32))
                return self._apex_epsilons
            epsilons = spec
        if len(epsilons) != num_envs:
            raise RLGraphSpecError(f"R2D2Agent: {len(epsilons)} actor epsilons for a batch of {num_envs} states.")
        return epsilons

    def get_actions(self, states, explore=True, internal_states=None, return_extras=False):
        num_envs = batch_size_of(states)
        if internal_states is None:
            internal_states = self.initial_internal_states(num_envs)
        internal_states = tuple(internal_states)
        sequences = optree.tree_map(lambda x: np.asarray(x)[:, None], states)  # [N, 1, ...]: one time step.
        if not explore:
            actions, next_states = self.executor.execute("get_greedy_actions", sequences, internal_states)
        elif self.actor_epsilons is not None or self.actor_epsilons_spec is not None:
            actions, next_states = self.executor.execute("get_actions_with_epsilon", sequences, internal_states,
                                                         self._epsilons(num_envs))
        else:
            actions, next_states = self.executor.execute("get_actions", sequences, internal_states,
                                                         self.time_percentage)
        actions = actions[:, 0]
        if not return_extras:
            return actions
        return actions, dict(internal_states=tuple(next_states), step_internal_states=internal_states)

    def get_q_values(self, states, internal_states=None):
        """Q-values ``[N, T, A]`` of state sequences ``[N, T, ...]`` and the LSTM states after them."""
        if internal_states is None:
            internal_states = self.initial_internal_states(batch_size_of(states))
        return self.executor.execute("get_q_values", states, tuple(internal_states))

    # --- observing ------------------------------------------------------------------------------------------
    def observe(self, states, actions, rewards, next_states, terminals, truncations=None, internal_states=None,
                step_internal_states=None, **extras):
        """Adds one step of N environments to their sequences; inserts the sequences this step completes.

        Args:
            states, actions, rewards, next_states, terminals, truncations: The step (``next_states`` is
                ``env.final_obs``: the final observation of a truncated episode becomes a bootstrap step).
            internal_states: The LSTM states after the step (``get_actions``' extras).
            step_internal_states: The LSTM states the actor had when it acted on ``states`` (extras).
        """
        if step_internal_states is None or internal_states is None:
            raise RLGraphError("R2D2Agent.observe: needs internal_states and step_internal_states, the extras "
                               "that get_actions(..., return_extras=True) returned for this step.")
        terminals = np.asarray(terminals, bool)
        truncations = np.zeros_like(terminals) if truncations is None else np.asarray(truncations, bool)
        num_envs = len(terminals)
        self.timesteps += num_envs
        step = dict(states=states, actions=np.asarray(actions), rewards=np.asarray(rewards, np.float32),
                    terminals=terminals, bootstrap=np.zeros(num_envs, bool),
                    resets=self.assembler.episode_starts(num_envs) & self.pad_episode_starts)
        step[STATE_KEY] = tuple(step_internal_states)
        truncated = np.flatnonzero(truncations & ~terminals)
        bootstrap = None
        if truncated.size:
            # The final observation of a time-limit truncation, as an extra step to bootstrap from.
            bootstrap = dict(states=optree.tree_map(lambda x: np.asarray(x)[truncated], next_states),
                             actions=np.zeros(truncated.size, step["actions"].dtype),
                             rewards=np.zeros(truncated.size, np.float32), terminals=np.zeros(truncated.size, bool),
                             bootstrap=np.ones(truncated.size, bool), resets=np.zeros(truncated.size, bool))
            bootstrap[STATE_KEY] = tuple(np.asarray(s)[truncated] for s in internal_states)
        records = self.assembler.push(step, terminals | truncations, truncated, bootstrap)
        if records is not None:
            self.insert(records)

    def insert(self, records):
        """Inserts assembled sequences (per-step rows, each sequence's last row flagged in ``sequence_ends``)."""
        self.executor.execute("insert_records", records)
        self.stored_sequences += int(np.count_nonzero(records[END_KEY]))

    def reset(self):
        self.assembler.reset()

    # --- learning -------------------------------------------------------------------------------------------
    def ready_to_update(self):
        spec = self.update_spec
        return (self.timesteps >= spec["steps_before_update"] and self.stored_sequences >= spec["batch_size"]
                and self.timesteps - self.last_update_timestep >= spec["update_interval"])

    def split_sequences(self, sequences):
        """``(burn-in {"states", "resets"} [B, burn_in, ...] or None, training steps {key: [B, L - burn_in, ...]})``."""
        b = self.burn_in
        train = {k: optree.tree_map(lambda x: x[:, b:], sequences[k]) for k in SEQUENCE_KEYS + ("mask",)}
        if b == 0:
            return None, train
        return {k: optree.tree_map(lambda x: x[:, :b], sequences[k]) for k in ("states", "resets")}, train

    def _sequence_args(self, sequences):
        """(training steps, keyword arguments with the burn-in states and resets) for the update API methods."""
        burn_in, train = self.split_sequences(sequences)
        if burn_in is None:
            return train, {}
        return train, dict(burn_in_states=burn_in["states"], burn_in_resets=burn_in["resets"])

    def update(self, batch=None):
        if batch is None:
            self.last_update_timestep = self.timesteps
            for _ in range(self.update_spec["updates_per_interval"]):
                sequences, initial_states, indices, weights = self.executor.execute(
                    "get_sequences", self.update_spec["batch_size"])
                train, burn_in = self._sequence_args(sequences)
                loss, mean_priority = self.executor.execute("update_from_sequences", train, tuple(initial_states),
                                                            indices, weights, self.time_percentage, **burn_in)
                self.updates += 1
            results = dict(loss=float(loss), mean_priority=float(mean_priority))
        else:
            weights = batch.get("importance_weights")
            if weights is None:
                weights = np.ones(batch_size_of(batch["sequences"]["rewards"]), np.float32)
            train, burn_in = self._sequence_args(batch["sequences"])
            loss, priorities = self.executor.execute("update_from_batch", train, tuple(batch["initial_states"]),
                                                     weights, self.time_percentage, **burn_in)
            self.updates += 1
            results = dict(loss=float(loss), priorities=priorities)
        if self.timesteps - self.last_sync_timestep >= self.update_spec["sync_interval"]:
            self.sync_target()
        return results

    def get_loss_and_gradients(self, sequences, initial_states, importance_weights=None):
        """``(loss, priorities, gradients)`` of sampled-style sequences ``[B, L, ...]`` without an update."""
        if importance_weights is None:
            importance_weights = np.ones(batch_size_of(sequences["rewards"]), np.float32)
        train, burn_in = self._sequence_args(sequences)
        return self.executor.execute("get_loss_and_gradients", train, tuple(initial_states), importance_weights,
                                     **burn_in)

    def on_load(self):
        self.last_update_timestep = self.last_sync_timestep = self.timesteps
        self.assembler.reset()

    def sync_target(self):
        self.executor.execute("sync_target")
        self.last_sync_timestep = self.timesteps
        logger.debug("%s: target network synced at %d env steps, %d updates.", self.name, self.timesteps,
                     self.updates)


def _check_actor_epsilons(spec):
    """None, ``{"base", "alpha"}`` (Ape-X) or a float32 array; "apex" is Ape-X's 0.4 and 7."""
    if spec is None:
        return None
    if isinstance(spec, str) and spec == "apex":
        return dict(base=0.4, alpha=7.0)
    if isinstance(spec, dict):
        unknown = set(spec) - {"type", "base", "alpha"}
        if unknown or spec.get("type", "apex") != "apex":
            raise RLGraphSpecError(f"R2D2Agent.actor_epsilons: expected {{\"base\": ..., \"alpha\": ...}} (Ape-X), "
                                   f"got {spec!r}.")
        return dict(base=float(spec.get("base", 0.4)), alpha=float(spec.get("alpha", 7.0)))
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(e, (int, float)) and not isinstance(e, bool)
                                                        and 0.0 <= e <= 1.0 for e in spec):
        return np.asarray(spec, np.float32)
    raise RLGraphSpecError(f"R2D2Agent.actor_epsilons: expected None, \"apex\", an Ape-X dict {{\"base\": ..., "
                           f"\"alpha\": ...}} or a list of epsilons in [0, 1], got {spec!r}.")


class SequenceAssembler:
    """Cuts the per-step records of N environments into fixed-length, overlapping sequences.

    The rule is ``SequenceReplay``'s (Kapturowski et al. 2019): with length ``L`` and stride ``S``, window
    ``k`` of an episode covers its steps ``[k S, k S + L)``; sequences never cross episode ends; when an
    episode ends, its remaining window is emitted if it holds steps no emitted sequence covers, shorter than
    ``L`` (the memory pads it). Each record row holds the recurrent state the actor had before that step, so a
    sequence's first row carries its initial state.

    With ``start_padding = P > 0`` every episode is preceded by P zero rows (all keys zero, also the recurrent
    state), i.e. the rule above runs on the padded episode. With ``P`` = the burn-in length, the first window
    burns in over the padding only and trains from the episode's first step on (a learner that zeroes the
    recurrent state at the first real step, see ``episode_starts``, then reproduces the actor's zero state
    exactly), so no step of an episode is left untrained.

    All environments are handled at once: one fancy-indexed write per step into ``[N, L, ...]`` buffers, and
    one gather per step for the sequences completed in that step. Python does not loop over environments.

    Args:
        sequence_length: L.
        stride: S (L minus the overlap).
        start_padding: P, zero rows before each episode (< L).
    """

    def __init__(self, sequence_length, stride, start_padding=0):
        self.length, self.stride, self.padding = int(sequence_length), int(stride), int(start_padding)
        if not 0 <= self.padding < self.length:
            raise RLGraphSpecError(f"SequenceAssembler: start_padding must lie in [0, {self.length}), got "
                                   f"{start_padding!r}.")
        self.buffers = None
        self.count = self.covered = self.starting = None

    def reset(self):
        """Drops all pending steps; the next step of every env counts as the first of an episode."""
        self.buffers = None

    def episode_starts(self, num_envs):
        """Bool [N]: whether the next step of each env is the first of an episode."""
        return np.ones(num_envs, bool) if self.buffers is None else self.starting.copy()

    def push(self, step, done, bootstrap_ids=None, bootstrap_step=None):
        """Adds one step of all N envs; returns the rows of the sequences it completes (or None).

        Args:
            step: A dict (nested values allowed) of per-step values, leading dimension N.
            done: Bool [N], the episode ended with this step.
            bootstrap_ids: Env ids that get an extra step after this one (before the episode end is handled).
            bootstrap_step: That extra step's values, leading dimension ``len(bootstrap_ids)``.

        Returns:
            The dict of the new sequences' rows (sequence after sequence, ``lengths`` rows each) plus
            ``sequence_ends`` marking each sequence's last row; None if no sequence was completed.
        """
        num_envs = len(done)
        if self.buffers is None:
            self.buffers = optree.tree_map(
                lambda x: np.zeros((num_envs, self.length) + np.shape(x)[1:], np.asarray(x).dtype), step)
            self.count = np.zeros(num_envs, np.int64)
            self.covered = np.zeros(num_envs, np.int64)
            self.starting = np.ones(num_envs, bool)
        elif len(self.count) != num_envs:
            raise RLGraphError(f"SequenceAssembler: a step of {num_envs} environments after steps of "
                               f"{len(self.count)}; call reset() when the number of environments changes.")
        out = []
        if self.padding and self.starting.any():
            starting = np.flatnonzero(self.starting)

            def pad(buffer):
                buffer[starting, :self.padding] = 0
            optree.tree_map(pad, self.buffers)
            self.count[starting] = self.padding
        self.starting[:] = False
        self._write(np.arange(num_envs), step)
        self._emit_full(out)
        if bootstrap_ids is not None and len(bootstrap_ids):
            self._write(np.asarray(bootstrap_ids), bootstrap_step)
            self._emit_full(out)
        done = np.asarray(done, bool)
        if done.any():
            ends = np.flatnonzero(done & (self.count > self.covered))
            if ends.size:
                out.append(self._gather(ends, self.count[ends]))
            self.count[done] = 0
            self.covered[done] = 0
            self.starting[done] = True
        if not out:
            return None
        return optree.tree_map(lambda *xs: np.concatenate(xs), *out) if len(out) > 1 else out[0]

    def _write(self, ids, values):
        pos = self.count[ids]

        def write(buffer, value):
            buffer[ids, pos] = value
        optree.tree_map(write, self.buffers, values)
        self.count[ids] += 1

    def _emit_full(self, out):
        full = np.flatnonzero(self.count == self.length)
        if not full.size:
            return
        out.append(self._gather(full, np.full(full.size, self.length)))
        keep = self.length - self.stride

        def shift(buffer):
            buffer[full, :keep] = buffer[full, self.stride:]
        optree.tree_map(shift, self.buffers)
        self.count[full] = keep
        self.covered[full] = keep

    def _gather(self, ids, lengths):
        """Rows ``[0, lengths[i])`` of the buffers of envs ``ids``, one sequence after another."""
        env = np.repeat(ids, lengths)
        starts = np.cumsum(lengths) - lengths
        t = np.arange(env.size) - np.repeat(starts, lengths)
        rows = optree.tree_map(lambda b: b[env, t], self.buffers)
        ends = np.zeros(env.size, bool)
        ends[starts + lengths - 1] = True
        rows[END_KEY] = ends
        return rows
