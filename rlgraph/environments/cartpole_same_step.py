"""Same-step auto-reset for gymnasium's native vector CartPole (which only knows next-step auto-reset)."""
import numpy as np
from gymnasium.vector import AutoresetMode, VectorWrapper

# Attributes of gymnasium's CartPoleVectorEnv that the adapter resets in place.
REQUIRED_ATTRIBUTES = ("state", "steps", "prev_done", "low", "high", "np_random")

_NO_IDS = np.zeros(0, dtype=np.int64)


class CartPoleSameStep(VectorWrapper):
    """Wraps ``gymnasium.envs.classic_control.cartpole.CartPoleVectorEnv`` to reset finished envs at once.

    After the wrapped step, finished envs get a fresh start state drawn exactly as the native reset draws
    it (uniform in ``[low, high]`` from the env's generator), so the returned ``obs`` holds reset
    observations for them. ``infos["final_obs_ids"]`` lists the finished envs (always present, maybe empty),
    ``infos["final_obs"]`` holds just their pre-reset observations (in that order) and ``infos["_final_obs"]``
    their mask. The native next-step reset never fires.
    """

    @staticmethod
    def supports(env):
        """Whether ``env`` (unwrapped) has the attributes this adapter resets."""
        return all(hasattr(env, name) for name in REQUIRED_ATTRIBUTES)

    def __init__(self, env):
        super().__init__(env)
        self.metadata = dict(env.metadata, autoreset_mode=AutoresetMode.SAME_STEP)

    def step(self, actions):
        """Steps all envs; finished ones are reset in the same call (see the class docstring)."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        done = terminations | truncations
        ids = np.flatnonzero(done) if done.any() else _NO_IDS
        infos = dict(infos, final_obs_ids=ids)
        if ids.size:
            env = self.env.unwrapped
            infos["final_obs"] = obs[ids]
            infos["_final_obs"] = done
            state = env.np_random.uniform(low=env.low, high=env.high, size=(4, ids.size))
            env.state[:, ids] = state
            env.steps[ids] = 0
            env.prev_done[:] = False
            obs[ids] = state.T
        return obs, rewards, terminations, truncations, infos
