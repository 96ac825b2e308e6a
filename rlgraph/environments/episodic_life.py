"""Episodic life for vector Atari backends: a lost life is terminal, but the game goes on."""
import numpy as np
from gymnasium.vector import VectorWrapper


class EpisodicLifeVectorWrapper(VectorWrapper):
    """Sets ``terminations[i]`` when env ``i`` loses a life without its game ending.

    Needs a same-step auto-resetting backend that reports ``infos["lives"]`` (ale-py does, per env). Game
    overs still auto-reset; ``infos["_final_obs"]`` marks exactly those envs, so episode statistics and final
    observations stay per game, while the extra terminals stop bootstrapping across lost lives.
    """

    def __init__(self, env):
        super().__init__(env)
        self._lives = None
        self._actions = None

    def reset(self, *, seed=None, options=None):
        """Resets the backend and remembers the lives."""
        obs, infos = self.env.reset(seed=seed, options=options)
        self._lives = np.asarray(infos["lives"]).copy()
        return obs, infos

    def step(self, actions):
        """Steps the backend; adds life-loss terminals (see the class docstring)."""
        return self._add_life_loss(*self.env.step(actions))

    def send(self, actions):
        """Starts a step in the background where the backend can (ale-py's ``send``/gymnasium's ``step_async``)."""
        send = getattr(self.env, "send", None) or getattr(self.env, "step_async", None)
        if send is None:
            self._actions = actions
        else:
            send(actions)

    def recv(self):
        """Finishes the step started by ``send``; returns what ``step`` returns."""
        if self._actions is not None:
            actions, self._actions = self._actions, None
            return self.step(actions)
        recv = getattr(self.env, "recv", None) or getattr(self.env, "step_wait")
        return self._add_life_loss(*recv())

    def _add_life_loss(self, obs, rewards, terminations, truncations, infos):
        lives = np.asarray(infos["lives"])
        reset = terminations | truncations
        life_lost = (lives < self._lives) & ~reset
        self._lives = lives.copy()
        infos = dict(infos, _final_obs=reset, life_lost=life_lost)
        return obs, rewards, terminations | life_lost, truncations, infos
