"""The IMPALA agent: V-trace actor-critic on unrolls collected from a vector of environments."""
import logging

import numpy as np

from rlgraph.agents.agent import Agent
from rlgraph.components.algorithms.impala_algorithm_component import IMPALAAlgorithmComponent
from rlgraph.spaces import BoolBox, Dict, FloatBox, Tuple
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError

logger = logging.getLogger(__name__)


class IMPALAAgent(Agent):
    """IMPALA (Espeholt et al. 2018) with local execution: the agent is actor and learner.

    Acting: one batched ``act`` call for all N environments per step returns actions, the behaviour
    log-likelihoods and values. ``observe`` copies each step's rows into preallocated time-major arrays
    ``[T, N, ...]`` (no per-environment Python loop); after ``unroll_length`` steps the unroll is complete,
    ``ready_to_update()`` is True and ``update()`` trains on it (``IMPALAAlgorithmComponent.update``), then
    the next unroll starts. The bootstrap state of each column is the last step's ``next_states``
    (``env.final_obs``). Every step is tagged with the policy version (``self.updates``) that produced it;
    the update reports the policy lag (updates since then) of the samples it learns from.

    Episode ends: a step with ``terminals`` or ``truncations`` ends its episode inside the unroll. For a
    truncated (not terminated) step the agent evaluates ``V(final_obs)`` with the current weights right
    away (one extra ``get_state_values`` call for just those rows, only in steps where a truncation
    happens) and the learner bootstraps that step from it (see ``IMPALAAlgorithmComponent``).

    Recurrent networks and previous action/reward inputs: the per-environment state that the worker passes
    back into ``get_actions`` as ``internal_states`` is a tuple ``(h, c)`` of the LSTM, followed by
    ``(prev_action, prev_reward)`` with ``prev_action_reward``; the worker zeroes the rows of environments
    that start a new episode. ``observe`` fills the previous reward into that tuple (``get_actions`` cannot
    know it yet); a worker that does not call ``observe`` (greedy evaluation) feeds previous rewards of 0.
    The learner starts each unroll from the LSTM state that was passed in at the unroll's first step.

    Args:
        unroll_length: Steps per unroll T.
        value_network_spec: A separate value network (None: a value head on the shared network).
        loss_spec: Keywords of ``IMPALALossFunction`` (``weight_entropy``, ``weight_baseline``, ``rho_bar``,
            ``c_bar``, ``time_reduction``, ...).
        reward_clipping: "clamp_one" or None.
        reward_scale: Multiplies the (clipped) rewards in the learner (see ``IMPALAAlgorithmComponent``).
        prev_action_reward: Feed the previous action and reward to the network (a ``MultiInputStreamNetwork``
            with the streams "state", "prev_action" and "prev_reward").
        schedule_timesteps: Env steps over which schedules (learning rate) run from start to end.
        **kwargs: See ``Agent``.
    """

    __aliases__ = ("impala",)

    #: The root component's class.
    algorithm_class = IMPALAAlgorithmComponent

    def __init__(self, state_space, action_space, unroll_length=32, value_network_spec=None, loss_spec=None,
                 reward_clipping=None, reward_scale=1.0, prev_action_reward=False, schedule_timesteps=1_000_000,
                 **kwargs):
        name = type(self).__name__
        for key, value in (("unroll_length", unroll_length), ("schedule_timesteps", schedule_timesteps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise RLGraphSpecError(f"{name}.{key}: expected a positive int, got {value!r}.")
        self.unroll_length = unroll_length
        self.value_network_spec = value_network_spec
        self.loss_spec = dict(loss_spec or {})
        self.reward_clipping = reward_clipping
        self.reward_scale = reward_scale
        self.prev_action_reward = bool(prev_action_reward)
        self.schedule_timesteps = schedule_timesteps
        # One pass over each unroll, no sample dropped (APPO changes these).
        self.num_epochs, self.num_minibatches, self.max_policy_lag = 1, 1, None
        super().__init__(state_space, action_space, **kwargs)
        if self.network_spec is None:
            raise RLGraphSpecError(f"{name}: network_spec is required (e.g. two dense layers).")
        self._rng = np.random.default_rng(self.seed)
        self._t = 0
        self._buffers = None
        self._act_states_in = None

    # --- construction -----------------------------------------------------------------------------------
    def build_root(self):
        root = self.algorithm_class(
            self.network_spec, self.action_space, self.optimizer_spec, preprocessing_spec=self.preprocessing_spec,
            value_network_spec=self.value_network_spec, loss_spec=self.loss_spec, discount=self.discount,
            reward_clipping=self.reward_clipping, reward_scale=self.reward_scale,
            prev_action_reward=self.prev_action_reward)
        self.recurrent = root.recurrent
        self.lstm_units = root.lstm_units
        state = self.state_space
        if isinstance(state, FloatBox):
            # The graph needs no bounds; unbounded float inputs pass the executor's checks without a scan.
            state = FloatBox(shape=state.shape, dtype=state.dtype)
        inputs = dict(states=state, prev_actions=self.action_space, prev_rewards=FloatBox())
        if not self.prev_action_reward:
            inputs = dict(states=state)
        # Acting: [B] for feed-forward networks, [1, B] (one time step) for recurrent ones.
        act = {k: s.with_batch_rank().with_time_rank(self.recurrent, time_major=True) for k, s in inputs.items()}
        unroll = dict(inputs, actions=self.action_space, rewards=FloatBox(), terminals=BoolBox(),
                      truncation_values=FloatBox(), behaviour_log_probs=FloatBox(), behaviour_values=FloatBox())
        spaces = dict(act, unroll=Dict(unroll, add_batch_rank=True, add_time_rank=True, time_major=True),
                      bootstrap=Dict(inputs, add_batch_rank=True, add_time_rank=self.recurrent, time_major=True),
                      time_percentage=float)
        if self.recurrent:
            lstm_state = Tuple(FloatBox(shape=(self.lstm_units,)), FloatBox(shape=(self.lstm_units,)),
                               add_batch_rank=True)
            spaces.update(internal_states=lstm_state, initial_internal_states=lstm_state)
        return root, spaces

    @property
    def time_percentage(self):
        return min(1.0, self.timesteps / self.schedule_timesteps)

    # --- acting -----------------------------------------------------------------------------------------
    def _initial_states(self, n):
        """The per-env state tuple of a new episode (None if the agent keeps none)."""
        parts = []
        if self.recurrent:
            parts += [np.zeros((n, self.lstm_units), np.float32)] * 2
        if self.prev_action_reward:
            parts += [self.action_space.zeros(n), np.zeros(n, np.float32)]
        return tuple(parts) or None

    def _act_args(self, states, internal_states):
        """Positional arguments of the act API methods (states, LSTM state, previous action, reward)."""
        if internal_states is None:
            internal_states = self._initial_states(len(states))
        args = [states[None] if self.recurrent else states]
        if self.recurrent:
            args.append(internal_states[:2])
        if self.prev_action_reward:
            prev_a, prev_r = internal_states[-2:]
            args += [prev_a[None], prev_r[None]] if self.recurrent else [prev_a, prev_r]
        return args, internal_states

    def _next_states(self, out, actions):
        parts = list(out["internal_states"]) if self.recurrent else []
        if self.prev_action_reward:
            parts += [actions, np.zeros(len(actions), np.float32)]  # The reward is filled in by observe().
        return tuple(parts)

    def get_actions(self, states, explore=True, internal_states=None, return_extras=False):
        args, internal_states = self._act_args(states, internal_states)
        if explore:
            out = self.executor.execute("act", *args)
            self._act_states_in = internal_states
        else:
            out = self.executor.execute("get_greedy_actions", *args)
        actions = out["action"][0] if self.recurrent else out["action"]
        if not return_extras:
            return actions
        extras = {}
        if explore:
            extras = dict(log_probs=out["log_likelihood"], values=out["value"])
            if self.recurrent:
                extras = {k: v[0] for k, v in extras.items()}
        if internal_states is not None:
            extras["internal_states"] = self._next_states(out, actions)
        return actions, extras

    def get_state_values(self, states, internal_states=None):
        """``V(states)`` for a batch of states (with the per-env state tuple of recurrent agents)."""
        args, _ = self._act_args(states, internal_states)
        values = self.executor.execute("get_state_values", *args)
        return values[0] if self.recurrent else values

    # --- observing ----------------------------------------------------------------------------------------
    def _allocate(self, n):
        T, space = self.unroll_length, self.state_space
        boot_lead = (1, n) if self.recurrent else (n,)
        actions = self.action_space
        b = dict(states=np.zeros((T, n) + space.shape, space.dtype),
                 actions=np.zeros((T, n) + actions.shape, actions.dtype),
                 rewards=np.zeros((T, n), np.float32), terminals=np.zeros((T, n), bool),
                 truncation_values=np.zeros((T, n), np.float32), behaviour_log_probs=np.zeros((T, n), np.float32),
                 behaviour_values=np.zeros((T, n), np.float32))
        boot = dict(states=np.zeros(boot_lead + space.shape, space.dtype))
        if self.prev_action_reward:
            b.update(prev_actions=np.zeros((T, n) + actions.shape, actions.dtype),
                     prev_rewards=np.zeros((T, n), np.float32))
            boot.update(prev_actions=np.zeros(boot_lead + actions.shape, actions.dtype),
                        prev_rewards=np.zeros(boot_lead, np.float32))
        self._buffers = dict(unroll=b, bootstrap=boot, policy_versions=np.zeros((T, n), np.int64))
        if self.recurrent:
            self._buffers["initial_internal_states"] = tuple(np.zeros((n, self.lstm_units), np.float32)
                                                             for _ in range(2))

    def observe(self, states, actions, rewards, next_states, terminals, truncations=None, **extras):
        n = len(rewards)
        if self._buffers is None or len(self._buffers["unroll"]["rewards"][0]) != n:
            self._allocate(n)
            self._t = 0
        elif self._t == self.unroll_length:
            logger.debug("%s: an unroll was complete but not used by update(); it is dropped.", self.name)
            self._t = 0
        if "log_probs" not in extras or "values" not in extras:
            raise RLGraphError(f"{self.name}.observe: the extras 'log_probs' and 'values' of the behaviour policy are "
                               f"missing; pass what get_actions(..., return_extras=True) returned, got "
                               f"{sorted(extras)}.")
        t, buf = self._t, self._buffers
        u = buf["unroll"]
        terminals = np.asarray(terminals, bool)
        u["states"][t] = states
        u["actions"][t] = actions
        u["rewards"][t] = rewards
        u["behaviour_log_probs"][t] = extras["log_probs"]
        u["behaviour_values"][t] = extras["values"]
        buf["policy_versions"][t] = self.updates
        act_states = self._act_states_in if self._act_states_in is not None else self._initial_states(n)
        if self.prev_action_reward:
            u["prev_actions"][t], u["prev_rewards"][t] = act_states[-2:]
            # The previous reward of the next step (and of V(final_obs) below); get_actions left it at 0.
            extras["internal_states"][-1][:] = rewards
        if t == 0 and self.recurrent:
            for dst, src in zip(buf["initial_internal_states"], act_states):
                dst[:] = src
        u["truncation_values"][t] = 0.0
        if truncations is None:
            u["terminals"][t] = terminals
        else:
            truncations = np.asarray(truncations, bool)
            np.logical_or(terminals, truncations, out=u["terminals"][t])
            cut = truncations & ~terminals
            if cut.any():
                u["truncation_values"][t, cut] = self._final_values(next_states, cut, extras)
        if t == self.unroll_length - 1:
            boot = buf["bootstrap"]
            boot["states"][...] = next_states
            if self.prev_action_reward:
                boot["prev_actions"][...] = actions
                boot["prev_rewards"][...] = rewards
        self._t = t + 1
        self.timesteps += n

    def _final_values(self, next_states, rows, extras):
        """``V(final_obs)`` of the truncated envs ``rows``, from the per-env state after the step."""
        internal = extras.get("internal_states")
        return self.get_state_values(next_states[rows], None if internal is None else tuple(s[rows] for s in internal))

    def ready_to_update(self):
        return self._t == self.unroll_length

    def reset(self):
        self._t = 0

    def on_load(self):
        self._t = 0

    def pop_unroll(self):
        """The complete unroll as a batch for ``update(batch)`` (copies), and starts the next one.

        Returns:
            dict with "unroll" (time-major [T, N] arrays), "bootstrap" (the states x_T, [N], or [1, N] for
            recurrent networks), "policy_versions" [T, N] and, for recurrent networks,
            "initial_internal_states" (the LSTM state before step 0).
        """
        if not self.ready_to_update():
            raise RLGraphError(f"{self.name}.pop_unroll(): the unroll holds {self._t} of {self.unroll_length} steps.")
        self._t = 0
        return _copy(self._buffers)

    # --- learning ---------------------------------------------------------------------------------------
    def update(self, batch=None):
        """Learns from the complete unroll (or from ``batch``, as ``pop_unroll`` returns it).

        Returns:
            dict with the means over the optimizer steps taken of "loss", "grad_norm", "entropy" and
            "mean_value", and "policy_lag_mean", "policy_lag_max" (updates between acting and learning, over
            the samples used), "dropped_samples" (samples older than ``max_policy_lag``) and "num_updates".
        """
        if batch is None:
            if not self.ready_to_update():
                raise RLGraphError(f"{self.name}.update(): the unroll holds {self._t} of {self.unroll_length} "
                                   f"steps; call update() when ready_to_update() is True or pass a batch.")
            batch = self._buffers
            self._t = 0
        return self._learn(batch)

    def _learn(self, batch):
        unroll, bootstrap = batch["unroll"], batch["bootstrap"]
        initial = batch.get("initial_internal_states")
        versions = batch.get("policy_versions")
        n = unroll["rewards"].shape[1]
        results, lags, dropped = [], [], 0
        for _ in range(self.num_epochs):
            order = self._rng.permutation(n) if self.num_minibatches > 1 else None
            for columns in (np.array_split(order, self.num_minibatches) if order is not None else [None]):
                if versions is not None:
                    lag = self.updates - (versions if columns is None else versions[:, columns])
                    if self.max_policy_lag is not None:
                        fresh = lag.max(axis=0) <= self.max_policy_lag
                        if not fresh.all():
                            dropped += int(lag[:, ~fresh].size)
                            if not fresh.any():
                                continue
                            columns = np.flatnonzero(fresh) if columns is None else columns[fresh]
                            lag = lag[:, fresh]
                    lags.append(lag)
                results.append(self._update_step(unroll, bootstrap, initial, columns))
        out = {k: float(np.mean([r[k] for r in results])) for k in (results[0] if results else ())}
        if lags:
            out["policy_lag_mean"] = float(np.mean([lag.mean() for lag in lags]))
            out["policy_lag_max"] = int(max(lag.max() for lag in lags))
        out["dropped_samples"] = dropped
        out["num_updates"] = len(results)
        return out

    def evaluate_unroll(self, batch):
        """The learner's view of a batch (as ``pop_unroll`` returns it) under the current weights.

        Returns:
            dict with "log_likelihood", "entropy", "value" (each [T, B]) and "bootstrap_value" [B]; right after
            acting they equal the behaviour policy's log-likelihoods and values.
        """
        args = [batch["unroll"], batch["bootstrap"]] + ([batch["initial_internal_states"]] if self.recurrent else [])
        return self.executor.execute("evaluate_unroll", *args)

    def _update_step(self, unroll, bootstrap, initial, columns):
        """One optimizer step on the columns ``columns`` (None: all) of the unroll."""
        if columns is not None:
            unroll = {k: v[:, columns] for k, v in unroll.items()}
            bootstrap = {k: v[:, columns] if self.recurrent else v[columns] for k, v in bootstrap.items()}
            initial = None if initial is None else tuple(s[columns] for s in initial)
        args = [unroll, bootstrap, self.time_percentage] + ([initial] if self.recurrent else [])
        result = self.executor.execute("update", *args)
        self.updates += 1
        return result


def _copy(tree):
    if isinstance(tree, dict):
        return {k: _copy(v) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_copy(v) for v in tree)
    return np.array(tree, copy=True)
