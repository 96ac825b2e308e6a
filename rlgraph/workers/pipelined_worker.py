"""Samples with the actor's own weights while a learner thread learns (one process)."""
import concurrent.futures
import logging

import numpy as np

from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphSpecError
from rlgraph.workers.actor_loop import ActorLoop
from rlgraph.workers.vector_worker import VectorWorker

logger = logging.getLogger(__name__)


class PipelinedWorker(VectorWorker):
    """A ``VectorWorker`` whose learner runs in a thread beside the sampling loop (``execution_spec.
    learner_thread``): the actor role, built apart with its own weights, steps the environments while the
    learner updates, as IMPALA's actors and learner overlap (Espeholt et al. 2018) and as R2D2's and Ape-X's
    actors act while their learner learns from replay (Kapturowski et al. 2019; Horgan et al. 2018), so that on
    two cores sampling and learning each get one.

    The hand-over is at fixed points, so a run does not depend on thread timing. At a hand-over the worker
    waits for the updates in flight, copies the learner's weights (and version) to the actor, reports the env
    steps and hands over the items sampled since the last one, and starts the updates the learner's schedule
    asks for in the learner thread. While updates are in flight, new items wait in the worker; the next
    hand-over comes where the learner said before it started them (``Learner.steps_to_next_update``; the
    sampling loop reads nothing the learner thread changes): for IMPALA/APPO at the next completed unroll, for
    replay agents (DQN, Ape-X, R2D2) at the env step of the next scheduled update. So each update
    learns from exactly the data it would learn from without the thread, and the actor acts with the weights
    of one hand-over earlier: one update (or one interval's updates) more policy lag, which the learner
    reports (APPO's ``max_policy_lag`` applies as always). Runs are repeatable and resume exactly (the actor's
    and the learner's executors draw from their own generators; on TensorFlow with one math thread: with more,
    its oneDNN kernels can split a sum differently while both threads compute, a last-bit difference): ``store``
    waits for the updates in flight and stores the actor's weights, counters, builder and the waiting items
    beside the agent's run state. Backend math in the two threads runs in parallel (both backends release the
    GIL).

    Args:
        agent: The learner agent (``role="both"``: the learner, greedy evaluation, checkpoints).
        actor_agent: An actor-only agent of the same config (``role="actor"``), with its own weights.
        env: A ``rlgraph.environments.VectorEnv``.
        checkpoint_replay: See ``VectorWorker``.
    """

    def __init__(self, agent, actor_agent, env, checkpoint_replay=True):
        if actor_agent.role != "actor":
            raise RLGraphSpecError(f"PipelinedWorker: actor_agent must be built with role='actor', got "
                                   f"role='{actor_agent.role}'.")
        self.actor_agent = actor_agent
        self.actor = actor_agent.actor
        self.builder = agent.make_trajectory_builder()
        super().__init__(agent, env, learn=True, checkpoint_replay=checkpoint_replay)
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlgraph-learner")
        self._pending = None  # The updates in flight (a future of their result list).
        self._in_flight = False  # Updates were started at the last hand-over (a fixed point, not a thread state).
        # While they are: env steps from the last hand-over to the next (None: at the next items).
        self._handover_steps = None
        self._done = []  # Results of finished updates not yet returned by ``run``.
        self._unreported_steps = 0  # Env steps not yet counted by the learner (counted at each hand-over).
        self._waiting = []  # Item batches not yet handed to the learner (handed over at the next hand-over).
        self._first_run = True
        self._restored = False
        self._sync_actor()

    def _make_loop(self):
        """The actor role's step sequence: its items wait in the worker for the next hand-over."""
        return ActorLoop(self.actor, self.builder)

    def run(self, num_env_steps):
        """Runs at least ``num_env_steps`` environment steps (whole vector steps); see ``VectorWorker.run``.
        Updates still in flight at the end are returned by a later call."""
        loop, env = self.loop, self.env
        steps = 0
        while steps < num_env_steps:
            self.obs, items, num_steps = loop.step(env, self.obs)
            self._after_env_step()
            steps += num_steps
            self._unreported_steps += num_steps
            if items is not None:
                self._waiting.append(items)
            if not self._in_flight or (self._waiting if self._handover_steps is None else
                                       self._unreported_steps >= self._handover_steps):
                self._hand_over()
        if self._first_run:
            # The trainer writes the graph summaries after the first chunk: no update may run meanwhile.
            self._first_run = False
            self._finish_pending()
        self.env_steps += steps
        results, self._done = self._done, []
        return dict(env_steps=steps, episodes=env.pop_finished_episodes(), results=results)

    def _hand_over(self):
        """Waits for the updates in flight and gives the actor their weights, hands the waiting steps and items
        to the learner, and starts the updates its schedule asks for."""
        learner = self.agent.learner
        if self._in_flight:
            self._finish_pending()
            self._sync_actor()
            self._in_flight = False
        if self._unreported_steps:
            learner.observe_env_steps(self._unreported_steps)
            self._unreported_steps = 0
        waiting, self._waiting = self._waiting, []
        for items in waiting:
            learner.add_items(items)
        if learner.ready_to_update():
            # Asked here, before the learner thread changes the learner's schedule.
            self._handover_steps = learner.steps_to_next_update()
            self._pending = self._pool.submit(self._learn)
            self._in_flight = True

    def _learn(self):
        """The learner thread's work at a hand-over: the updates the schedule asks for (as ``VectorWorker``)."""
        agent, results = self.agent, []
        while agent.ready_to_update():
            results.append(agent.update())
        return results

    def _finish_pending(self):
        """Waits for the updates in flight (an error of theirs is raised here) and keeps their results."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._done.extend(pending.result())

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
                                 actor_rng=self.actor_agent.executor.tagged_rng_state(),
                                 builder=self.builder.get_state(), unreported_steps=int(self._unreported_steps),
                                 waiting=list(self._waiting), in_flight=bool(self._in_flight),
                                 handover_steps=self._handover_steps,
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
            self.actor_agent.executor.restore_tagged_rng_state(pipeline["actor_rng"])
            self._done = [dict(r) for r in pipeline["done"]]
            self._in_flight = bool(pipeline.get("in_flight", True))  # Stored before 2026-11: True.
            steps = pipeline.get("handover_steps")
            self._handover_steps = None if steps is None else int(steps)
            # Complete items are kept either way (a VectorWorker would have handed them to the learner already).
            self._waiting = [dict(items) for items in pipeline.get("waiting", [])]
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
            self._waiting = []
            self._in_flight = False
            self._handover_steps = None

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
