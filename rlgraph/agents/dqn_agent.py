"""The DQN agent: double, dueling, n-step, prioritized replay."""
from rlgraph.agents.agent import Agent, _to_space, check_update_spec
from rlgraph.agents.dqn_actor import DQNActor
from rlgraph.agents.dqn_learner import DQNLearner
from rlgraph.components.algorithms.dqn_algorithm_component import DQNAlgorithmComponent
from rlgraph.spaces import BoolBox, Dict, FloatBox, IntBox
from rlgraph.trajectories import NStepBuilder
from rlgraph.utils.validation import Bool, Int, check_args, spec_error

DEFAULT_UPDATE_SPEC = dict(batch_size=64, update_interval=4, updates_per_interval=1, steps_before_update=1000,
                           sync_interval=500)


class DQNAgent(Agent):
    """Deep Q-learning (Mnih et al. 2015) with double Q, dueling heads, n-step returns, prioritized replay.

    Roles: ``DQNActor`` (epsilon-greedy acting), ``NStepBuilder`` (n-step transitions per environment id),
    ``DQNLearner`` (replay memory, updates, target syncs).

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
    algorithm_class = DQNAlgorithmComponent
    actor_class = DQNActor
    learner_class = DQNLearner
    actor_api_methods = ("get_q_values", "get_greedy_actions", "get_actions", "get_actions_with_epsilon")

    #: What the checked constructor arguments accept.
    ARG_RULES = dict(schedule_timesteps=Int(min=1), dueling=Bool(), double_q=Bool(), huber_loss=Bool(),
                     n_step=Int(min=1))

    def __init__(self, state_space, action_space, memory_spec=None, exploration_spec=None, update_spec=None,
                 schedule_timesteps=100000, dueling=True, double_q=True, huber_loss=True, n_step=1, **kwargs):
        self.memory_spec = memory_spec or {"type": "prioritized-replay", "capacity": 50000}
        self.exploration_spec = exploration_spec or {"epsilon_spec": ["linear", 1.0, 0.05]}
        self.update_spec = check_update_spec(type(self).__name__, update_spec, DEFAULT_UPDATE_SPEC)
        args = check_args(type(self).__name__, DQNAgent.ARG_RULES,
                          dict(schedule_timesteps=schedule_timesteps, dueling=dueling, double_q=double_q,
                               huber_loss=huber_loss, n_step=n_step))
        self.schedule_timesteps, self.n_step = args["schedule_timesteps"], args["n_step"]
        self.dueling, self.double_q, self.huber_loss = args["dueling"], args["double_q"], args["huber_loss"]
        space = _to_space(action_space, "action_space")
        if not isinstance(space, IntBox) or space.num_categories is None:
            raise spec_error(type(self).__name__, "action_space", f"needs a discrete (IntBox) action space, got "
                             f"{space!r}.")
        super().__init__(state_space, action_space, **kwargs)

    def build_root(self):
        root = self.algorithm_class(
            self.network_spec, self.action_space, self.memory_spec, self.exploration_spec, self.optimizer_spec,
            preprocessing_spec=self.preprocessing_spec, dueling=self.dueling, double_q=self.double_q,
            huber_loss=self.huber_loss, n_step=self.n_step, discount=self.discount)
        states = self.state_space.with_batch_rank()
        self.record_space = Dict(states=self.state_space, actions=self.action_space, rewards=FloatBox(),
                                 terminals=BoolBox(), next_states=self.state_space, add_batch_rank=True)
        return root, dict(states=states, time_percentage=float, batch_size=int, epsilon=FloatBox(add_batch_rank=True),
                          records=self.record_space, importance_weights=FloatBox(add_batch_rank=True))

    def make_trajectory_builder(self):
        return NStepBuilder(self.n_step, self.discount)

    # --- conveniences of the roles ------------------------------------------------------------------------
    def set_actor_epsilons(self, epsilons):
        """Fixes one exploration epsilon per environment row (Ape-X actors); None returns to the default."""
        self._role("actor", "set_actor_epsilons").set_epsilons(epsilons)

    def get_q_values(self, states):
        return self.executor.execute("get_q_values", states)

    def get_td_errors(self, records):
        """TD errors of transitions under the learner's networks (online and target)."""
        return self.executor.execute("get_td_errors", records)

    def sync_target(self):
        self._role("learner", "sync_target").sync_target()
