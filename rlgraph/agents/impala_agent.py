"""The IMPALA agent: V-trace actor-critic on unrolls collected from environments."""
from rlgraph.agents.agent import Agent
from rlgraph.agents.impala_actor import IMPALAActor
from rlgraph.agents.impala_learner import IMPALALearner
from rlgraph.components.algorithms.impala_algorithm_component import IMPALAAlgorithmComponent
from rlgraph.spaces import BoolBox, Dict, FloatBox, Tuple
from rlgraph.trajectories import UnrollBuilder
from rlgraph.utils.validation import Bool, Int, Number, check_args, spec_error


class IMPALAAgent(Agent):
    """IMPALA (Espeholt et al. 2018): V-trace actor-critic.

    Roles: ``IMPALAActor`` (one batched ``act`` call per step for all environments, returning actions, the
    behaviour log-likelihoods and values), ``UnrollBuilder`` (``unroll_length`` steps per environment id,
    time-major, with the bootstrap observation and the LSTM state before the unroll; episode ends inside an
    unroll are flags, not cuts) and ``IMPALALearner`` (learns from queued unrolls; policy lag in learner
    versions). Locally, all N environments complete their unrolls at the same step, so there is one update
    per ``unroll_length`` vector steps, on an [T, N] batch.

    Episode ends: a step with ``terminals`` or ``truncations`` ends its episode inside the unroll. For a
    truncated (not terminated) step the actor evaluates ``V(final_obs)`` right away (one extra
    ``get_state_values`` call for just those rows, only in steps where a truncation happens) and the learner
    bootstraps that step from it (see ``IMPALAAlgorithmComponent``).

    Recurrent networks and previous action/reward inputs: see ``IMPALAActor`` for the per-environment
    internal state; the learner starts each unroll from the LSTM state the actor had at its first step.

    Args:
        unroll_length: Steps per unroll T.
        value_network_spec: A separate value network (None: a value head on the shared network).
        policy_spec: Keywords of the ``ActorCriticPolicy``: ``action_adapter_spec`` (e.g. ``{"kernel_initializer":
            {"type": "orthogonal", "gain": 0.01}}``, PPO's policy head) and ``value_kernel_initializer``.
        loss_spec: Keywords of ``IMPALALossFunction`` (``weight_entropy``, ``weight_baseline``, ``rho_bar``,
            ``c_bar``, ``time_reduction``, ...).
        reward_clipping: "clamp_one" or None.
        reward_scale: Multiplies the (clipped) rewards in the learner (see ``IMPALAAlgorithmComponent``).
        prev_action_reward: Feed the previous action and reward to the network (a ``MultiInputStreamNetwork``
            with the streams "state", "prev_action" and "prev_reward").
        schedule_timesteps: Env steps over which schedules (learning rate) run from start to end.
        replay_proportion: Experience replay (Schmitt et al. 2019; RLlib's IMPALA ``replay_proportion``): batches
            replayed per new batch, drawn uniformly from the last ``replay_slots`` batches and learned from as new
            ones are (V-trace corrects for their older behaviour policy; APPO's ``max_policy_lag`` applies to new
            batches only); 0: no replay.
        replay_slots: The batches (the newest) the replay keeps.
        num_minibatches: Optimizer steps per batch (new or replayed), each on an equal share of its environment
            columns (whole trajectories, shuffled), V-trace computed per minibatch: more steps per sample at about
            the same compute. 1: one step on the whole batch.
        **kwargs: See ``Agent``.
    """

    __aliases__ = ("impala",)

    #: The root component's class.
    algorithm_class = IMPALAAlgorithmComponent
    actor_class = IMPALAActor
    learner_class = IMPALALearner
    actor_api_methods = ("act", "get_greedy_actions", "get_state_values")
    #: One pass over each unroll, no sample dropped (APPO's arguments change these).
    num_epochs, max_policy_lag, minibatch_unit = 1, None, "trajectories"

    #: What the checked constructor arguments accept (``loss_spec``, ``reward_clipping`` and ``reward_scale`` as the
    #: algorithm component takes them).
    ARG_RULES = dict(unroll_length=Int(min=1), schedule_timesteps=Int(min=1), prev_action_reward=Bool(),
                     replay_proportion=Number(min=0.0), replay_slots=Int(min=1), num_minibatches=Int(min=1),
                     **{k: IMPALAAlgorithmComponent.ARG_RULES[k] for k in ("loss_spec", "reward_clipping",
                                                                           "reward_scale", "policy_spec")})

    def __init__(self, state_space, action_space, unroll_length=32, value_network_spec=None, loss_spec=None,
                 reward_clipping=None, reward_scale=1.0, prev_action_reward=False, schedule_timesteps=1_000_000,
                 policy_spec=None, replay_proportion=0.0, replay_slots=100, num_minibatches=1, **kwargs):
        name = type(self).__name__
        args = check_args(name, IMPALAAgent.ARG_RULES, dict(
            unroll_length=unroll_length, schedule_timesteps=schedule_timesteps, prev_action_reward=prev_action_reward,
            loss_spec=loss_spec, reward_clipping=reward_clipping, reward_scale=reward_scale, policy_spec=policy_spec,
            replay_proportion=replay_proportion, replay_slots=replay_slots, num_minibatches=num_minibatches))
        self.num_minibatches = args["num_minibatches"]
        self.replay_proportion, self.replay_slots = float(args["replay_proportion"]), args["replay_slots"]
        self.policy_spec = dict(args["policy_spec"] or {})
        self.unroll_length, self.schedule_timesteps = args["unroll_length"], args["schedule_timesteps"]
        self.value_network_spec = value_network_spec
        self.loss_spec = dict(loss_spec or {})
        self.reward_clipping = args["reward_clipping"]
        self.reward_scale = args["reward_scale"]
        self.prev_action_reward = args["prev_action_reward"]
        if kwargs.get("network_spec") is None:
            raise spec_error(name, "network_spec", "missing: give the network's layers, e.g. [{\"type\": \"dense\", "
                             "\"units\": 64, \"activation\": \"relu\"}].")
        super().__init__(state_space, action_space, **kwargs)

    # --- construction -----------------------------------------------------------------------------------
    def build_root(self):
        root = self.algorithm_class(
            self.network_spec, self.action_space, self.optimizer_spec, preprocessing_spec=self.preprocessing_spec,
            value_network_spec=self.value_network_spec, loss_spec=self.loss_spec, discount=self.discount,
            reward_clipping=self.reward_clipping, reward_scale=self.reward_scale,
            prev_action_reward=self.prev_action_reward, policy_spec=self.policy_spec)
        self.recurrent = root.recurrent
        self.lstm_units = root.lstm_units
        state = self.state_space
        if isinstance(state, FloatBox):
            # The graph needs no bounds; unbounded float inputs pass the executor's checks without a scan.
            state = FloatBox(shape=state.shape, dtype=state.dtype)
        # Continuous actions are the policy's samples, which may leave the action space's bounds: the
        # environment gets them clipped (``VectorEnv``), the learner the samples themselves, so that their
        # behaviour log-probabilities stay right. So the learner's action inputs carry no bounds.
        actions = self.action_space
        if isinstance(actions, FloatBox):
            actions = FloatBox(shape=actions.shape, dtype=actions.dtype)
        inputs = dict(states=state, prev_actions=actions, prev_rewards=FloatBox())
        if not self.prev_action_reward:
            inputs = dict(states=state)
        # Acting: [B] for feed-forward networks, [1, B] (one time step) for recurrent ones.
        act = {k: s.with_batch_rank().with_time_rank(self.recurrent, time_major=True) for k, s in inputs.items()}
        unroll = dict(inputs, actions=actions, rewards=FloatBox(), terminals=BoolBox(),
                      truncation_values=FloatBox(), behaviour_log_probs=FloatBox(), behaviour_values=FloatBox())
        spaces = dict(act, unroll=Dict(unroll, add_batch_rank=True, add_time_rank=True, time_major=True),
                      bootstrap=Dict(inputs, add_batch_rank=True, add_time_rank=self.recurrent, time_major=True),
                      time_percentage=float)
        if self.recurrent:
            lstm_state = Tuple(FloatBox(shape=(self.lstm_units,)), FloatBox(shape=(self.lstm_units,)),
                               add_batch_rank=True)
            spaces.update(internal_states=lstm_state, initial_internal_states=lstm_state)
        return root, spaces

    def make_trajectory_builder(self):
        first = ("initial_internal_states",) if self.recurrent else ()
        last = ("next_states",) + (("bootstrap_prev_actions", "bootstrap_prev_rewards") if self.prev_action_reward
                                   else ())
        return UnrollBuilder(self.unroll_length, first_keys=first, last_keys=last)

    # --- conveniences of the roles ------------------------------------------------------------------------
    def get_state_values(self, states, internal_states=None):
        """``V(states)`` for a batch of states (with the internal states of recurrent agents)."""
        return self._role("actor", "get_state_values").get_state_values(states, internal_states)

    def pop_unroll(self):
        """The queued unrolls as one batch for ``update(batch)`` (see ``IMPALALearner.pop_batch``)."""
        return self._role("learner", "pop_unroll").pop_batch()

    def evaluate_unroll(self, batch):
        """The learner's log-likelihoods, entropies and values of a batch (see ``IMPALALearner``)."""
        return self._role("learner", "evaluate_unroll").evaluate_unroll(batch)
