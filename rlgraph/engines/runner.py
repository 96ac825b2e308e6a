"""One training run from a config on any engine: what ``rlgraph train`` and the example scripts call.

``train`` reads the config once (``RunConfig``), builds the engine it names (``build_engine``) and has a
``Trainer`` drive it; each step of a run is a function of its own here.
"""
import contextlib
import json
import os
import time

import numpy as np

# The config helpers, importable from here as before (``rlgraph.engines.run_config`` holds them).
from rlgraph.engines.run_config import (DEFAULT_TRAIN_SPEC, ENGINES, MAX_EVAL_ENVS, RUN_ARG_RULES,  # noqa: F401
                                          TRAIN_SPEC_DOCS, TRAIN_SPEC_SCHEMA, RunConfig, env_kwargs_of, load_config,
                                          make_agent, make_vector_env, resolve_backend, train_spec_json_schema)
from rlgraph.training import stop_signals
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.process_watchdog import interrupts_deferred

#: The engines' earlier name.
EXECUTORS = ENGINES


class RunInterrupted(KeyboardInterrupt):
    """A stop signal (Ctrl-C, SIGTERM, SIGHUP: ``rlgraph.training.stop_signals``) ended a run outside its
    training loop (while it was built, in its final evaluation or while it shut down); its processes are stopped
    and its last checkpoint is untouched. ``str()`` is the one line that says what was kept
    (``interrupted_message``).

    Args:
        phase: What the run was doing ("building the run", "the final evaluation", "shutting down").
        env_steps: The run's env steps when it was interrupted (None before it had any).
        logdir: The run's logdir (None before it had one).
        signal: The signal's name ("SIGTERM", ...; None: Ctrl-C or a ``KeyboardInterrupt`` raised otherwise).
    """

    def __init__(self, phase, env_steps, logdir, signal=None):
        super().__init__(phase, env_steps, logdir)
        self.phase, self.env_steps, self.logdir, self.signal = phase, env_steps, logdir, signal

    def __str__(self):
        return interrupted_message(self.phase, self.env_steps, self.logdir, self.signal)


def interrupted_message(phase, env_steps, logdir, signal=None):
    """One line saying where a run was interrupted (by which signal, where it was not Ctrl-C's SIGINT) and what
    it kept: its newest intact checkpoint (read back and checked against its checksums here) and how to
    continue."""
    at = f" at env step {env_steps:,}" if env_steps is not None else ""
    by = f" by {signal}" if signal and signal != "SIGINT" else ""
    head = f"Interrupted{by} during {phase}{at}"
    if not logdir:
        return f"{head}; nothing was written."
    from rlgraph.training.checkpoint_store import CheckpointStore
    from rlgraph.utils.errors import RLGraphError
    try:
        found = CheckpointStore(logdir).latest()
    except RLGraphError as e:
        return f"{head}; no intact checkpoint in {logdir} ({e})."
    if found is None:
        return f"{head}; no checkpoint was written yet in {logdir}, so there is nothing to resume."
    steps = found[1].get("state", {}).get("env_steps", 0)
    return (f"{head}; the last checkpoint (env step {steps:,}) in {logdir} is intact; continue with --resume "
            f"--logdir {logdir}.")


class _Progress:
    """Where a run is, for the line of an interrupted run: its phase, logdir and trainer."""

    def __init__(self, logdir):
        self.phase, self.logdir, self.trainer = "building the run", logdir, None

    def where(self):
        """The phase, in training what the trainer was doing (training, an evaluation, a checkpoint write)."""
        if self.phase == "training" and self.trainer is not None:
            return self.trainer.activity
        return self.phase

    def env_steps(self):
        """The run's env steps so far (None before its trainer exists)."""
        return None if self.trainer is None else int(self.trainer.state["env_steps"])


def train(config, engine=None, env_id=None, backend=None, steps=None, seconds=None, logdir=None, seed=0,
          resume=False, overwrite=False, overrides=None, loggers=None, progress=None, config_name=None,
          env_creator=None, **execution):
    """Trains an agent from a config on an engine; returns the run's summary (also in ``logdir/summary.json``).

    The effective config (``overrides`` applied, ``env_id`` in its ``environment_spec``, the run's backend) is
    stored as ``logdir/config.json``: ``rlgraph train`` and ``rlgraph export`` read it as they read a config file.

    Args:
        config: A config dict or the path of a JSON config.
        engine: One of ``ENGINES``: "local" (None: local), "ray", "central" or "distributed" (``executor=``, its
            earlier name, is accepted too).
        env_id: An environment id overriding the config's.
        backend: "tf" or "pytorch" (default: the config's, else the default backend).
        steps, seconds: The budget (default: the config's ``train_spec``, else 100k steps).
        logdir: Where logs, checkpoints, ``summary.json`` and the learning curve go (default ``runs/...``).
        seed: The run's seed.
        resume: Continue from the checkpoint in ``logdir``.
        overwrite: Start a new run in a ``logdir`` that holds a checkpoint (refused without it); the old
            checkpoints are replaced as the new run writes its own.
        overrides: ``KEY.PATH=VALUE`` strings applied to the config (``--set``; see ``load_config``).
        loggers: Where the scalars go (``--logger``): "tensorboard", "mlflow", "wandb" and/or ``MetricLogger``
            objects (default TensorBoard only); checked before anything is built.
        progress: Show a progress bar (default: when stderr is a terminal).
        config_name: A name for the default logdir (default: the config file's name or its type).
        env_creator: A callable without arguments returning a ``gymnasium.Env``, used instead of the config's
            environment (the local and Ray engines carry it to their actors; central inference and distributed
            learners start fresh interpreters and refuse it, saying so). Not with ``env_id``.
        **execution: ``execution_spec`` values overriding the config's (None leaves the config's):
            ``num_actors``, ``ray_address`` (Ray), ``transport`` (central inference: "shm" or "grpc"),
            ``num_learners``, ``learner_rank`` (distributed; a learner of rank > 0, on another machine, follows
            learner 0 until it stops and returns its own summary), or any other key.
    """
    from rlgraph.training.loggers import check_loggers

    stop_signals.new_run()
    run = RunConfig.load(config, engine, env_id=env_id, backend=backend, seed=seed, steps=steps, seconds=seconds,
                         overrides=overrides, env_creator=env_creator, **execution)
    if resume and not logdir:
        raise RLGraphSpecError("resume needs a logdir (--logdir).")
    loggers = check_loggers(loggers)
    # Before anything runs on TensorFlow (it reads the allocator once); every engine's learner process takes it.
    run.execution.apply_tf_cpu_allocator()
    run.execution.apply_malloc_pooling()
    if run.follows:
        return _follow(run)
    created = bool(logdir) and not os.path.exists(logdir)
    lock = None  # The logdir's lock (one writer per run directory), held until the run has ended.
    where = _Progress(logdir)
    try:
        if logdir:
            lock = _check_logdir(logdir, resume, overwrite)
        try:
            return _train(run, logdir, config_name, resume, overwrite, progress, loggers, where)
        except RunInterrupted:
            raise
        except KeyboardInterrupt:
            raise RunInterrupted(where.where(), where.env_steps(), where.logdir,
                                 stop_signals.signal_name(stop_signals.received())) from None
    except BaseException:
        if lock is not None:
            lock.release()
            lock = None
        if created and os.path.isdir(logdir) and not os.listdir(logdir):
            os.rmdir(logdir)  # A run refused or stopped before it wrote anything leaves no empty logdir behind.
        raise
    finally:
        if lock is not None:
            lock.release()


def _train(run, logdir, config_name, resume, overwrite, progress, loggers, where):
    """``train``'s composition once the run config and the logdir are checked; ``where`` (``_Progress``) follows
    its phases."""
    from rlgraph.training import Trainer

    with _math_threads(run), _built(run) as engine, _evaluation_env(run) as eval_env:
        logdir = where.logdir = logdir or run.default_logdir(engine.agent.backend, config_name)
        effective = run.effective_config(engine.agent.backend)
        trainer = Trainer(engine, logdir, **run.trainer_settings(), resume=resume, overwrite=overwrite,
                          metadata=run.metadata(engine.agent), evaluator=_periodic_evaluator(run, engine, eval_env),
                          progress=progress, loggers=loggers, params=effective)
        where.trainer = trainer
        _write_config(logdir, effective)
        where.phase = "training"
        summary = trainer.train()
        where.phase = "the final evaluation"
        _final_evaluation(run, engine, eval_env, trainer, summary)
        where.phase = "shutting down"
    return dict(summary, logdir=logdir)


def make_engine(config, engine=None, env_id=None, backend=None, seed=0, **execution):
    """``(engine, learner agent, execution spec)`` for a config: the engine a ``Trainer`` drives (``build_engine``).

    Args: those of ``train`` (``executor=``, the engine's earlier name, is accepted too). The config's
    ``train_spec.checkpoint_replay`` is the engine's.
    """
    run = RunConfig.load(config, engine, env_id=env_id, backend=backend, seed=seed, **execution)
    built = build_engine(run)
    return built, built.agent, run.execution


def build_engine(run):
    """The engine of a ``RunConfig``, its settings passed at construction.

    ``local`` is a ``VectorWorker`` over the config's environments (a ``PipelinedWorker`` with
    ``execution_spec.learner_thread``); ``ray`` a Ray engine (``make_ray_engine``) with ``num_actors`` actor
    processes on the cluster at ``ray_address`` (or a local one, or the one this process already joined with
    ``ray.init``); ``central`` the central-inference engine (SEED RL style: backend-free actor processes,
    batched inference here) over ``transport``; ``distributed`` learner 0 of ``num_learners`` learner processes
    (``rlgraph.engines.distributed``). All settings are checked before any process starts.
    """
    replay = run.train_spec["checkpoint_replay"]
    if run.engine == "distributed":
        # The learner group comes first: TensorFlow's must exist before TensorFlow runs anything here.
        from rlgraph.engines.distributed import DistributedEngine
        return DistributedEngine(run.config, run.env_kwargs, run.resolved_backend(), run.execution, run.seed,
                                 checkpoint_replay=replay)
    if run.engine == "local":
        env = make_vector_env(run.env_kwargs)
        agent = make_agent(run.config, env, run.backend, run.seed)
        if run.execution.learner_thread:
            from rlgraph.workers import PipelinedWorker
            actor = make_agent(run.config, env, run.backend, run.seed, role="actor")
            return PipelinedWorker(agent, actor, env, checkpoint_replay=replay)
        from rlgraph.workers import VectorWorker
        return VectorWorker(agent, env, checkpoint_replay=replay)
    if run.engine == "ray":  # Actors a local Ray cannot place: refused before the learner's build.
        from rlgraph.engines.ray.ray_engine import check_local_ray_resources
        check_local_ray_resources(run.execution)
    # The learner's process needs the spaces (and the central engine an observation's layout): one environment
    # tells them.
    probe = make_vector_env(dict(run.env_kwargs, num_envs=1))
    try:
        agent = make_agent(run.config, probe, run.backend, run.seed)
        observation = probe.reset() if run.engine == "central" else None
    finally:
        probe.close()
    if run.engine == "central":
        from rlgraph.engines.central_inference.central_engine import CentralInferenceEngine
        return CentralInferenceEngine(run.config, run.env_kwargs, agent, run.execution, run.seed,
                                      checkpoint_replay=replay, observation=observation)
    from rlgraph.engines.ray import make_ray_engine
    return make_ray_engine(run.config, run.env_kwargs, agent, run.execution, run.seed, checkpoint_replay=replay)


# --- the steps of a run ---------------------------------------------------------------------------------------
@contextlib.contextmanager
def _math_threads(run):
    """A local run takes the config's math threads while it runs (the other engines share the cores with other
    processes)."""
    restore = run.execution.apply_math_threads(run.resolved_backend()) if run.engine == "local" else None
    try:
        yield
    finally:
        if restore is not None:
            restore()


@contextlib.contextmanager
def _built(run):
    """The run's engine (``build_engine``) as an ``Engine``, closed when the run ends (Ctrl-C held back until
    its processes are stopped)."""
    from rlgraph.training.engine import as_engine
    engine = as_engine(build_engine(run))
    stop_signals.keep_handlers()  # (``ray.init`` replaces the SIGTERM handler.)
    try:
        yield engine
    finally:
        with stop_signals.safe_points(), interrupts_deferred():
            engine.close()


@contextlib.contextmanager
def _evaluation_env(run):
    """The greedy evaluations' environments (``RunConfig.eval_env_kwargs``), or None for a run without
    evaluations; closed when the run ends."""
    spec = run.train_spec
    env = make_vector_env(run.eval_env_kwargs()) if spec["eval_episodes"] or spec["eval_every_steps"] else None
    try:
        yield env
    finally:
        if env is not None:
            with stop_signals.safe_points(), interrupts_deferred():
                env.close()


def _periodic_evaluator(run, engine, env):
    """The trainer's evaluator (greedy returns every ``train_spec.eval_every_steps``), or None (also where
    ``train_spec.eval_episodes`` is 0: no evaluations at all)."""
    if not run.train_spec["eval_every_steps"] or not run.train_spec["eval_episodes"]:
        return None
    return lambda: engine.evaluate(env, run.train_spec["eval_episodes"])


def _final_evaluation(run, engine, env, trainer, summary):
    """Adds the greedy evaluation after training (``train_spec.eval_episodes``) to the summary and its file."""
    episodes = run.train_spec["eval_episodes"]
    if episodes and not summary["interrupted"]:
        returns = engine.evaluate(env, episodes)
        summary["eval_mean_return"] = round(float(np.mean(returns)), 3)
        summary["eval_episodes"] = len(returns)
        trainer.write_summary(summary)


def _write_config(logdir, config):
    """Writes the run's effective config as ``logdir/config.json`` (atomically)."""
    tmp = os.path.join(logdir, "config.json.tmp")
    with open(tmp, "w") as f:
        json.dump(config, f, indent=1, default=repr)
    os.replace(tmp, os.path.join(logdir, "config.json"))


def _follow(run):
    """A distributed learner of rank > 0: follows learner 0 (which trains, evaluates and checkpoints)."""
    from rlgraph.engines.distributed.learner import serve
    spec = run.execution
    host, port = spec.learner_addresses[0].rsplit(":", 1)
    start = time.time()
    serve(run.config, run.env_kwargs, run.resolved_backend(), spec, spec.learner_rank, run.seed,
          f"{host}:{int(port) + 1}", spec.learner_addresses)
    return dict(learner_rank=spec.learner_rank, seconds=round(time.time() - start, 3), interrupted=False,
                logdir=None)


def _check_logdir(logdir, resume, overwrite):
    """Refuses, before anything is built, a logdir that cannot hold a run, that another run writes into (its
    lock: ``rlgraph.training.run_lock``) or whose checkpoint would be lost; returns this run's hold on its lock."""
    from rlgraph.training import run_lock
    from rlgraph.training.checkpoint_store import CheckpointStore
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        raise RLGraphSpecError(f"logdir '{logdir}' is a file, not a directory.")
    if resume and not os.path.isdir(logdir):
        raise RLGraphSpecError(f"resume: logdir '{logdir}' does not exist, so there is nothing to resume (leave "
                               f"resume out to start a new run there).")
    try:
        os.makedirs(logdir, exist_ok=True)
    except OSError as e:
        raise RLGraphSpecError(f"logdir '{logdir}' cannot be created: {e.strerror or e}.") from None
    if not os.access(logdir, os.W_OK):
        raise RLGraphSpecError(f"logdir '{logdir}' is not writable.")
    if resume and overwrite:
        raise RLGraphSpecError("--resume and --overwrite exclude each other.")
    lock = run_lock.acquire(logdir)
    if not resume and not overwrite and CheckpointStore(logdir).exists():
        lock.release()
        raise RLGraphSpecError(f"logdir '{logdir}' already holds a checkpoint of an earlier run: continue it with "
                               f"--resume, or start over in it with --overwrite (or choose another --logdir).")
    return lock
