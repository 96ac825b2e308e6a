"""The acting role of IMPALA and APPO."""
import numpy as np

from rlgraph.agents.actor import Actor, _zero_rows
from rlgraph.utils.errors import RLGraphAPIError


class IMPALAActor(Actor):
    """Samples actions and returns what V-trace needs of the behaviour policy.

    Per environment the actor's internal state is a tuple: the LSTM's ``(h, c)`` for recurrent networks,
    followed by ``(prev_action, prev_reward)`` with ``prev_action_reward`` (None when there is neither).
    ``get_actions`` returns extras "log_probs", "values", "weights_version", "step_internal_states" (the
    state acted from) and "internal_states" (the state after the step, with the previous reward still 0:
    ``next_internal_states`` fills this step's rewards in and zeroes the rows of ended episodes).

    ``make_step`` gives ``UnrollBuilder`` the step's rows; for an episode cut by a time limit (truncated, not
    terminated) it evaluates ``V(final_obs)`` with the actor's weights for just those rows ("truncation_values",
    from which the learner bootstraps that step).

    Args:
        executor, name: See ``Actor``.
        action_space: The action space (the previous action of a new episode is its zeros).
        recurrent: Whether the network has an LSTM (acting then feeds ``[1, B]``: one time step).
        lstm_units: The LSTM's units (recurrent networks).
        prev_action_reward: Whether the network takes the previous action and reward.
    """

    extras_keys = ("weights_version", "log_probs", "values", "step_internal_states", "internal_states")

    def __init__(self, executor, name="IMPALAActor", action_space=None, recurrent=False, lstm_units=None,
                 prev_action_reward=False):
        super().__init__(executor, name)
        self.action_space = action_space
        self.recurrent, self.lstm_units = bool(recurrent), lstm_units
        self.prev_action_reward = bool(prev_action_reward)

    @classmethod
    def settings_of(cls, agent):
        return dict(super().settings_of(agent), action_space=agent.action_space, recurrent=agent.recurrent,
                    lstm_units=agent.lstm_units, prev_action_reward=agent.prev_action_reward)

    def initial_internal_states(self, num_envs):
        parts = []
        if self.recurrent:
            parts += [np.zeros((num_envs, self.lstm_units), np.float32) for _ in range(2)]
        if self.prev_action_reward:
            parts += [self.action_space.zeros(num_envs), np.zeros(num_envs, np.float32)]
        return tuple(parts) or None

    def _act_args(self, states, internal_states):
        """Positional arguments of the act API methods (states, LSTM state, previous action, reward)."""
        recurrent = self.recurrent
        if internal_states is None:
            internal_states = self.initial_internal_states(len(states))
        args = [states[None] if recurrent else states]
        if recurrent:
            args.append(tuple(internal_states[:2]))
        if self.prev_action_reward:
            prev_a, prev_r = internal_states[-2:]
            args += [prev_a[None], prev_r[None]] if recurrent else [prev_a, prev_r]
        return args, internal_states

    def get_actions(self, states, explore=True, internal_states=None, epsilons=None, timesteps=None):
        """See ``Actor.get_actions``; IMPALA samples its actions (no epsilons) and has no exploration schedule
        (``timesteps`` is not used)."""
        if epsilons is not None:
            raise RLGraphAPIError(f"{self.name}.get_actions(): IMPALA and APPO sample their actions; they take no "
                                  f"exploration epsilons.")
        recurrent = self.recurrent
        args, internal_states = self._act_args(states, internal_states)
        out = self.executor.execute("act" if explore else "get_greedy_actions", *args)
        actions = out["action"][0] if recurrent else out["action"]
        extras = dict(weights_version=self._versions(actions))
        if explore:
            extras.update(log_probs=out["log_likelihood"], values=out["value"])
            if recurrent:
                extras.update(log_probs=extras["log_probs"][0], values=extras["values"][0])
        if internal_states is not None:
            parts = list(out["internal_states"]) if recurrent else []
            if self.prev_action_reward:
                parts += [actions, np.zeros(len(actions), np.float32)]
            extras.update(step_internal_states=tuple(internal_states), internal_states=tuple(parts))
        return actions, extras

    def next_internal_states(self, extras, rewards, dones):
        states = extras.get("internal_states")
        if states is None:
            return None
        states = list(states)
        if self.prev_action_reward:
            states[-1] = np.asarray(rewards, np.float32)
        dones = np.asarray(dones, bool)
        return tuple(_zero_rows(s, dones) for s in states)

    def get_state_values(self, states, internal_states=None):
        """``V(states)`` for a batch of states (with the internal states of recurrent agents)."""
        args, _ = self._act_args(states, internal_states)
        values = self.executor.execute("get_state_values", *args)
        return values[0] if self.recurrent else values

    def make_step(self, states, actions, rewards, next_states, terminals, truncations, extras):
        self.require_extras(extras, ("log_probs", "values", "weights_version"))
        n = len(terminals)
        self.timesteps += n
        rewards = np.asarray(rewards, np.float32)
        step = dict(states=states, actions=actions, rewards=rewards, terminals=terminals | truncations,
                    truncation_values=np.zeros(n, np.float32), behaviour_log_probs=extras["log_probs"],
                    behaviour_values=extras["values"], weights_version=extras["weights_version"],
                    next_states=next_states)
        cut = truncations & ~terminals
        if cut.any():
            after = self.next_internal_states(extras, rewards, np.zeros(n, bool))
            step["truncation_values"][cut] = self.get_state_values(
                next_states[cut], None if after is None else tuple(s[cut] for s in after))
        acted_from = extras.get("step_internal_states")
        if self.prev_action_reward:
            step.update(prev_actions=acted_from[-2], prev_rewards=acted_from[-1], bootstrap_prev_actions=actions,
                        bootstrap_prev_rewards=rewards)
        if self.recurrent:
            step["initial_internal_states"] = tuple(acted_from[:2])
        return step
