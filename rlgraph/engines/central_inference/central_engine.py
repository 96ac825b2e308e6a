"""The central-inference engine: backend-free actor processes, batched inference and learning in this process.

Batch-size buckets: the inference server's batch size varies with how many requests arrived (1 .. the largest
batch of the run). Where the executor compiles an API method once per input shape (``compiles_per_shape``: JAX's
``jax.jit``), the server pads each call along the batch axis to ``min(2 ** ceil(log2(n)), largest)`` rows, the next
power of two capped at the largest batch the run can make (itself a bucket), with copies of a real row (never
zeros), and slices the outputs back (``buckets``); recurrent states are padded and sliced alike, and the padding
rows' outputs reach no actor, trajectory or recurrent state. ``act`` compiles once per bucket, not per batch size;
TensorFlow (batch dimension None) and PyTorch run every batch as it is.
"""
import logging
import os
import time
import weakref

import numpy as np
import optree

from rlgraph.engines.central_inference.env_actor import USER_CODE_KEY
from rlgraph.engines.central_inference.inference_server import InferenceServer
from rlgraph.engines.remote_actors import RemoteActorEngine
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from rlgraph.utils.user_modules import UserCode, check_json_environment

logger = logging.getLogger(__name__)


class CentralInferenceEngine(RemoteActorEngine):
    """Trains one agent config SEED-RL style (Espeholt et al. 2020): actors only step environments.

    ``num_actors`` actor processes (``EnvActor``) each step ``envs_per_actor`` environments built from the
    config's ``environment_spec`` and import no deep-learning backend. They reach the ``InferenceServer`` in
    this process over a transport (``execution_spec.transport``: "shm", shared memory on this machine); the
    server batches their requests into one ``get_actions`` call of the learner's own actor role (so actors act
    on the learner's current weights), keeps recurrent state per environment, assembles trajectories with one
    builder keyed by global environment id and feeds the learner, which updates on the schedule of a local
    run.

    The engine is an ``Engine`` the ``Trainer`` drives (``RemoteActorEngine``), so a central run has the local
    run's progress bar, TensorBoard scalars, checkpoints, resume and ``summary.json``. An actor whose process
    ends (or that sends nothing for ``sample_timeout_s``) is replaced by a new process; its partial trajectories
    are dropped and counted (``actor_restarts``, ``env_steps_lost``), its recurrent state zeroed.

    The user's own environment code travels with the actors: the modules the driver resolved the environment
    from and the gymnasium ids it registered (``rlgraph.utils.user_modules.UserCode``) are installed in each
    actor process before it builds its environments. An environment creator (a callable) cannot travel: the
    actors are fresh interpreters configured with JSON.

    Args:
        config, env_kwargs, learner_agent, spec, seed, checkpoint_replay: See ``RemoteActorEngine`` (the learner
            acts for the server, so it must hold both roles: ``role="both"``).
        observation: One observation of a one-environment ``VectorEnv`` of the run (``reset()``), which tells
            the transport the observations' layout (None: a probe environment is made here for it).
    """

    ENGINE = "central"
    DISPLAY_NAME = "Central inference"

    def __init__(self, config, env_kwargs, learner_agent, spec, seed=0, checkpoint_replay=True, observation=None):
        from rlgraph.agents.impala_learner import IMPALALearner
        from rlgraph.agents.replay_learner import ReplayLearner

        learner = getattr(learner_agent, "learner", None)
        if not isinstance(learner, (IMPALALearner, ReplayLearner)):
            raise RLGraphSpecError(f"--engine central: agent type {config.get('type')!r} "
                                   f"({type(learner_agent).__name__}) is not supported; central inference runs "
                                   f"replay agents (dqn, apex, r2d2) and unroll agents (impala, appo).")
        if learner_agent.actor is None:
            raise RLGraphSpecError("--engine central: the learner agent must hold both roles (role='both'); its "
                                   "actor role serves the inference.")
        super().__init__(config, env_kwargs, learner_agent, spec, seed, checkpoint_replay)
        check_json_environment(self.env_kwargs, "--engine central", "central inference's actor processes")
        code = UserCode.of_run({}, self.env_kwargs)
        self.user_code = code.to_json("central inference") if code else None
        num_envs = int(self.env_kwargs.get("num_envs", 1))
        self.total_envs = self.num_actors * self.envs_per_actor
        self._closed = False
        if "OMP_NUM_THREADS" not in os.environ:
            logger.warning("Central inference: OMP_NUM_THREADS is not set; the learner's math threads may spin on "
                           "the cores the actor processes need (rlgraph train sets 1).")
        if observation is None:
            observation = probe_observation(self.env_kwargs)
        obs_leaves, self.obs_spec = _observation_layout(observation)
        action = np.asarray(learner_agent.action_space.zeros(1))
        self.transport = self._make_transport(obs_leaves, action.shape[1:], action.dtype.str)
        self._finalizer = weakref.finalize(self, self.transport.close)
        # Unroll learners update on as many environment columns as a local run's batch (replay: own schedule).
        self.batch_columns = min(num_envs, self.total_envs) if isinstance(learner, IMPALALearner) else None
        try:
            self.server = InferenceServer(learner_agent, self.transport, [self.envs_per_actor] * self.num_actors,
                                          self.obs_spec, spec.inference_batch_size or self.total_envs,
                                          spec.inference_timeout_ms / 1000.0, self.batch_columns)
            for index in range(self.num_actors):
                self.transport.start(index, self._actor_env_kwargs(index))
        except BaseException:
            self.close()
            raise

    def _make_transport(self, obs_leaves, action_shape, action_dtype):
        if self.spec.transport == "shm":
            from rlgraph.engines.central_inference.shm_transport import ShmTransport
            return ShmTransport([self.envs_per_actor] * self.num_actors, obs_leaves, action_shape, action_dtype)
        from rlgraph.engines.central_inference.grpc_transport import GrpcTransport
        return GrpcTransport([self.envs_per_actor] * self.num_actors, obs_leaves, action_shape, action_dtype,
                             address=self.spec.server_address, token=self.spec.token,
                             local_actors=self.spec.local_actors)

    def _actor_env_kwargs(self, index):
        # A replacement actor's environments get new seeds (its predecessor's episodes are not replayed).
        kwargs = self.actor_env_kwargs(index, seed=self.actor_seed(index) + 7919 * self.actor_restarts)
        if self.user_code is not None:
            kwargs[USER_CODE_KEY] = self.user_code
        return kwargs

    # --- faults ---------------------------------------------------------------------------------------------
    def _on_dead(self, index, why, said_hello=True):
        if not said_hello:
            raise RLGraphError(f"Central inference: actor {index} failed before it started its environments "
                               f"({why}); see its error above (environment_spec: {self.env_kwargs}).")
        self._replace(index, why)

    def _replace(self, index, why):
        """Replaces actor ``index`` by a new process; its partial trajectories are dropped and counted."""
        if self.actor_restarts >= self.spec.max_actor_restarts:
            raise RLGraphError(f"Central inference: actor {index} failed ({why}) after {self.actor_restarts} "
                               f"restarts (execution_spec.max_actor_restarts={self.spec.max_actor_restarts}); "
                               f"stopping.")
        self.transport.stop(index)
        self.server.forget_actor(index)
        self.actor_restarts += 1
        logger.warning("Central inference: actor %d %s; replacing it (restart %d).", index, why, self.actor_restarts)
        self.transport.start(index, self._actor_env_kwargs(index))

    def _check_overdue(self):
        for index in self.server.overdue(self.spec.sample_timeout_s):
            self._replace(index, f"sent no step for sample_timeout_s={self.spec.sample_timeout_s}s")

    # --- the engine interface -------------------------------------------------------------------------------
    def run(self, num_env_steps):
        """Serves and trains for at least ``num_env_steps`` environment steps (over all actors).

        Returns:
            dict with ``env_steps``, ``episodes`` (list of (return, length)), ``results`` (update results) and
            ``scalars`` (mean inference batch size, latency, per-actor throughput: for TensorBoard).
        """
        if self._closed:
            raise RLGraphError("Central inference: run() after close().")
        server = self.server
        server.restart_clock()
        steps, episodes, results = 0, [], []
        last_check = last_request = time.perf_counter()
        while steps < num_env_steps:
            requests = server.collect(self._on_dead)
            now = time.perf_counter()
            if requests:
                last_request = now
                n, eps, res = server.serve(requests)
                steps += n
                episodes.extend(eps)
                results.extend(res)
            elif now - last_request > 30.0:
                connected = sum(1 for i in range(self.num_actors) if self.transport.ready(i))
                logger.warning("Central inference: no request for %.0f s; %d of %d actors connected%s.",
                               now - last_request, connected, self.num_actors,
                               f" (waiting for remote actors at {self.transport.address})"
                               if getattr(self.transport, "local_actors", True) is False else "")
                last_request = now
            if not requests or now - last_check > 1.0:
                self._check_overdue()
                last_check = time.perf_counter()
        return dict(env_steps=steps, episodes=episodes, results=results, scalars=self._scalars())

    def _scalars(self):
        out = {"central/mean_batch_size": float(self.server.mean_batch_size),
               "central/inference_latency_ms": float(self.server.mean_latency_ms)}
        for i, (env_s, wait_s, vector_steps) in enumerate(self.server.actor_stats):
            out[f"actors/{i}/env_steps_per_second"] = float(vector_steps * self.envs_per_actor
                                                            / max(env_s + wait_s, 1e-9))
        return out

    def actor_pids(self):
        """The process ids of the actors (index order)."""
        return self.transport.pids()

    def actor_backends(self):
        """The deep-learning backends each actor reported as imported (should all be empty); None: not yet
        started."""
        return [None if info is None else info["backends"]
                for info in (self.transport.info(i) for i in range(self.num_actors))]

    def summary(self):
        """What a run's ``summary.json`` adds for this engine."""
        server = self.server
        actors = []
        for i, (env_s, wait_s, vector_steps) in enumerate(server.actor_stats):
            actors.append(dict(index=i, env_steps=int(server.actor_env_steps[i]),
                               env_steps_per_second=round(float(vector_steps * self.envs_per_actor
                                                                / max(env_s + wait_s, 1e-9)), 1),
                               mean_wait_ms=round(1000.0 * wait_s / max(vector_steps, 1), 3)))
        return dict(super().summary(), transport=self.spec.transport,
                    env_steps_lost=int(self.server.env_steps_lost), inference_calls=int(server.inference_calls),
                    mean_inference_batch_size=round(float(server.mean_batch_size), 2),
                    mean_inference_latency_ms=round(float(server.mean_latency_ms), 3),
                    inference_padded_rows=int(server.padded_rows),
                    dropped_samples=int(server.dropped_samples), actors=actors,
                    execution_spec=self.spec.to_dict(redact=True),
                    **({"server_address": self.transport.address, "rejected_streams": self.transport.rejected}
                       if self.spec.transport == "grpc" else {}))

    def _loaded(self):
        # The server's partial trajectories and recurrent states belong to the run before the load (they are not
        # stored: a resumed run starts its actors' environments afresh).
        self.server.reset()

    def close(self):
        """Stops the actors and frees the transport's resources (shared memory, sockets); idempotent."""
        if self._closed:
            return
        self._closed = True
        transport = getattr(self, "transport", None)
        if transport is not None:
            transport.close()


def probe_observation(env_kwargs):
    """One observation (``reset()``) of a one-environment ``VectorEnv`` made from ``env_kwargs``."""
    from rlgraph.engines.run_config import make_vector_env

    probe = make_vector_env(dict(env_kwargs, num_envs=1))
    try:
        return probe.reset()
    finally:
        probe.close()


def _observation_layout(observation):
    """``([(shape, dtype) per leaf of one observation], optree spec)`` of a vector environment's observation."""
    leaves, spec = optree.tree_flatten(observation)
    return [(np.asarray(leaf).shape[1:], np.asarray(leaf).dtype.str) for leaf in leaves], spec
