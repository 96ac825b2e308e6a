"""The root component of DQN-family agents (DQN, Ape-X)."""
from rlgraph.components.common.synchronizable import Synchronizable
from rlgraph.components.component import Component
from rlgraph.components.explorations.exploration import Exploration
from rlgraph.components.loss_functions.dqn_loss_function import DQNLossFunction
from rlgraph.components.memories.memory import Memory
from rlgraph.components.optimizers.optimizer import Optimizer
from rlgraph.components.policies.dueling_policy import DuelingPolicy
from rlgraph.components.policies.policy import Policy
from rlgraph.components.preprocessing.preprocessor_stack import PreprocessorStack
from rlgraph.utils.decorators import graph_fn, rlgraph_api


class DQNAlgorithmComponent(Component):
    """Q-learning with a target network, double Q, dueling heads, n-step returns and (prioritized) replay.

    Mnih et al. 2015 (DQN), van Hasselt et al. 2016 (double Q), Wang et al. 2016 (dueling), Schaul et al.
    2016 (prioritized replay), Horgan et al. 2018 (Ape-X). Transitions are stored raw (n-step returns are
    formed by the agent before insertion) and preprocessed inside the graph on use.

    API:
        get_actions(states, time_percentage): Epsilon-greedy actions, epsilon from the schedule.
        get_actions_with_epsilon(states, epsilon): Epsilon-greedy with one epsilon per row (Ape-X actors).
        get_greedy_actions(states): argmax_a Q(s, a).
        get_q_values(states): Q(s, .).
        insert_records(records): Into the replay memory (a dict: states, actions, rewards, terminals,
            next_states).
        update_from_memory(batch_size, time_percentage): Samples a batch, takes one optimizer step, writes new priorities
            (prioritized memories); returns (loss, mean |TD error|).
        update_from_batch(records, importance_weights, time_percentage): One step on an external batch;
            returns (loss, TD errors) so that a distributed replay can update its priorities.
        get_td_errors(records): TD errors of transitions (Ape-X actors' initial priorities).
        sync_target(): Copies the online network's weights into the target network.
    """

    default_scope = "dqn"

    def __init__(self, network_spec, action_space, memory_spec, exploration_spec, optimizer_spec,
                 preprocessing_spec=None, dueling=True, double_q=True, huber_loss=True, n_step=1, discount=0.99,
                 priority_epsilon=1e-6, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.preprocessor = PreprocessorStack(preprocessing_spec=list(preprocessing_spec or []),
                                              scope="preprocessor")
        if dueling:
            self.policy = DuelingPolicy(network_spec, action_space=action_space, scope="policy")
        else:
            self.policy = Policy(network_spec, action_space=action_space, scope="policy")
        self.target_policy = Synchronizable(self.policy.copy(scope="target-policy-net", trainable=False),
                                            scope="target-policy")
        self.memory = Memory.from_spec(memory_spec, _path="memory_spec")
        self.prioritized = "update_records" in self.memory.api_methods
        self.exploration = Exploration.from_spec(dict(exploration_spec, action_space=action_space),
                                                 _path="exploration_spec")
        self.loss_function = DQNLossFunction(double_q=double_q, huber_loss=huber_loss, n_step=n_step,
                                             discount=discount, importance_weights=self.prioritized)
        self.optimizer = Optimizer.from_spec(optimizer_spec, _path="optimizer_spec")
        self.double_q = double_q
        self.priority_epsilon = float(priority_epsilon)
        self.add_components(self.preprocessor, self.policy, self.target_policy, self.memory, self.exploration,
                            self.loss_function, self.optimizer)

    # --- acting ---------------------------------------------------------------------------------------------
    @rlgraph_api
    def get_q_values(self, states):
        return self.policy.get_adapter_outputs(self.preprocessor.preprocess(states))["adapter_outputs"]

    @rlgraph_api
    def get_greedy_actions(self, states):
        return self.policy.get_deterministic_action(self.preprocessor.preprocess(states))["action"]

    @rlgraph_api
    def get_actions(self, states, time_percentage):
        return self.exploration.get_action(self.get_greedy_actions(states), time_percentage)

    @rlgraph_api
    def get_actions_with_epsilon(self, states, epsilon):
        return self.exploration.get_action_with_epsilon(self.get_greedy_actions(states), epsilon)

    # --- learning -------------------------------------------------------------------------------------------
    @rlgraph_api
    def insert_records(self, records):
        return self.memory.insert_records(records)

    def _loss(self, records, importance_weights):
        states = self.preprocessor.preprocess(records["states"])
        next_states = self.preprocessor.preprocess(records["next_states"])
        q_s = self.policy.get_adapter_outputs(states)["adapter_outputs"]
        # The loss treats both as constants: on PyTorch they record no graph for a backward pass never reaching them.
        with self.no_gradient_recording():
            qt_sp = self.target_policy.get_adapter_outputs(next_states)["adapter_outputs"]
            q_sp = self.policy.get_adapter_outputs(next_states)["adapter_outputs"] if self.double_q else None
        return self.loss_function.loss(q_s, records["actions"], records["rewards"], records["terminals"], qt_sp,
                                       q_sp, importance_weights)

    @rlgraph_api(batch_size_arg="batch_size")  # Towers of a multi-device strategy each draw their share.
    def update_from_memory(self, batch_size, time_percentage):
        if self.prioritized:
            records, indices, weights = self.memory.get_records(batch_size)
        else:
            records, indices, weights = self.memory.get_records(batch_size), None, None
        loss, td_errors = self._loss(records, weights)
        step_loss, _ = self.optimizer.step(self.policy.variables(), loss, time_percentage)
        priorities = self._graph_fn_priorities(td_errors)
        if self.prioritized:
            self.memory.update_records(indices, priorities)
        return step_loss, self._graph_fn_mean(priorities)

    @rlgraph_api
    def update_from_batch(self, records, importance_weights, time_percentage):
        loss, td_errors = self._loss(records, importance_weights)
        step_loss, _ = self.optimizer.step(self.policy.variables(), loss, time_percentage)
        return step_loss, td_errors

    @rlgraph_api
    def get_td_errors(self, records):
        weights = self._graph_fn_ones_like(records["rewards"]) if self.prioritized else None
        _, td_errors = self._loss(records, weights)
        return td_errors

    @rlgraph_api
    def sync_target(self):
        return self.target_policy.sync(self.policy.variables())

    # --- graph functions --------------------------------------------------------------------------------
    @graph_fn
    def _graph_fn_priorities(self, td_errors):
        return self.ops.stop_gradient(self.ops.abs(td_errors)) + self.priority_epsilon

    @graph_fn
    def _graph_fn_ones_like(self, x):
        return self.ops.ones_like(x)

    @graph_fn
    def _graph_fn_mean(self, x):
        return self.ops.mean(x)
