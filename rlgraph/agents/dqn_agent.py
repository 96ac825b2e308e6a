"""The DQN agent: double, dueling, n-step, prioritized replay."""
import numpy as np

from rlgraph.agents.agent import Agent, _to_space, batch_size_of
from rlgraph.agents.n_step_buffer import NStepBuffer
from rlgraph.components.algorithms.dqn_algorithm_component import DQNAlgorithmComponent
from rlgraph.spaces import BoolBox, Dict, FloatBox, IntBox
from rlgraph.utils.errors import RLGraphSpecError

DEFAULT_UPDATE_SPEC = dict(batch_size=64, update_interval=4, updates_per_interval=1, steps_before_update=1000,
                           sync_interval=500)


class DQNAgent(Agent):
    """Deep Q-learning (Mnih et al. 2015) with double Q, dueling heads, n-step returns, prioritized replay.

    Args:
        memory_spec: The replay memory (``{"type": "prioritized-replay", "capacity": ..., "alpha": ...}`` or
            ``{"type": "replay-memory", ...}``).
        exploration_spec: Epsilon-greedy exploration, e.g. ``{"epsilon_spec": ["linear", 1.0, 0.02]}``.
        update_spec: ``batch_size``, ``update_interval`` (env steps between updates), ``updates_per_interval``,
            ``steps_before_update`` (env steps before the first update), ``sync_interval`` (env steps between
            target-network syncs).
        schedule_timesteps: Env steps over which schedules (epsilon, learning rate) run from start to end.
        dueling, double_q, huber_loss, n_step: See ``DQNAlgorithmComponent``.
        **kwargs: See ``Agent``.
    """

    __aliases__ = ("dqn",)
    #: The root component class (Ape-X swaps in its own).
    algorithm_component_class = DQNAlgorithmComponent

    def __init__(self, state_space, action_space, memory_spec=None, exploration_spec=None, update_spec=None,
                 schedule_timesteps=100000, dueling=True, double_q=True, huber_loss=True, n_step=1, **kwargs):
        self.memory_spec = memory_spec or {"type": "prioritized-replay", "capacity": 50000}
        self.exploration_spec = exploration_spec or {"epsilon_spec": ["linear", 1.0, 0.05]}
        self.update_spec = dict(DEFAULT_UPDATE_SPEC)
        unknown = set(update_spec or {}) - set(DEFAULT_UPDATE_SPEC)
        if unknown:
            raise RLGraphSpecError(f"update_spec: unknown key(s) {sorted(unknown)}; accepted: "
                                   f"{', '.join(DEFAULT_UPDATE_SPEC)}.")
        self.update_spec.update(update_spec or {})
        for key, value in self.update_spec.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "steps_before_update" else 1):
                raise RLGraphSpecError(f"update_spec.{key}: expected a positive int, got {value!r}.")
        if isinstance(schedule_timesteps, bool) or not isinstance(schedule_timesteps, int) or schedule_timesteps < 1:
            raise RLGraphSpecError(f"schedule_timesteps: expected a positive int, got {schedule_timesteps!r}.")
        self.schedule_timesteps = schedule_timesteps
        self.dueling, self.double_q, self.huber_loss, self.n_step = dueling, double_q, huber_loss, int(n_step)
        space = _to_space(action_space, "action_space")
        if not isinstance(space, IntBox) or space.num_categories is None:
            raise RLGraphSpecError(f"{type(self).__name__} needs a discrete (IntBox) action space, got {space!r}.")
        super().__init__(state_space, action_space, **kwargs)
        self.n_step_buffer = NStepBuffer(self.n_step, self.discount)
        self.actor_epsilons = None
        self.last_update_timestep = 0
        self.last_sync_timestep = 0
        # Records inserted by this process (a loaded model comes without its replay memory's contents).
        self.stored_records = 0

    def build_root(self):
        root = self.algorithm_component_class(
            self.network_spec, self.action_space, self.memory_spec, self.exploration_spec, self.optimizer_spec,
            preprocessing_spec=self.preprocessing_spec, dueling=self.dueling, double_q=self.double_q,
            huber_loss=self.huber_loss, n_step=self.n_step, discount=self.discount)
        states = self.state_space.with_batch_rank()
        self.record_space = Dict(states=self.state_space, actions=self.action_space, rewards=FloatBox(),
                                 terminals=BoolBox(), next_states=self.state_space, add_batch_rank=True)
        return root, dict(states=states, time_percentage=float, batch_size=int, epsilon=FloatBox(add_batch_rank=True),
                          records=self.record_space, importance_weights=FloatBox(add_batch_rank=True))

    @property
    def time_percentage(self):
        return min(1.0, self.timesteps / self.schedule_timesteps)

    # --- acting -----------------------------------------------------------------------------------------
    def set_actor_epsilons(self, epsilons):
        """Fixes one exploration epsilon per environment row (Ape-X actors); None returns to the schedule."""
        self.actor_epsilons = None if epsilons is None else np.asarray(epsilons, np.float32)

    def get_actions(self, states, explore=True, internal_states=None, return_extras=False):
        if not explore:
            actions = self.executor.execute("get_greedy_actions", states)
        elif self.actor_epsilons is not None:
            if len(self.actor_epsilons) != batch_size_of(states):
                raise RLGraphSpecError(f"{len(self.actor_epsilons)} actor epsilons for a batch of "
                                       f"{batch_size_of(states)} states.")
            actions = self.executor.execute("get_actions_with_epsilon", states, self.actor_epsilons)
        else:
            actions = self.executor.execute("get_actions", states, self.time_percentage)
        return (actions, {}) if return_extras else actions

    def get_q_values(self, states):
        return self.executor.execute("get_q_values", states)

    # --- observing and learning ---------------------------------------------------------------------------
    def observe(self, states, actions, rewards, next_states, terminals, truncations=None, **extras):
        terminals = np.asarray(terminals, bool)
        dones = terminals if truncations is None else terminals | np.asarray(truncations, bool)
        self.timesteps += len(terminals)
        records = self.n_step_buffer.push(states, actions, rewards, next_states, terminals, dones)
        if records is not None:
            self.insert(records)

    def insert(self, records):
        """Inserts a batch of (n-step) transitions into the replay memory."""
        self.executor.execute("insert_records", records)
        self.stored_records += batch_size_of(records["rewards"])

    def reset(self):
        self.n_step_buffer.reset()

    def ready_to_update(self):
        spec = self.update_spec
        return (self.stored_records >= max(spec["steps_before_update"], spec["batch_size"])
                and self.timesteps - self.last_update_timestep >= spec["update_interval"])

    def update(self, batch=None):
        results = {}
        if batch is None:
            self.last_update_timestep = self.timesteps
            for _ in range(self.update_spec["updates_per_interval"]):
                loss, mean_td = self.executor.execute("update_from_memory", self.update_spec["batch_size"],
                                                      self.time_percentage)
                self.updates += 1
            results = dict(loss=float(loss), mean_abs_td_error=float(mean_td))
        else:
            weights = batch.pop("importance_weights", None)
            if weights is None:
                weights = np.ones(batch_size_of(batch["rewards"]), np.float32)
            loss, td_errors = self.executor.execute("update_from_batch", batch, weights, self.time_percentage)
            self.updates += 1
            results = dict(loss=float(loss), td_errors=td_errors)
        if self.timesteps - self.last_sync_timestep >= self.update_spec["sync_interval"]:
            self.sync_target()
        return results

    def on_load(self):
        self.last_update_timestep = self.last_sync_timestep = self.timesteps
        self.n_step_buffer.reset()

    def sync_target(self):
        self.executor.execute("sync_target")
        self.last_sync_timestep = self.timesteps

    def get_td_errors(self, records):
        return self.executor.execute("get_td_errors", records)
