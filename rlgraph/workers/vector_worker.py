"""Runs one agent against a vector of environments in one process."""
import logging
import os
import time

import numpy as np

from rlgraph.training.engine import Engine
from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphError
from rlgraph.utils.run_state import load_run_state, save_run_state
from rlgraph.workers.actor_loop import ActorLoop

logger = logging.getLogger(__name__)

#: Environment variable naming a file that the worker creates at its first environment step, holding the wall
#: time (``time.time()``) right after that step as text; the first worker to step wins (an existing file is
#: left alone, so actor processes that inherit the variable do not overwrite it). ``benchmarks/startup.py``
#: measures start-up with it.
STARTUP_PROBE_ENV = "RLGRAPH_STARTUP_PROBE"


def _write_startup_probe(path):
    """Creates ``path`` holding the current wall time (the start-up probe; see ``STARTUP_PROBE_ENV``)."""
    stamp = time.time()
    try:
        with open(path, "x") as f:
            f.write(repr(stamp))
    except FileExistsError:
        pass
    except OSError as e:
        logger.warning("%s: cannot write '%s': %s", STARTUP_PROBE_ENV, path, e)


class VectorWorker(Engine):
    """Acts with one batched inference call for all environments per step, observes, and updates.

    Per step, through its ``ActorLoop`` (the agent's actor, builder and learner): the actions for all N
    observations, ``env.step``, the N transitions (``s' = env.final_obs``, so truncated episodes bootstrap
    correctly) checked (the agent's ``StepCheck``), turned into items and handed to the learner, then
    ``agent.update()`` as often as ``agent.ready_to_update()`` says (the agent's update schedule: a ratio of
    env steps to updates for off-policy agents, a full unroll for IMPALA/APPO). Recurrent agents get their
    internal states back from the loop, which zeroes them for environments that started a new episode. Nothing
    here is process-specific, so the distributed engines reuse it.

    Args:
        agent: The agent.
        env: A ``rlgraph.environments.VectorEnv``.
        learn: Call ``agent.update()`` when it is ready (False for pure actors).
        checkpoint_replay: Store the replay memory's contents with the run state (``train_spec.
            checkpoint_replay``; False for replays of many GB: a resumed run then refills its memory).

    With the environment variable ``RLGRAPH_STARTUP_PROBE=PATH`` set, the worker writes the wall time
    (``time.time()``) of its first environment step to ``PATH`` (start-up measurements).
    """

    def __init__(self, agent, env, learn=True, checkpoint_replay=True):
        self.agent = agent
        self.env = env
        self.learn = learn
        self.obs = env.reset()
        self.loop = self._make_loop()
        self.env_steps = 0
        self._warned_env_state = False
        self.checkpoint_replay = bool(checkpoint_replay)
        self._startup_probe = os.environ.get(STARTUP_PROBE_ENV) or None

    def _make_loop(self):
        """The step sequence of the local agent's roles (None for an agent without actor or learner)."""
        agent = self.agent
        if agent.actor is None or agent.learner is None:
            return None
        return ActorLoop(agent.actor, agent.builder, sink=agent.learner, check=agent.step_check)

    @property
    def internal_states(self):
        """The recurrent state per environment for the next step (None: new episodes)."""
        return None if self.loop is None else self.loop.internal_states

    def _acting_loop(self):
        if self.loop is None:
            raise RLGraphError(f"{type(self).__name__}: {self.agent.name} was built with role='{self.agent.role}'; "
                               f"running it needs role='both' (an actor and a learner).")
        return self.loop

    def run(self, num_env_steps):
        """Runs at least ``num_env_steps`` environment steps (whole vector steps).

        Returns:
            dict with ``env_steps`` (taken), ``episodes`` (list of (return, length) finished), ``results``
            (the update results).
        """
        agent, env, loop = self.agent, self.env, self._acting_loop()
        results = []
        steps = 0
        while steps < num_env_steps:
            self.obs, _, num_steps = loop.step(env, self.obs)
            self._after_env_step()
            steps += num_steps
            if self.learn:
                while agent.ready_to_update():
                    results.append(agent.update())
        self.env_steps += steps
        return dict(env_steps=steps, episodes=env.pop_finished_episodes(), results=results)

    def _after_env_step(self):
        """Writes the start-up probe after the first environment step (``STARTUP_PROBE_ENV``)."""
        if self._startup_probe is not None:
            _write_startup_probe(self._startup_probe)
            self._startup_probe = None

    def evaluate(self, env, num_episodes):
        """Returns of the greedy policy over ``num_episodes`` episodes of the vector env ``env``.

        Each environment contributes a fixed number of its first episodes (``num_episodes`` spread evenly over
        the environments), so the estimate is unbiased: taking the first episodes to finish over all
        environments would favour short episodes.
        """
        if isinstance(num_episodes, bool) or not isinstance(num_episodes, (int, np.integer)) or num_episodes < 1:
            raise RLGraphError(f"evaluate: num_episodes must be an int >= 1, got {num_episodes!r}.")
        quota = np.full(env.num_envs, num_episodes // env.num_envs, np.int64)
        quota[:num_episodes % env.num_envs] += 1
        taken = np.zeros(env.num_envs, np.int64)
        returns = [[] for _ in range(env.num_envs)]
        obs = env.reset()
        states = None
        env.pop_finished_episodes()
        limit = int(quota.max()) * 100000
        steps = 0
        while (taken < quota).any():
            actions, extras = self.agent.get_actions(obs, explore=False, internal_states=states, return_extras=True)
            obs, rewards, terminals, truncations = env.step(actions)
            states = self.agent.next_internal_states(extras, rewards, terminals | truncations)
            # One step's finished episodes come in the order of ``finished_env_ids``.
            for env_id, (ret, _) in zip(env.finished_env_ids.tolist(), env.pop_finished_episodes()):
                if taken[env_id] < quota[env_id]:
                    returns[env_id].append(ret)
                    taken[env_id] += 1
            steps += 1
            if steps > limit:
                raise RLGraphError("evaluate: episodes do not end.")
        return [ret for env_returns in returns for ret in env_returns]

    def store(self, path):
        """Stores the agent's model and the run state (``get_run_state``) in directory ``path``.

        The run state goes in first (``run_state.npz`` and ``run_state.json``), so that the model's checksums
        cover it.
        """
        save_run_state(path, self.get_run_state())
        self.agent.store_model(path)

    def load(self, path):
        """Restores a model stored by ``store`` and, where it was stored, the run state: a resumed run then
        goes on as the stored one would have (same updates, same weights where the environments' state was
        stored too). A model without a run state resumes with an empty memory and fresh environments."""
        self.agent.load_model(path)
        state = load_run_state(path)
        if state is None:
            logger.warning("'%s' holds no run state: resuming with an empty memory, fresh environments and "
                           "approximate schedule counters.", path)
            return
        self.set_run_state(state)

    def get_run_state(self):
        """Everything the run's future depends on besides the weights: the agent's run state
        (``Agent.get_run_state``), the environments' state, the current observations and internal states.

        Environments whose state cannot be saved (``VectorEnv.state_saveable``) are left out, with a warning
        (once): a resumed run then starts them afresh.
        """
        env_state = self.env.get_state()
        if env_state is None and not self._warned_env_state:
            logger.warning("The state of %r cannot be saved: a run resumed from this checkpoint starts from fresh "
                           "environments (not exactly as this run would have gone on).", self.env)
            self._warned_env_state = True
        agent_state = self.agent.get_run_state(include_replay=self.checkpoint_replay)
        return dict(env_steps=int(self.env_steps), agent=agent_state, env=env_state,
                    obs=None if env_state is None else self.obs,
                    internal_states=None if env_state is None else self.internal_states)

    def set_run_state(self, state):
        """Restores what ``get_run_state`` returned (after the model was loaded).

        Raises:
            RLGraphCheckpointError: The state does not fit this worker's agent or environments.
        """
        try:
            env_state, env_steps = state["env"], int(state["env_steps"])
            agent_state = state["agent"]
        except (KeyError, TypeError, ValueError) as e:
            raise RLGraphCheckpointError(f"the stored run state does not fit: {type(e).__name__}: {e}.") from None
        self.agent.set_run_state(agent_state)
        self.env_steps = env_steps
        if env_state is None or not self.env.state_saveable:
            logger.warning("The stored run holds no state of its environments: resuming from fresh environments.")
            self.agent.reset()  # Partial trajectories belong to the stored run's episodes.
            self._set_internal_states(None)
            return
        self.env.set_state(env_state)
        self.obs = state["obs"]
        self._set_internal_states(state["internal_states"])

    def _set_internal_states(self, internal_states):
        if self.loop is not None:
            self.loop.internal_states = internal_states
