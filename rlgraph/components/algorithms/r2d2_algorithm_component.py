"""The root component of the R2D2 agent: recurrent Q-learning from stored sequences (Kapturowski et al. 2019)."""
import logging

from rlgraph.components.common.synchronizable import Synchronizable
from rlgraph.components.component import Component
from rlgraph.components.explorations.exploration import Exploration
from rlgraph.components.helpers.value_function_rescaling import ValueFunctionRescaling
from rlgraph.components.loss_functions.r2d2_loss_function import R2D2LossFunction
from rlgraph.components.memories.memory import Memory
from rlgraph.components.memories.sequence_replay import SequenceReplay
from rlgraph.components.optimizers.optimizer import Optimizer
from rlgraph.components.policies.dueling_policy import DuelingPolicy
from rlgraph.components.policies.policy import Policy
from rlgraph.components.preprocessing.preprocessor_stack import PreprocessorStack
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.validation import Bool, Int, Mapping, Number, check_args, spec_error

logger = logging.getLogger(__name__)

#: The record key of the initial recurrent state of a stored sequence (the memory's ``state_key``).
STATE_KEY = "internal_states"


class R2D2AlgorithmComponent(Component):
    """Recurrent replay distributed DQN (R2D2, Kapturowski et al. 2019), the learner and actor graph.

    An LSTM Q-network (dueling heads optional, Wang et al. 2016) with a target copy, a prioritized
    ``SequenceReplay`` of fixed-length sequences with their stored initial recurrent state, the
    ``R2D2LossFunction`` (n-step double-Q targets with the value rescaling ``h`` of Pohlen et al. 2018) and an
    optimizer.

    Learning on a sequence of ``burn_in + T`` steps (batch-major ``[B, ...]``): the online network runs over the
    ``burn_in`` steps from the stored state without gradient (the state after them is stop-gradiented), then
    computes Q on the ``T`` training steps; the target network does the same with its own weights. The loss is
    taken on the ``T`` training steps (its last ``n_step`` steps only serve as bootstrap states) and the
    sequence priority ``eta max_t |delta_t| + (1 - eta) mean_t |delta_t|`` is written back to the memory.

    Per-step sequence flags: ``resets`` (the LSTM state is zeroed before the step: an episode's first step
    after zero padding in front of it), ``mask`` (False on the zero padding after an episode's last step) and
    ``bootstrap`` (True on a step appended after a time-limit truncation that holds the episode's final
    observation, so that the steps before it bootstrap from ``V(final_obs)``). Padding and bootstrap steps are
    kept out of the loss: they count as terminal, a bootstrap step's reward becomes
    ``h^-1(Q_target(s, argmax_a Q(s, a)))`` of its state (so an n-step window reaching past it adds exactly the
    bootstrap term it would have had), and their Q-values are replaced by their own (constant) targets, so
    their TD errors are exactly zero and carry no gradient.

    Sampling and learning are two API calls (``get_sequences``, then ``update_from_sequences`` with the burn-in
    and training steps split apart by the caller): the memory's outputs have no time rank (the sequence axis
    is an item dimension of fixed length), while the LSTM and the loss need time-ranked inputs; the split
    inputs get their time ranks from the input spaces. The same update then serves external batches.

    API:
        get_actions(states, internal_states, time_percentage): Epsilon-greedy actions (epsilon from the
            schedule) and the next internal states. ``states`` has batch and time ranks ``[B, T, ...]`` (T = 1
            when acting step by step); ``internal_states`` is the LSTM's ``(h, c)``, each ``[B, units]``.
        get_actions_with_epsilon(states, internal_states, epsilon): The same with one epsilon per row
            (Ape-X/R2D2 actors).
        get_greedy_actions(states, internal_states): ``(argmax_a Q, next internal states)``.
        get_q_values(states, internal_states): ``(Q [B, T, A], next internal states)``.
        insert_records(records): Whole sequences into the ``SequenceReplay``: per-step keys ``[B, L, ...]``,
            ``mask`` ``[B, L]`` and the initial recurrent state (cut by ``rlgraph.trajectories.SequenceBuilder``).
        get_sequences(batch_size): ``(sequences, initial_states, indices, importance_weights)`` from the memory;
            sequences ``[B, L, ...]`` with the keys of the records plus ``mask``.
        get_memory_size(): The number of sequences held.
        update_from_sequences(sequences, initial_states, indices, importance_weights, time_percentage,
            burn_in_states=None, burn_in_resets=None): One optimizer step on sampled sequences split into the
            training steps (``sequences``: states, actions, rewards, terminals, bootstrap, resets, mask, each
            ``[B, T, ...]``) and the burn-in steps before them (states and resets ``[B, burn_in, ...]``; None
            without burn-in); writes the new priorities to the memory; returns ``(loss, mean priority)``.
        update_from_batch(sequences, initial_states, importance_weights, time_percentage, burn_in_states=None,
            burn_in_resets=None): The same on an external batch (nothing written to the memory); returns
            ``(loss, priorities [B])``.
        get_loss_and_gradients(sequences, initial_states, importance_weights, burn_in_states=None,
            burn_in_resets=None): ``(loss, priorities, gradients)`` without an update (gradients keyed like the
            policy's ``variables()``).
        sync_target(): Copies the online network's weights into the target network.

    Args:
        network_spec: The Q-network's layers; must hold an LSTM layer.
        action_space: The (discrete) action space.
        memory_spec: A ``SequenceReplay`` spec (``capacity``, ``burn_in_length``, ``train_length``, ``overlap``,
            ``alpha``, ``beta``); its state and terminal keys are set here.
        exploration_spec: The epsilon schedule of ``get_actions`` (``{"epsilon_spec": ...}``).
        optimizer_spec: The optimizer.
        preprocessing_spec: Preprocessors applied to the states inside the graph.
        dueling: Dueling Q-heads.
        n_step: The n of the n-step targets (R2D2: 5).
        discount: The discount factor (R2D2: 0.997).
        eta: Priority mix of max and mean |TD error| (R2D2: 0.9).
        rescaling_epsilon: The epsilon of the value rescaling h (R2D2: 1e-3).
        huber_loss: Huber instead of squared TD errors.
        value_rescaling: Targets under the value rescaling h (R2D2); False: plain n-step double-Q targets.
        priority_epsilon: Added to the priorities written back (keeps every sequence sampleable).
    """

    default_scope = "r2d2"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(memory_spec=Mapping(), n_step=Int(min=1), discount=Number(min=0.0, max=1.0),
                     eta=Number(min=0.0, max=1.0), rescaling_epsilon=Number(min=0.0), priority_epsilon=Number(min=0.0),
                     value_rescaling=Bool())

    def __init__(self, network_spec, action_space, memory_spec, exploration_spec, optimizer_spec,
                 preprocessing_spec=None, dueling=True, n_step=5, discount=0.997, eta=0.9, rescaling_epsilon=1e-3,
                 huber_loss=False, priority_epsilon=1e-6, value_rescaling=True, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        owner = "R2D2AlgorithmComponent"
        args = check_args(owner, R2D2AlgorithmComponent.ARG_RULES, dict(
            memory_spec=memory_spec, n_step=n_step, discount=discount, eta=eta, rescaling_epsilon=rescaling_epsilon,
            priority_epsilon=priority_epsilon, value_rescaling=value_rescaling))
        n_step = args["n_step"]
        self.preprocessor = PreprocessorStack(preprocessing_spec=list(preprocessing_spec or []),
                                              scope="preprocessor")
        policy_class = DuelingPolicy if dueling else Policy
        self.policy = policy_class(network_spec, action_space=action_space, scope="policy")
        if not self.policy.is_recurrent:
            raise spec_error(owner, "network_spec", "R2D2 needs a recurrent Q-network (a layer {\"type\": \"lstm\", "
                             "...}), got none.")
        self.target_policy = Synchronizable(self.policy.copy(scope="target-policy-net", trainable=False),
                                            scope="target-policy")
        for key in ("state_key", "mask_key"):
            if key in memory_spec:
                raise spec_error(owner, f"memory_spec.{key}", "is set by the component; leave it out.")
        self.memory = Memory.from_spec(dict({"type": "sequence-replay"}, **memory_spec, state_key=STATE_KEY),
                                       _path="memory_spec")
        if not isinstance(self.memory, SequenceReplay):
            raise spec_error(owner, "memory_spec.type", f"R2D2 needs a SequenceReplay, got a "
                             f"{type(self.memory).__name__}.")
        self.burn_in = self.memory.burn_in_length
        if self.memory.train_length <= n_step:
            raise spec_error(owner, "memory_spec.train_length", f"must exceed n_step ({n_step}), got "
                             f"{self.memory.train_length}; the last n_step steps only bootstrap.")
        untrained = self.memory.stride - (self.memory.train_length - n_step)
        if untrained > 0:
            logger.warning(
                "%s: sequences start every %d steps (memory_spec: burn_in_length + train_length - overlap) but "
                "train on %d (train_length - n_step), so %d of every %d steps of an episode are never trained on; "
                "an overlap of burn_in_length + n_step = %d trains every step once.", owner, self.memory.stride,
                self.memory.train_length - n_step, untrained, self.memory.stride, self.burn_in + n_step)
        self.exploration = Exploration.from_spec(dict(exploration_spec or {}, action_space=action_space),
                                                 _path="exploration_spec")
        # The burn-in steps are cut off before the loss: it sees only the training steps (burn_in=0).
        self.loss_function = R2D2LossFunction(burn_in=0, n_step=n_step, discount=discount, epsilon=rescaling_epsilon,
                                              eta=eta, huber_loss=huber_loss, importance_weights=True,
                                              value_rescaling=args["value_rescaling"])
        self.value_rescaling = ValueFunctionRescaling(epsilon=rescaling_epsilon, enabled=args["value_rescaling"],
                                                      scope="value-rescaling")
        self.optimizer = Optimizer.from_spec(optimizer_spec, _path="optimizer_spec")
        self.priority_epsilon = args["priority_epsilon"]
        self.add_components(self.preprocessor, self.policy, self.target_policy, self.memory, self.exploration,
                            self.loss_function, self.value_rescaling, self.optimizer)

    @property
    def lstm_units(self):
        """The size of the LSTM's h and c."""
        return self.policy.network.lstm.units

    # --- acting ---------------------------------------------------------------------------------------------
    @rlgraph_api
    def get_q_values(self, states, internal_states):
        out = self.policy.get_adapter_outputs(self.preprocessor.preprocess(states), internal_states)
        return out["adapter_outputs"], out["internal_states"]

    @rlgraph_api
    def get_greedy_actions(self, states, internal_states):
        out = self.policy.get_deterministic_action(self.preprocessor.preprocess(states), internal_states)
        return out["action"], out["internal_states"]

    @rlgraph_api
    def get_actions(self, states, internal_states, time_percentage):
        actions, next_states = self.get_greedy_actions(states, internal_states)
        return self.exploration.get_action(actions, time_percentage), next_states

    @rlgraph_api
    def get_actions_with_epsilon(self, states, internal_states, epsilon):
        actions, next_states = self.get_greedy_actions(states, internal_states)
        return self.exploration.get_action_with_epsilon(actions, epsilon), next_states

    # --- learning -------------------------------------------------------------------------------------------
    @rlgraph_api
    def insert_records(self, records):
        return self.memory.insert_records(records)

    @rlgraph_api
    def get_sequences(self, batch_size):
        return self.memory.get_records(batch_size)

    @rlgraph_api
    def get_memory_size(self):
        return self.memory.get_size()

    def _loss(self, sequences, initial_states, importance_weights, burn_in_states, burn_in_resets):
        """Wires burn-in, Q-values and the masked loss (called from API bodies); returns (loss, priorities)."""
        states, resets = self.preprocessor.preprocess(sequences["states"]), sequences["resets"]
        online_state, target_state = initial_states, initial_states
        # Burn-in and target passes are constants to the loss: on PyTorch they record no graph for a backward pass.
        with self.no_gradient_recording():
            if self.burn_in > 0:
                burn_in = self.preprocessor.preprocess(burn_in_states)
                online_state = self._graph_fn_stop_gradient(
                    self.policy.get_adapter_outputs(burn_in, initial_states, burn_in_resets)["internal_states"])
                target_state = self.target_policy.get_adapter_outputs(burn_in, initial_states,
                                                                      burn_in_resets)["internal_states"]
            target_q_values = self.target_policy.get_adapter_outputs(states, target_state, resets)["adapter_outputs"]
        q_values = self.policy.get_adapter_outputs(states, online_state, resets)["adapter_outputs"]
        # V(s_t) = h^-1(Q_target(s_t, argmax_a Q(s_t, a))): the reward of bootstrap steps.
        values = self.value_rescaling.inverse_rescale(self._graph_fn_double_q_values(q_values, target_q_values))
        rewards = self._graph_fn_masked_rewards(sequences["rewards"], values, sequences["mask"],
                                                sequences["bootstrap"])
        q_values, target_q_values, terminals = self._graph_fn_mask_steps(
            q_values, target_q_values, self.value_rescaling.rescale(rewards), sequences["terminals"],
            sequences["mask"], sequences["bootstrap"])
        return self.loss_function.loss(q_values, target_q_values, sequences["actions"], rewards, terminals,
                                       importance_weights)

    @rlgraph_api
    def update_from_sequences(self, sequences, initial_states, indices, importance_weights, time_percentage,
                              burn_in_states=None, burn_in_resets=None):
        loss, priorities = self._loss(sequences, initial_states, importance_weights, burn_in_states, burn_in_resets)
        step_loss, _ = self.optimizer.step(self.policy.variables(), loss, time_percentage)
        priorities = self._graph_fn_priorities(priorities)
        self.memory.update_records(indices, priorities)
        return step_loss, self._graph_fn_mean(priorities)

    @rlgraph_api
    def update_from_batch(self, sequences, initial_states, importance_weights, time_percentage, burn_in_states=None,
                          burn_in_resets=None):
        loss, priorities = self._loss(sequences, initial_states, importance_weights, burn_in_states, burn_in_resets)
        step_loss, _ = self.optimizer.step(self.policy.variables(), loss, time_percentage)
        return step_loss, self._graph_fn_priorities(priorities)

    @rlgraph_api
    def get_loss_and_gradients(self, sequences, initial_states, importance_weights, burn_in_states=None,
                               burn_in_resets=None):
        loss, priorities = self._loss(sequences, initial_states, importance_weights, burn_in_states, burn_in_resets)
        return loss, priorities, self.optimizer.calculate_gradients(self.policy.variables(), loss)

    @rlgraph_api
    def sync_target(self):
        return self.target_policy.sync(self.policy.variables())

    # --- graph functions --------------------------------------------------------------------------------
    @graph_fn
    def _graph_fn_stop_gradient(self, internal_states):
        return tuple(self.ops.stop_gradient(s) for s in internal_states)

    @graph_fn
    def _graph_fn_double_q_values(self, q_values, target_q_values):
        ops = self.ops
        return ops.stop_gradient(ops.take_along_last(target_q_values, ops.argmax(q_values, axis=-1)))

    @graph_fn
    def _graph_fn_masked_rewards(self, rewards, values, mask, bootstrap):
        ops = self.ops
        return ops.where(bootstrap, values, ops.where(mask, rewards, ops.zeros_like(rewards)))

    @graph_fn(returns=3)
    def _graph_fn_mask_steps(self, q_values, target_q_values, rescaled_rewards, terminals, mask, bootstrap):
        ops = self.ops
        learn = ops.logical_and(mask, ops.logical_not(bootstrap))
        shape = ops.shape(q_values)
        constant = ops.stop_gradient(ops.broadcast_to(ops.expand_dims(rescaled_rewards, -1), shape))
        keep = ops.broadcast_to(ops.expand_dims(learn, -1), shape)
        return (ops.where(keep, q_values, constant), ops.where(keep, target_q_values, constant),
                ops.logical_or(terminals, ops.logical_not(learn)))

    @graph_fn
    def _graph_fn_priorities(self, priorities):
        return self.ops.stop_gradient(priorities) + self.priority_epsilon

    @graph_fn
    def _graph_fn_mean(self, x):
        return self.ops.mean(x)
