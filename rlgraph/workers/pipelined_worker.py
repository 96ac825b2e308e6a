"""Samples with the actor's own weights while a learner thread learns from the last unroll (one process)."""
import concurrent.futures
import logging

import numpy as np

from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphSpecError
from rlgraph.workers.vector_worker import VectorWorker, _write_startup_probe

logger = logging.getLogger(__name__)


class PipelinedWorker(VectorWorker):
    """A ``VectorWorker`` whose learner runs in a thread beside the sampling loop (``execution_spec.
    learner_thread``): the actor role, built apart with its own weights, steps the environments while the
    learner updates on the previous unroll, as IMPALA's actors and learner overlap (Espeholt et al. 2018), so
    that on two cores sampling and learning each get one.

    The hand-over is at fixed points, so a run does not depend on thread timing: when the builder completes
    unroll k, the worker waits for the update on unroll k-1, copies the learner's weights (and version) to the
    actor, queues unroll k and starts its update in the learner thread; unroll k+1 is then sampled with the
    weights after update k-1. Every sample's policy lag is one update more than in a ``VectorWorker`` run (the
    learner reports it; APPO's ``max_policy_lag`` applies as always). Runs are repeatable and resume exactly:
    ``store`` waits for the update in flight and stores the actor's weights, counters and builder beside the
    agent's run state. Backend math in the two threads runs in parallel (both backends release the GIL).

    For agents whose learner learns from unrolls (IMPALA, APPO); replay agents (DQN, Ape-X, R2D2) emit items
    every step and learn in the sampling loop.

    Args:
        agent: The learner agent (``role="local"``: the learner, greedy evaluation, checkpoints).
        actor_agent: An actor-only agent of the same config (``role="actor"``), with its own weights.
        env: A ``rlgraph.environments.VectorEnv``.
        checkpoint_replay: See ``VectorWorker``.
    """

    def __init__(self, agent, actor_agent, env, checkpoint_replay=True):
        from rlgraph.agents.impala_learner import IMPALALearner
        if not isinstance(agent.learner, IMPALALearner):
            raise RLGraphSpecError(f"execution_spec.learner_thread: the learner thread serves agents that learn from "
                                   f"unrolls (IMPALA, APPO), not {type(agent).__name__}; leave it out (replay "
                                   f"agents learn in the sampling loop) or use --executor ray.")
        if actor_agent.role != "actor":
            raise RLGraphSpecError(f"PipelinedWorker: actor_agent must be built with role='actor', got "
                                   f"role='{actor_agent.role}'.")
        super().__init__(agent, env, learn=True, checkpoint_replay=checkpoint_replay)
        self.actor_agent = actor_agent
        self.actor = actor_agent.actor
        self.builder = agent.make_trajectory_builder()
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlgraph-learner")
        self._pending = None  # The update in flight (a future).
        self._done = []  # Results of finished updates not yet returned by ``run``.
        self._unreported_steps = 0  # Env steps not yet counted by the learner (counted at each hand-over).
        self._first_run = True
        self._restored = False
        self._sync_actor()

    def run(self, num_env_steps):
        """Runs at least ``num_env_steps`` environment steps (whole vector steps); see ``VectorWorker.run``.
        An update still in flight at the end is returned by a later call."""
        actor, env = self.actor, self.env
        ids = np.arange(env.num_envs)
        steps = 0
        while steps < num_env_steps:
            actions, extras = actor.get_actions(self.obs, True, self.internal_states)
            next_obs, rewards, terminals, truncations = env.step(actions)
            if self._startup_probe is not None:
                _write_startup_probe(self._startup_probe)
                self._startup_probe = None
            step = actor.make_step(self.obs, actions, rewards, env.final_obs, terminals, truncations, extras)
            items = self.builder.add(ids, step)
            self.internal_states = actor.next_internal_states(extras, rewards, terminals | truncations)
            self.obs = next_obs
            steps += len(rewards)
            self._unreported_steps += len(rewards)
            if items is not None:
                self._hand_over(actor.process_items(items))
        if self._first_run:
            # The trainer writes the graph summaries after the first chunk: no update may run meanwhile.
            self._first_run = False
            self._finish_pending()
        self.env_steps += steps
        results, self._done = self._done, []
        return dict(env_steps=steps, episodes=env.pop_finished_episodes(), results=results)

    def _hand_over(self, items):
        """Waits for the update in flight, gives the actor its weights, queues ``items`` and starts their update."""
        learner = self.agent.learner
        self._finish_pending()
        self._sync_actor()
        learner.observe_env_steps(self._unreported_steps)
        self._unreported_steps = 0
        learner.add_items(items)
        if learner.ready_to_update():
            self._pending = self._pool.submit(self.agent.update)

    def _finish_pending(self):
        """Waits for the update in flight (its error, if any, is raised here) and keeps its result."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._done.append(pending.result())

    def _sync_actor(self):
        self.actor_agent.set_weights(self.agent.get_weights(), version=self.agent.learner.weights_version)

    # --- the worker interface ---------------------------------------------------------------------------------
    def evaluate(self, env, num_episodes):
        """Greedy returns of the learner's current weights (after the update in flight)."""
        self._finish_pending()
        return super().evaluate(env, num_episodes)

    def store(self, path):
        self._finish_pending()
        super().store(path)

    def get_run_state(self):
        """``VectorWorker``'s run state plus the actor's weights, counters, random-number state and builder."""
        self._finish_pending()
        state = super().get_run_state()
        state["pipeline"] = dict(actor_weights=self.actor_agent.get_weights(), actor=self.actor.get_state(),
                                 actor_rng=self.actor_agent.executor.get_rng_state(),
                                 builder=self.builder.get_state(), unreported_steps=int(self._unreported_steps),
                                 # Finished updates the trainer has not seen yet: a resumed run reports them.
                                 done=[{k: _scalar(v) for k, v in r.items()} for r in self._done])
        return state

    def set_run_state(self, state):
        pipeline = state.get("pipeline") if isinstance(state, dict) else None
        if pipeline is None:
            raise RLGraphCheckpointError("the stored run state holds no learner-thread pipeline (it was stored by a "
                                         "run without execution_spec.learner_thread): resume it without the learner "
                                         "thread.")
        super().set_run_state(state)
        self._restored = True
        try:
            self.actor_agent.set_weights(pipeline["actor_weights"])
            self.actor.set_state(pipeline["actor"])
            self.actor_agent.executor.set_rng_state(pipeline["actor_rng"])
            self._done = [dict(r) for r in pipeline["done"]]
            if state.get("env") is not None and self.env.state_saveable:
                self.builder.set_state(pipeline["builder"])
                self._unreported_steps = int(pipeline["unreported_steps"])
            else:
                self.builder.reset()
                self._unreported_steps = 0
        except (KeyError, TypeError, ValueError) as e:
            raise RLGraphCheckpointError(f"the stored learner-thread pipeline does not fit: {type(e).__name__}: "
                                         f"{e}.") from None

    def load(self, path):
        """Restores a stored run (see ``VectorWorker.load``); a model stored without a run state gives the
        actor the loaded weights and starts its trajectories afresh."""
        self._finish_pending()
        self._done = []
        self._restored = False
        super().load(path)
        if not self._restored:
            self._sync_actor()
            self.builder.reset()
            self._unreported_steps = 0

    def summary(self):
        return dict(learner_thread=True)

    def close(self):
        """Waits for the update in flight and stops the learner thread."""
        try:
            self._finish_pending()
        finally:
            self._pool.shutdown(wait=True)


def _scalar(value):
    """A JSON scalar of an update result's value (a float or int, or a numpy scalar of one)."""
    return value.item() if isinstance(value, np.generic) else value
