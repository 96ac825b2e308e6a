"""The root component of IMPALA: a V-trace actor-critic learning from time-major unrolls."""
from rlgraph.components.component import Component
from rlgraph.components.loss_functions.impala_loss_function import IMPALALossFunction
from rlgraph.components.optimizers.optimizer import Optimizer
from rlgraph.components.policies.actor_critic_policy import ActorCriticPolicy
from rlgraph.components.preprocessing.clip import Clip
from rlgraph.components.preprocessing.preprocessor_stack import PreprocessorStack
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.validation import AnyOf, Mapping, Number, OneOf, Optional, Str, check_args, spec_error

#: What ``policy_spec`` may set on the ``ActorCriticPolicy``: its action adapters' keywords and the value head's
#: initializer (a name, ``{"type": name, **keywords}`` or a number: ``rlgraph.utils.initializers``).
POLICY_KEYS = dict(action_adapter_spec=Mapping(), value_kernel_initializer=AnyOf(
    Str(), Mapping(), Number(), what="an initializer: a name, a dict with 'type', or a number"))

#: Keys of the network inputs when previous actions and rewards are fed to the network
#: (``MultiInputStreamNetwork.input_network_specs`` must name these three streams).
NN_INPUT_KEYS = ("state", "prev_action", "prev_reward")


class IMPALAAlgorithmComponent(Component):
    """IMPALA's learner and actor graph (Espeholt et al. 2018): an actor-critic policy trained with V-trace.

    Acting samples actions from the policy and returns what the learner needs of the behaviour policy (the
    joint log-likelihood ``log mu(a|x)`` and ``V(x)``). Learning takes one time-major unroll ``[T, B]`` of
    the behaviour policy and its bootstrap states ``x_T`` [B], recomputes ``log pi``, the entropy and ``V``
    in one network pass and takes one optimizer step on ``IMPALALossFunction``.

    Episode ends inside the unroll: ``terminals[t]`` says the episode ended with step ``t`` (terminated or
    truncated), which cuts the V-trace recursion. A truncated step bootstraps from the value of its final
    observation: the actor passes ``truncation_values[t] = V(final_obs_t)`` (0 elsewhere), and the learner
    uses the reward ``r_t + discount * truncation_values[t]`` for that step (exactly V-trace's target for an
    episode cut there). Reward clipping and scaling apply to ``r_t`` before that.

    Recurrent networks (an LSTM in ``network_spec``): acting takes and returns the LSTM state per
    environment, with ``states`` carrying a time rank of length 1 ([1, B]); learning starts the unroll from
    ``initial_internal_states`` (the state before step 0), zeroes the state after each episode end
    (``resets[t] = terminals[t - 1]``), and evaluates ``x_T`` from the state after the unroll. With
    ``prev_action_reward`` the network (a ``MultiInputStreamNetwork`` with streams "state", "prev_action"
    and "prev_reward") also sees the previous action and reward (zero at an episode's start).

    API:
        act(states, internal_states=None, prev_actions=None, prev_rewards=None): dict with "action",
            "log_likelihood" and "value" (and "internal_states", the state after the step).
        get_greedy_actions(states, internal_states=None, prev_actions=None, prev_rewards=None): dict with
            "action" (the distributions' modes) (and "internal_states").
        get_state_values(states, internal_states=None, prev_actions=None, prev_rewards=None): ``V(states)``.
        update(unroll, bootstrap, time_percentage, initial_internal_states=None): one optimizer step on
            ``unroll``, a dict of time-major [T, B] values: "states", "actions", "rewards", "terminals"
            (episode ended with this step), "truncation_values", "behaviour_log_probs" (and
            "behaviour_values", "prev_actions", "prev_rewards" where used); ``bootstrap``: a dict with the
            "states" x_T ([B], or [1, B] for recurrent networks) (and "prev_actions", "prev_rewards").
            Returns a dict with "loss" (before the step), "grad_norm" (before clipping), "entropy" and
            "mean_value" (and APPO's "approx_kl" and "clip_fraction" of its ratio to the behaviour policy).
        evaluate_unroll(unroll, bootstrap, initial_internal_states=None): what the learner computes for an
            unroll, without a step: dict with "log_likelihood", "entropy", "value" (each [T, B]) and
            "bootstrap_value" ([B]).

    Args:
        network_spec: The policy network (see ``Policy``).
        action_space: The action space.
        optimizer_spec: The optimizer spec.
        preprocessing_spec: Preprocessors applied to states inside the graph (list of specs).
        value_network_spec: A separate value network (see ``ActorCriticPolicy``); None: shared trunk.
        loss_spec: Keywords of the loss function (weights, V-trace thresholds, ``time_reduction``, ...);
            not ``discount`` or ``reward_clipping``, which are this component's (rewards are clipped, scaled and
            bootstrapped at truncations before the loss sees them).
        discount: The discount factor.
        reward_clipping: "clamp_one" (clip rewards to [-1, 1]) or None.
        reward_scale: Multiplies the (clipped) rewards: the values then learn returns of a smaller scale, which
            with Adam's bounded steps takes fewer updates (0.1 on CartPole, whose returns reach ~100).
        prev_action_reward: Feed the previous action and reward to the network.
    """

    default_scope = "impala"
    #: The loss function class (APPO replaces it).
    loss_class = IMPALALossFunction
    #: Keywords of the loss function that this component sets (``loss_spec`` must leave them out).
    loss_keys_set = ("discount", "reward_clipping", "time_major")
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(loss_spec=Optional(Mapping()), discount=Number(min=0.0, max=1.0),
                     reward_clipping=OneOf("clamp_one", None), reward_scale=Number(gt=0.0),
                     policy_spec=Optional(Mapping(POLICY_KEYS)))

    def __init__(self, network_spec, action_space, optimizer_spec, preprocessing_spec=None, value_network_spec=None,
                 loss_spec=None, discount=0.99, reward_clipping=None, reward_scale=1.0, prev_action_reward=False,
                 policy_spec=None, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        name = type(self).__name__
        args = check_args(name, IMPALAAlgorithmComponent.ARG_RULES, dict(
            loss_spec=loss_spec, discount=discount, reward_clipping=reward_clipping, reward_scale=reward_scale,
            policy_spec=policy_spec))
        self.preprocessor = PreprocessorStack(preprocessing_spec=list(preprocessing_spec or []),
                                              scope="preprocessor")
        self.policy = ActorCriticPolicy(network_spec, action_space=action_space,
                                        value_network_spec=value_network_spec, scope="policy",
                                        **dict(args["policy_spec"] or {}))
        self.reward_clipping = None if reward_clipping is None else Clip(-1.0, 1.0, scope="reward-clipping")
        loss_spec = dict(loss_spec or {})
        for key in self.loss_keys_set:
            if key in loss_spec:
                raise spec_error(name, f"loss_spec.{key}", "is set by the agent (its 'discount' and "
                                 "'reward_clipping'), not by loss_spec.")
        self.loss_function = self.loss_class.from_spec(loss_spec, _path="loss_spec", discount=discount,
                                                       reward_clipping=None, time_major=True)
        self.optimizer = Optimizer.from_spec(optimizer_spec, _path="optimizer_spec")
        self.discount = args["discount"]
        self.reward_scale = args["reward_scale"]
        self.prev_action_reward = bool(prev_action_reward)
        self.recurrent = self.policy.is_recurrent
        self.add_components(*[c for c in (self.preprocessor, self.policy, self.reward_clipping, self.loss_function,
                                          self.optimizer) if c is not None])

    @property
    def lstm_units(self):
        """The LSTM's state size (None for feed-forward networks)."""
        return self.policy.network.lstm.units if self.recurrent else None

    # --- wiring helpers -------------------------------------------------------------------------------------
    def _nn_inputs(self, states, prev_actions, prev_rewards):
        states = self.preprocessor.preprocess(states)
        if not self.prev_action_reward:
            return states
        return dict(zip(NN_INPUT_KEYS, (states, prev_actions, prev_rewards)))

    def _select(self, result, keys):
        return {k: result[k] for k in keys + (("internal_states",) if self.recurrent else ())}

    def _loss(self, unroll, evaluated, bootstrap_values, rewards):
        return self.loss_function.loss(evaluated["log_likelihood"], unroll["behaviour_log_probs"],
                                       evaluated["entropy"], evaluated["value"], bootstrap_values, rewards,
                                       unroll["terminals"])

    #: The keys of ``_graph_fn_stats``'s dict.
    stats_keys = ("loss", "grad_norm", "entropy", "mean_value")

    def _update_stats(self, step_loss, grad_norm, evaluated, reference_log_probs):
        """An update's results: ``_graph_fn_stats``'s and ``_ratio_stats``'s."""
        stats = self._graph_fn_stats(step_loss, grad_norm, evaluated["entropy"], evaluated["value"])
        return dict({key: stats[key] for key in self.stats_keys},
                    **self._ratio_stats(evaluated["log_likelihood"], reference_log_probs))

    def _ratio_stats(self, log_probs, reference_log_probs):
        """Statistics of the policy's ratio to the reference of an update (none for IMPALA)."""
        return {}

    # --- acting ---------------------------------------------------------------------------------------------
    @rlgraph_api
    def act(self, states, internal_states=None, prev_actions=None, prev_rewards=None):
        out = self.policy.get_action_and_value(self._nn_inputs(states, prev_actions, prev_rewards), internal_states)
        return self._select(out, ("action", "log_likelihood", "value"))

    @rlgraph_api
    def get_greedy_actions(self, states, internal_states=None, prev_actions=None, prev_rewards=None):
        out = self.policy.get_action_and_value(self._nn_inputs(states, prev_actions, prev_rewards), internal_states,
                                               True)
        return self._select(out, ("action",))

    @rlgraph_api
    def get_state_values(self, states, internal_states=None, prev_actions=None, prev_rewards=None):
        return self.policy.get_state_value(self._nn_inputs(states, prev_actions, prev_rewards),
                                           internal_states)["value"]

    # --- learning -------------------------------------------------------------------------------------------
    def _evaluate_unroll(self, unroll, bootstrap, initial_internal_states):
        """Learner-side log-likelihoods, entropies and values of the unroll, and ``V(x_T)`` [B]."""
        prev = self.prev_action_reward
        nn_inputs = self._nn_inputs(unroll["states"], unroll["prev_actions"] if prev else None,
                                    unroll["prev_rewards"] if prev else None)
        boot_inputs = self._nn_inputs(bootstrap["states"], bootstrap["prev_actions"] if prev else None,
                                      bootstrap["prev_rewards"] if prev else None)
        if not self.recurrent:
            return (self.policy.evaluate_actions(nn_inputs, unroll["actions"]),
                    self.policy.get_state_value(boot_inputs)["value"])
        evaluated = self.policy.evaluate_actions(nn_inputs, unroll["actions"], initial_internal_states,
                                                 self._graph_fn_resets(unroll["terminals"]))
        boot = self.policy.get_state_value(boot_inputs, evaluated["internal_states"])
        return evaluated, self._graph_fn_last_step(boot["value"])

    @rlgraph_api
    def evaluate_unroll(self, unroll, bootstrap, initial_internal_states=None):
        evaluated, bootstrap_values = self._evaluate_unroll(unroll, bootstrap, initial_internal_states)
        return dict(log_likelihood=evaluated["log_likelihood"], entropy=evaluated["entropy"],
                    value=evaluated["value"], bootstrap_value=bootstrap_values)

    @rlgraph_api
    def update(self, unroll, bootstrap, time_percentage, initial_internal_states=None):
        evaluated, bootstrap_values = self._evaluate_unroll(unroll, bootstrap, initial_internal_states)
        rewards = unroll["rewards"]
        if self.reward_clipping is not None:
            rewards = self.reward_clipping.preprocess(rewards)
        rewards = self._graph_fn_bootstrap_truncations(rewards, unroll["truncation_values"])
        loss = self._loss(unroll, evaluated, bootstrap_values, rewards)
        step_loss, grad_norm = self.optimizer.step(self.policy.variables(), loss, time_percentage)
        return self._update_stats(step_loss, grad_norm, evaluated, unroll["behaviour_log_probs"])

    # --- graph functions --------------------------------------------------------------------------------
    @graph_fn
    def _graph_fn_bootstrap_truncations(self, rewards, truncation_values):
        return self.reward_scale * rewards + self.discount * truncation_values

    @graph_fn
    def _graph_fn_last_step(self, values):
        return values[-1]

    @graph_fn
    def _graph_fn_resets(self, terminals):
        return self.ops.concat([self.ops.zeros_like(terminals[:1]), terminals[:-1]], axis=0)

    @graph_fn
    def _graph_fn_stats(self, loss, grad_norm, entropies, values):
        ops = self.ops
        return dict(loss=loss, grad_norm=grad_norm, entropy=ops.mean(ops.stop_gradient(entropies)),
                    mean_value=ops.mean(ops.stop_gradient(values)))
