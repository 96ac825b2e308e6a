"""Native vector form of Catch (gymnasium ``vector_entry_point`` of ``rlgraph/Catch-v0``)."""
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from rlgraph.environments.catch import CATCH_RULES, CatchGames, catch_observation_space, check_catch_args


class CatchVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` games of Catch (see ``rlgraph.environments.catch``) stepped as arrays, same-step auto-reset.

    Finished games restart in the same step; ``infos["final_obs"]`` holds the batch of pre-reset observations
    and ``infos["_final_obs"]`` the mask of finished games.

    Args:
        num_envs: Number of games.
        height, width, balls: As for ``CatchEnv``.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.SAME_STEP}
    #: What the constructor's arguments must be (``rlgraph.utils.validation``), besides ``num_envs``.
    ARG_RULES = CATCH_RULES

    def __init__(self, num_envs=1, height=10, width=7, balls=5):
        args = check_catch_args(height, width, balls, owner="CatchVectorEnv")
        self.num_envs = int(num_envs)
        self.height, self.width, self.balls = args["height"], args["width"], args["balls"]
        self.single_observation_space = catch_observation_space(self.height, self.width)
        self.single_action_space = gym.spaces.Discrete(3)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.games = None

    def reset(self, *, seed=None, options=None):
        """Starts new games in all rows (``seed`` seeds the generator that draws the balls)."""
        super().reset(seed=seed)
        if self.games is None or seed is not None:
            self.games = CatchGames(self.num_envs, self.height, self.width, self.balls, self.np_random)
        self.games.reset(np.arange(self.num_envs))
        return self.games.frames.copy(), {}

    def step(self, actions):
        rewards, terminations = self.games.step(actions)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos = {}
        if terminations.any():
            infos = {"final_obs": self.games.frames.copy(), "_final_obs": terminations}
            self.games.reset(np.flatnonzero(terminations))
        return self.games.frames.copy(), rewards, terminations, truncations, infos

    def get_state(self):
        """The games' state and the generator's state."""
        return None if self.games is None else self.games.get_state()

    def set_state(self, state):
        """Restores what ``get_state`` returned."""
        if state is not None:
            if self.games is None:
                self.reset()
            self.games.set_state(state)
