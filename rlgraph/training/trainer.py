"""Training runs: progress, scalars (TensorBoard and other trackers), checkpoints and resume, summary and learning
curve."""
import json
import logging
import os
import sys
import time
from collections import deque

import numpy as np

from rlgraph.training import run_lock, stop_signals
from rlgraph.training.checkpoint_store import CheckpointStore
from rlgraph.training.engine import as_engine
from rlgraph.training.learning_curve import plot_learning_curve
from rlgraph.training.loggers import check_loggers, open_loggers
# Kept importable from here (earlier code and tests import them from the trainer).
from rlgraph.training.loggers.tensorboard_logger import ScalarWriter as _ScalarWriter  # noqa: F401
from rlgraph.training.loggers.tensorboard_logger import summary_writer_class as _summary_writer_class  # noqa: F401
from rlgraph.utils.errors import RLGraphDivergenceError, RLGraphError

logger = logging.getLogger(__name__)
#: The status lines of runs without a progress bar (``rlgraph train`` shows them at INFO unless ``--quiet``).
status_logger = logging.getLogger("rlgraph.progress")

#: Wall seconds between two status lines of a run without a terminal (``Trainer(status_every_seconds=...)``).
STATUS_EVERY_SECONDS = 30.0

#: What ``Trainer(progress=...)`` may be, besides True (the bar), False (nothing) and None (auto).
PROGRESS_MODES = ("bar", "status", "quiet")


class Trainer:
    """Runs an engine until a step or time budget is spent, and records everything a user expects.

    The engine (``rlgraph.training.engine.Engine``: a local worker or an execution engine) trains in chunks
    (``run``), stores and restores the run (``store``, ``load``), adds its ``summary()`` to ``summary.json`` and
    its ``processes()`` (if any) to ``processes.json``; its ``agent`` gets its graphs written beside the run.
    An object that only offers ``run``, ``store`` and ``load`` is driven through ``as_engine``.

    From its construction to the end of ``train`` the trainer holds the logdir's lock (``run_lock``: one writer
    per run directory; another process's run there is refused). Ctrl-C (and SIGTERM and SIGHUP under
    ``stop_signals.handling_stop_signals``, as ``rlgraph train`` runs) stops ``train`` at the end of the chunk in
    progress, with a checkpoint of that moment (``stop_signals``).

    Args:
        engine: The engine (``Engine``), or an object with ``run``, ``store`` and ``load``.
        logdir: Directory for TensorBoard events, checkpoints, ``summary.json``, ``processes.json`` and
            ``learning_curve.png``.
        max_steps: Stop after this many environment steps (total, across resumes).
        max_seconds: Stop after this many wall seconds (total, across resumes).
        target_return: The return the run aims at (mean of the last 100 episodes); the first time and step
            count it is reached are recorded.
        stop_at_target: Stop as soon as the target is reached.
        chunk_steps: Environment steps per ``engine.run`` call (the granularity of logging and stopping).
        checkpoint_every_seconds: How often to write a checkpoint (see ``CheckpointStore``: a checkpoint counts
            only once completely written; a run that fails writes none, so the last good one stays current).
        resume: Continue from the checkpoint in ``logdir`` (step counts, returns and model).
        overwrite: Start a new run in a ``logdir`` that holds a checkpoint (without it, that is refused).
        keep_checkpoints: How many checkpoints to keep.
        metadata: Written into ``summary.json`` (e.g. agent type, backend, environment id).
        progress: How the run shows its progress: "bar" (or True) a live progress bar, "status" a one-line status
            (env steps, steps/s, mean return of the last 100 episodes, last greedy evaluation) logged to
            ``rlgraph.progress`` at INFO every ``status_every_seconds``, "quiet" (or False) neither. Default:
            the bar when stderr is a terminal, else the status lines.
        status_every_seconds: Wall seconds between status lines (default ``STATUS_EVERY_SECONDS``).
        evaluator: A callable returning the returns of greedy evaluation episodes. With it, the target counts
            as reached when an evaluation's mean return reaches it (instead of the training episodes'); an
            evaluation that reaches it is confirmed by a second one, and the mean over both must reach it.
        eval_every_steps: Run the evaluator every this many environment steps (its time counts as training
            time, so that time-to-target figures are honest).
        loggers: Where the scalars go: names of ``rlgraph.training.loggers.LOGGERS`` ("tensorboard", "mlflow",
            "wandb") and/or ``MetricLogger`` objects (default: TensorBoard only). Checked here, opened by ``train``.
        params: The run's config, logged (flattened to dotted keys) as the trackers' params.
    """

    def __init__(self, engine, logdir, max_steps=None, max_seconds=None, target_return=None, stop_at_target=False,
                 chunk_steps=1000, checkpoint_every_seconds=60.0, resume=False, metadata=None, progress=None,
                 evaluator=None, eval_every_steps=None, overwrite=False, keep_checkpoints=3, loggers=None,
                 params=None, status_every_seconds=None):
        if max_steps is None and max_seconds is None:
            raise RLGraphError("Trainer needs max_steps or max_seconds.")
        self.loggers = check_loggers(loggers)
        self.params = params
        self.trackers = {}
        self.engine = as_engine(engine)
        self.logdir = logdir
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self.target_return = target_return
        self.stop_at_target = stop_at_target
        self.chunk_steps = int(chunk_steps)
        self._running_chunk = None  # The env steps of the chunk the engine runs now (None between chunks).
        #: What the run does now ("training", "a periodic evaluation", "a checkpoint write"): where a Ctrl-C
        #: landed, in the summary as ``interrupted_during``.
        self.activity = "training"
        self.interrupted_during = None
        self.checkpoint_every_seconds = checkpoint_every_seconds
        self.metadata = dict(metadata or {})
        self.progress_mode = _progress_mode(progress)
        self.progress = self.progress_mode == "bar"
        self.status_every_seconds = float(STATUS_EVERY_SECONDS if status_every_seconds is None
                                          else status_every_seconds)
        self.evaluator = evaluator
        self.eval_every_steps = eval_every_steps
        if evaluator is not None and not eval_every_steps:
            raise RLGraphError("Trainer: an evaluator needs eval_every_steps.")
        self.checkpoint_dir = os.path.join(logdir, "checkpoint")
        self.checkpoints = CheckpointStore(logdir, keep_checkpoints)
        self.state = dict(env_steps=0, wall_seconds=0.0, episodes=0, episode_steps=[], episode_returns=[],
                          seconds_to_target=None, steps_to_target=None, updates=0, evaluations=[],
                          last_eval_step=0)
        try:
            os.makedirs(logdir, exist_ok=True)
        except OSError as e:
            raise RLGraphError(f"logdir '{logdir}' cannot be created: {e.strerror or e}.") from None
        #: This process's hold on the logdir's lock (one writer per run directory), from here to the end of
        #: ``train``.
        self._lock = run_lock.acquire(logdir)
        self.resumed = bool(resume)
        self.nothing_trained = None
        self.interrupted_by = None
        self._graph_written = False
        self._graphs_written = set()  # API methods whose TF graphs are written
        self._checkpointed_steps = None  # The env steps of the checkpoint this run wrote last.
        try:
            self._write_processes()
            if resume:
                self._load_checkpoint()
            elif self.checkpoints.exists() and not overwrite:
                raise RLGraphError(f"logdir '{logdir}' already holds a checkpoint of an earlier run: continue it "
                                   f"with --resume, or start over in it with --overwrite (or choose another "
                                   f"--logdir).")
        except BaseException:
            self._lock.release()
            raise

    def _write_processes(self):
        """Writes ``processes.json`` (this process as ``learner``, plus the engine's ``processes()``) for
        monitoring and fault drills; nothing for an engine that runs in this process only."""
        processes = self.engine.processes()
        if processes:
            tmp = os.path.join(self.logdir, "processes.json.tmp")
            with open(tmp, "w") as f:
                json.dump(dict(learner=os.getpid(), **processes), f)
            os.replace(tmp, os.path.join(self.logdir, "processes.json"))

    # --- checkpoints ------------------------------------------------------------------------------------
    def _load_checkpoint(self):
        found = self.checkpoints.latest()
        if found is None:
            raise RLGraphError(f"--resume: no checkpoint in '{self.logdir}'.")
        path, state = found
        theirs = state.get("metadata", {})
        if theirs.get("config_hash") != self.metadata.get("config_hash"):
            raise RLGraphError(f"--resume: the checkpoint in '{path}' was written for another config; start a new "
                               f"logdir or use the same config.")
        if "environment" in theirs and "environment" in self.metadata and \
                theirs["environment"] != self.metadata["environment"]:
            raise RLGraphError(f"--resume: the checkpoint in '{path}' was written with another environment_spec (or "
                               f"--env): {theirs['environment']!r}, this run has {self.metadata['environment']!r}.")
        self.engine.load(os.path.join(path, "model"))  # Checkpoints are backend-neutral: any backend continues.
        if theirs.get("backend") not in (None, self.metadata.get("backend")):
            logger.info("Continuing a run of backend '%s' on '%s'.", theirs["backend"], self.metadata.get("backend"))
        self.state.update(state["state"])
        logger.info("Resumed from %s at %d env steps.", path, self.state["env_steps"])

    def save_checkpoint(self):
        """Writes model and counters as a new checkpoint (``CheckpointStore.save``); the previous one stays
        current until the new one is complete."""
        path = self.checkpoints.save(self.engine.store, {"state": self.state, "metadata": self.metadata})
        self._checkpointed_steps = self.state["env_steps"]
        return path

    # --- the run ------------------------------------------------------------------------------------------
    def mean_return(self, last=100):
        rets = self.state["episode_returns"][-last:]
        return float(np.mean(rets)) if rets else float("nan")

    def _done(self, elapsed):
        if self.max_steps is not None and self.state["env_steps"] >= self.max_steps:
            return True
        if self.max_seconds is not None and elapsed >= self.max_seconds:
            return True
        return self.stop_at_target and self.state["steps_to_target"] is not None

    def train(self):
        """Runs until the budget is spent (or a stop signal: Ctrl-C, SIGTERM, SIGHUP); returns the summary dict.

        A stop signal during a chunk of training is answered at the chunk's end (``stop_signals``): the checkpoint
        written then holds counters, model, optimizer, replay and random states of one moment, so ``--resume``
        continues as the uninterrupted run would. One during an evaluation abandons it at once (the run's state is
        that of before it).
        """
        if not self._lock.held:  # (A second train() of this trainer.)
            self._lock = run_lock.acquire(self.logdir)
        stop_signals.new_run()
        try:
            with stop_signals.safe_points(lambda: self.activity):
                return self._train()
        finally:
            self._lock.release()

    def _train(self):
        from tqdm import tqdm

        writer = open_loggers(self.loggers, self.logdir, params=self.params, resume=self.resumed)
        self.trackers = writer.describe()
        start = time.perf_counter() - self.state["wall_seconds"]
        last_checkpoint = time.perf_counter()
        last_status = time.perf_counter()
        recent = deque(maxlen=20)
        bar = tqdm(total=self.max_steps, initial=self.state["env_steps"], unit="step", disable=not self.progress,
                   dynamic_ncols=True, mininterval=0.5)
        interrupted = consistent = False
        if self._done(time.perf_counter() - start):
            reason = ("it already reached its target at step %d" % self.state["steps_to_target"]
                      if self.stop_at_target and self.state["steps_to_target"] is not None else
                      "its budget is already spent (%d env steps, %.0f s)" % (self.state["env_steps"],
                                                                          self.state["wall_seconds"]))
            logger.warning("Nothing to train in %s: %s. Raise --steps/--seconds (or set train_spec.stop_at_target "
                           "to false) to train on.", self.logdir, reason)
            self.nothing_trained = reason
        try:
            while not self._done(time.perf_counter() - start) and stop_signals.requested() is None:
                chunk = self.chunk_steps
                if self.max_steps is not None:
                    chunk = max(1, min(chunk, self.max_steps - self.state["env_steps"]))
                t0 = time.perf_counter()
                self._running_chunk = chunk
                out = self.engine.run(chunk)
                self._running_chunk = None
                dt = time.perf_counter() - t0
                self._record(out, writer, start)
                if not self._graph_written:
                    self._write_graph()
                if self.evaluator is not None and stop_signals.requested() is None and \
                        self.state["env_steps"] - self.state["last_eval_step"] >= self.eval_every_steps:
                    with stop_signals.interruptible():  # (Abandoned, it leaves the state of before it.)
                        self._evaluate(writer, start)
                recent.append((out["env_steps"], dt))
                rate = sum(s for s, _ in recent) / max(sum(t for _, t in recent), 1e-9)
                writer.add_scalar("perf/env_steps_per_second", rate, self.state["env_steps"])
                bar.update(out["env_steps"])
                for key, value in out.get("scalars", {}).items():
                    writer.add_scalar(key, value, self.state["env_steps"])
                loss = next((r["loss"] for r in reversed(out["results"]) if "loss" in r), None)
                bar.set_postfix(steps_s=f"{rate:,.0f}", episodes=self.state["episodes"],
                                mean_return=f"{self.mean_return():.1f}",
                                loss="-" if loss is None else f"{float(loss):.4g}", refresh=False)
                writer.flush()
                if self.progress_mode == "status" and \
                        time.perf_counter() - last_status >= self.status_every_seconds:
                    self._log_status(rate, time.perf_counter() - start)
                    last_status = time.perf_counter()
                if time.perf_counter() - last_checkpoint >= self.checkpoint_every_seconds and \
                        stop_signals.requested() is None:
                    self.state["wall_seconds"] = time.perf_counter() - start
                    self.activity = "a checkpoint write"
                    self.save_checkpoint()
                    self.activity = "training"
                    last_checkpoint = time.perf_counter()
            if stop_signals.requested() is not None:
                # A stop signal, answered here, between two chunks: everything the checkpoint holds is of now.
                signum, during = stop_signals.take()
                interrupted = consistent = True
                self.interrupted_by = stop_signals.signal_name(signum)
                self.interrupted_during = during or self.activity
        except KeyboardInterrupt:
            interrupted = True
            self.interrupted_by = stop_signals.signal_name(stop_signals.received())
            self.interrupted_during = self.activity
            # Outside a chunk (an evaluation, the bookkeeping between chunks) the state is of one moment; inside
            # one (a forced stop, or a KeyboardInterrupt that no stop handler held back) the model is ahead of the
            # counters: no checkpoint of that.
            consistent = self._running_chunk is None and not stop_signals.forced()
            self._running_chunk = None
        except Exception as e:
            if self._running_chunk is None or stop_signals.requested() is None:
                # A failing run writes no checkpoint: the last good one stays current.
                bar.close()
                writer.close("failed")
                self._raise_if_diverged(e)
                raise
            # A stop signal came during the chunk, and the engine failed before the chunk's end (its other
            # processes may have got the signal too: a terminal's Ctrl-C or a scheduler's SIGTERM reaches the
            # whole process group): the run stops as asked, without a checkpoint of the half-done chunk.
            signum, during = stop_signals.take()
            logger.warning("After %s, the chunk of training in progress failed (%s: %s).",
                           stop_signals.signal_name(signum), type(e).__name__, e)
            interrupted, consistent = True, False
            self.interrupted_by = stop_signals.signal_name(signum)
            self.interrupted_during = during or self.activity
            self._running_chunk = None
        except BaseException:
            # (Not a stop signal: the process is told to end, e.g. a sweep's scheduler stopping a trial.)
            bar.close()
            writer.close("killed")
            raise
        bar.close()
        try:
            self.state["wall_seconds"] = time.perf_counter() - start
            if interrupted:
                # (The command line says in one line what was kept, once the run's processes are stopped.)
                self.activity = "the checkpoint write after the interrupt"
                if not consistent:
                    logger.warning("Stopped inside a chunk of training: no checkpoint of it (its model is ahead of "
                                   "its counters). %s", self._checkpoint_note())
                elif self._checkpointed_steps == self.state["env_steps"] and self.checkpoints.exists():
                    logger.info("Interrupted during %s: the checkpoint of env step %d is current.",
                                self.interrupted_during, self.state["env_steps"])
                else:
                    logger.info("Interrupted during %s: writing a checkpoint to %s.", self.interrupted_during,
                                self.checkpoint_dir)
                    self.save_checkpoint()
            else:
                self.activity = "the final checkpoint write"
                self.save_checkpoint()
            self.activity = "writing the run's summary"
        finally:
            writer.close("interrupted" if interrupted else "finished")
        if self._graph_written:
            self._write_graph()  # The graphs of API methods first called after the first chunk.
        return self._finish(interrupted)

    def _log_status(self, rate, elapsed):
        """One status line (a run without a progress bar): steps, steps/s, recent return, last evaluation."""
        st = self.state
        total = f"/{self.max_steps:,}" if self.max_steps is not None else ""
        evaluation = st["evaluations"][-1] if st["evaluations"] else None
        status_logger.info("%s: %s%s env steps, %s steps/s, %d episodes, mean return (last 100) %.1f, "
                           "last evaluation %s, %.0f s", self.logdir, f"{st['env_steps']:,}", total, f"{rate:,.0f}",
                           st["episodes"], self.mean_return(), "-" if evaluation is None else
                           f"{evaluation[2]:.1f} at {evaluation[0]:,} steps", elapsed)

    def _write_graph(self):
        """The learner's graph beside the run (``graph.txt``; TF: TensorBoard's Graphs tab, under ``graphs/``),
        written after the first chunk, off the start-up path, and again at the end of the run for the API methods
        first called (traced) since. Nothing is traced for it. A failure here only warns."""
        self._graph_written = True
        agent = self.engine.agent
        if agent is None:
            return
        try:
            traced = {name for name, _ in getattr(agent.executor, "concrete_functions", {})}
            from rlgraph.executors.graph_summary import write_graph_summaries
            write_graph_summaries(agent.executor, self.logdir, trace=False, exclude=self._graphs_written)
            self._graphs_written |= traced
        except Exception as e:  # noqa: BLE001 - a missing view must not end a run.
            logger.warning("Could not write the graph summaries to %s: %s", self.logdir, e)

    def _checkpoint_note(self):
        if self.checkpoints.exists():
            return f"No checkpoint was written; the last good one in '{self.logdir}' stays current."
        return "No checkpoint was written."

    def _raise_if_diverged(self, error):
        """Turns an error of a run whose weights went non-finite into one that names the likely cause."""
        if isinstance(error, RLGraphDivergenceError):
            return
        agent = self.engine.agent
        try:
            weights = agent.get_weights() if agent is not None else {}
            bad = [k for k, v in weights.items() if not np.all(np.isfinite(np.asarray(v, dtype=np.float64)))]
        except Exception:  # (The agent may be in no state to answer; the original error stands.)
            return
        if bad:
            # The error came from inside a chunk: the steps it had made are not counted yet (the engine reports
            # them when the chunk returns), so name the range of the chunk, not its start as if nothing ran.
            done, chunk = self.state["env_steps"], self._running_chunk
            when = f"between env steps {done} and {done + chunk}" if chunk else f"after env step {done}"
            raise RLGraphDivergenceError(
                f"training diverged {when}: weights {bad[:3]} hold NaN or inf "
                f"(then: {type(error).__name__}: {error}). The usual cause is a learning rate far too high "
                f"(optimizer_spec.learning_rate). {self._checkpoint_note()}") from error

    def _record(self, out, writer, start):
        st = self.state
        st["env_steps"] += int(out["env_steps"])
        for i, result in enumerate(out["results"]):
            for key, value in result.items():
                if "loss" in key and not _finite(value):
                    raise RLGraphDivergenceError(
                        f"training diverged at update {st['updates'] + i + 1} (env step {st['env_steps']}): "
                        f"{key} is {value!r}. The usual cause is a learning rate far too high "
                        f"(optimizer_spec.learning_rate). {self._checkpoint_note()}")
        st["updates"] += len(out["results"])
        for ret, length in out["episodes"]:
            st["episodes"] += 1
            st["episode_returns"].append(float(ret))
            st["episode_steps"].append(st["env_steps"])
            writer.add_scalar("episode/return", float(ret), st["env_steps"])
            writer.add_scalar("episode/length", int(length), st["env_steps"])
        if out["episodes"]:
            writer.add_scalar("episode/mean_return_100", self.mean_return(), st["env_steps"])
        for key in sorted({k for r in out["results"] for k in r}):
            values = [float(np.mean(r[key])) for r in out["results"] if key in r]
            writer.add_scalar(f"update/{key}", float(np.mean(values)), st["env_steps"])
        if (self.evaluator is None and self.target_return is not None and st["steps_to_target"] is None
                and len(st["episode_returns"]) >= 20 and self.mean_return() >= self.target_return):
            st["steps_to_target"] = st["env_steps"]
            st["seconds_to_target"] = time.perf_counter() - start
            st["target_reached_unix"] = time.time()

    def _evaluate(self, writer, start):
        st = self.state
        self.activity = "a periodic evaluation"
        returns = list(self.evaluator())
        mean = float(np.mean(returns))
        if self.target_return is not None and st["steps_to_target"] is None and mean >= self.target_return:
            # Confirm with as many episodes again: a lucky estimate of a marginal policy must not count.
            returns += list(self.evaluator())
            mean = float(np.mean(returns))
        st["last_eval_step"] = st["env_steps"]
        st["evaluations"].append((st["env_steps"], round(time.perf_counter() - start, 3), mean))
        writer.add_scalar("evaluation/mean_return", mean, st["env_steps"])
        self.activity = "training"
        if self.target_return is not None and st["steps_to_target"] is None and mean >= self.target_return:
            st["steps_to_target"] = st["env_steps"]
            st["seconds_to_target"] = time.perf_counter() - start
            st["target_reached_unix"] = time.time()

    def write_summary(self, summary):
        """Writes ``summary.json`` into the logdir."""
        with open(os.path.join(self.logdir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, default=_jsonable)

    def _finish(self, interrupted):
        st = self.state
        summary = dict(self.metadata, env_steps=st["env_steps"], wall_seconds=round(st["wall_seconds"], 3),
                       episodes=st["episodes"], updates=st["updates"],
                       final_mean_return=None if not st["episode_returns"] else round(self.mean_return(), 3),
                       target_return=self.target_return, seconds_to_target=st["seconds_to_target"],
                       steps_to_target=st["steps_to_target"], target_reached_unix=st.get("target_reached_unix"),
                       env_steps_per_second=round(st["env_steps"] / max(st["wall_seconds"], 1e-9), 1),
                       target_measured_on="greedy evaluation" if self.evaluator else "training episodes",
                       last_evaluation=st["evaluations"][-1] if st["evaluations"] else None,
                       interrupted=interrupted)
        if interrupted:
            summary["interrupted_during"] = self.interrupted_during
            if self.interrupted_by:
                summary["interrupted_by"] = self.interrupted_by
        if self.nothing_trained:
            summary["nothing_trained"] = self.nothing_trained
        if self.trackers:
            summary["trackers"] = self.trackers
        summary.update(self.engine.summary())
        self.write_summary(summary)
        plot_learning_curve(os.path.join(self.logdir, "learning_curve.png"), st["episode_steps"],
                            st["episode_returns"], self.target_return, evaluations=st["evaluations"],
                            title=f"{self.metadata.get('agent', '')} {self.metadata.get('env', '')}".strip())
        return summary


def _progress_mode(progress):
    """``Trainer(progress=...)`` as one of ``PROGRESS_MODES``."""
    if progress is None:
        return "bar" if sys.stderr.isatty() else "status"
    if progress is True:
        return "bar"
    if progress is False:
        return "quiet"
    if progress not in PROGRESS_MODES:
        raise RLGraphError(f"Trainer: progress must be one of {', '.join(PROGRESS_MODES)}, True, False or None, "
                           f"got {progress!r}.")
    return progress


def _finite(value):
    try:
        return bool(np.all(np.isfinite(np.asarray(value, dtype=np.float64))))
    except (TypeError, ValueError):
        return True


def _jsonable(value):
    """numpy scalars and arrays in summaries as plain JSON values."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
