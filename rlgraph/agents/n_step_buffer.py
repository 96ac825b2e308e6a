"""Vectorized n-step transition assembly for a batch of environments."""
import numpy as np
import optree


class NStepBuffer:
    """Turns per-step transitions of N environments into n-step transitions, with numpy over all envs.

    Each ``push`` of one step ``(s, a, r, s', terminal, done)`` for all N envs returns the n-step
    transitions whose windows are complete: for the step that entered n steps ago,
    ``R = sum_k discount^k r_k`` up to and including the first step that ended the episode (``done``:
    terminated or truncated), ``s'`` the next state of the last step in the window, and ``terminal`` set if
    that step was terminal (a truncated window keeps ``terminal`` False and is bootstrapped as if it had
    spanned n steps). With n = 1 transitions pass straight through.

    Args:
        n_step: The number of steps n.
        discount: The discount factor.
    """

    def __init__(self, n_step, discount):
        self.n = int(n_step)
        self.discount = float(discount)
        self.window = []

    def reset(self):
        self.window = []

    def push(self, states, actions, rewards, next_states, terminals, dones):
        """Adds one step for all envs; returns a dict of n-step transitions (or None while filling up)."""
        step = (states, actions, np.asarray(rewards, np.float32), next_states, np.asarray(terminals, bool),
                np.asarray(dones, bool))
        if self.n == 1:
            return self._record(step[0], step[1], step[2], step[3], step[4])
        # The window outlives this step: keep copies, not the caller's (possibly reused) arrays.
        step = optree.tree_map(np.array, step)
        self.window.append(step)
        if len(self.window) < self.n:
            return None
        states0, actions0 = self.window[0][0], self.window[0][1]
        n_envs = len(step[2])
        ret = np.zeros(n_envs, np.float32)
        alive = np.ones(n_envs, bool)
        last = np.full(n_envs, self.n - 1)
        terminal = np.zeros(n_envs, bool)
        for k, (_, _, r, _, term, done) in enumerate(self.window):
            ret += np.where(alive, (self.discount ** k) * r, 0.0).astype(np.float32)
            ended = alive & done
            last[ended] = k
            terminal |= ended & term
            alive &= ~done
        next_states = optree.tree_map(lambda *xs: np.stack(xs)[last, np.arange(n_envs)],
                                      *[w[3] for w in self.window])
        self.window.pop(0)
        return self._record(states0, actions0, ret, next_states, terminal)

    @staticmethod
    def _record(states, actions, rewards, next_states, terminals):
        return dict(states=states, actions=actions, rewards=rewards, next_states=next_states, terminals=terminals)
