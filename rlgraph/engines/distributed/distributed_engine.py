"""Distributed learners: N learner processes, each with its own environments, one set of weights."""
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time

from rlgraph.engines.distributed.control import ControlChannel, free_port
from rlgraph.engines.distributed.learner import build_learner, decode_state, encode_state
from rlgraph.training.engine import Engine
from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphError, RLGraphLearnerGroupError, RLGraphSpecError
from rlgraph.utils.run_state import load_run_state, save_run_state
from rlgraph.utils.user_modules import UserCode, check_json_environment
from rlgraph.utils.process_watchdog import interrupts_deferred

logger = logging.getLogger(__name__)

#: Where a checkpoint keeps the run state of learner r > 0 (learner 0's is the checkpoint's own).
LEARNER_STATE_DIR = "learner{rank}"


class DistributedEngine(Engine):
    """Learner 0 of a run of ``num_learners`` synchronous data-parallel learner processes.

    Every learner steps its own vector of environments (``envs_per_learner``, default the config's
    ``num_envs`` divided over the learners) with its own agent and learns on what it collected; the update
    API methods all-reduce their gradients over the learners (``tf.distribute.MultiWorkerMirroredStrategy``
    on TensorFlow, ``torch.distributed`` on PyTorch, ``jax.distributed`` on JAX: the ``distributed_sync`` device
    strategy), so all
    learners apply the same steps and keep one set of weights. Learner 0 runs in this process and is the
    ``Trainer``'s engine (progress, evaluation, checkpoints); the others follow its commands over a control
    channel (framed JSON and raw arrays over TCP, nothing unpickled). Without ``learner_addresses`` the other
    learners are started here as subprocesses on the loopback address; with them, each learner is started
    by the user (``rlgraph train CONFIG --engine distributed --learner-rank R`` on its machine) and learner 0
    waits ``learner_timeout_s`` for them.

    Checkpoints are written by learner 0: its model and run state, plus every other learner's run state
    (replay, partial trajectories, counters, RNG and environment states) under ``learner<r>/``, so a
    resumed run goes on as the stored one would have. A learner that dies or stops answering ends the run
    with ``RLGraphLearnerGroupError`` naming it (a synchronous all-reduce group cannot go on without it);
    the other learner processes are stopped, none is left behind.

    The user's own code travels to the learners started here: the modules the driver resolved the config's
    types and environment from and the gymnasium ids it registered (``rlgraph.utils.user_modules.UserCode``)
    are installed in each learner process before it builds. An environment creator (a callable) cannot travel:
    the learners are fresh interpreters configured with a JSON file.

    Args:
        config: The training config (a dict).
        env_kwargs: ``VectorEnv`` keywords of the run's environments.
        backend: "tf", "pytorch" or "jax" (JAX is refused before any learner starts only where JAX already ran
            in this process: ``jax.distributed`` must come first, ``process_group.check_group_backend``).
        spec: The ``ExecutionSpec`` (``num_learners``, ``learner_addresses``, ``envs_per_learner``,
            ``learner_timeout_s``).
        seed: The run's seed (learner r's environments get ``seed + 1000 r``, its agent ``seed + r``).
        checkpoint_replay: Store the replay memory's contents in checkpoints (``train_spec.checkpoint_replay``;
            every learner gets it with the start-up command).
    """

    def __init__(self, config, env_kwargs, backend, spec, seed=0, checkpoint_replay=True):
        from rlgraph.executors.process_group import check_group_backend, init_process_group
        check_group_backend(backend)  # Before any learner process starts.
        self.config, self.spec, self.seed = config, spec, int(seed)
        self.env_kwargs = dict(env_kwargs)
        self.backend = backend
        self.num_learners = spec.num_learners
        self.timeout = spec.learner_timeout_s
        self.processes_, self.channels = {}, {}
        self.learner_env_steps = [0] * self.num_learners  # Each learner's environment steps (resumed runs too).
        self._tmp = None
        self._closed = False
        self.checkpoint_replay = bool(checkpoint_replay)
        spawn = spec.learner_addresses is None
        self.user_code = None
        if spawn and self.num_learners > 1:
            check_json_environment(self.env_kwargs, "--engine distributed", "the learner processes")
            code = UserCode.of_run(config, self.env_kwargs)
            self.user_code = code.to_json("distributed engine") if code else None
        if spawn:
            self.addresses = [f"127.0.0.1:{free_port()}" for _ in range(self.num_learners)]
            control = ("127.0.0.1", free_port())
        else:
            self.addresses = list(spec.learner_addresses)
            host, port = self.addresses[0].rsplit(":", 1)
            control = (host, int(port) + 1)
            if f"{host}:{int(port) + 1}" in self.addresses:
                raise RLGraphSpecError(f"execution_spec.learner_addresses: learner 0's control channel uses its port "
                                       f"+ 1 ({host}:{int(port) + 1}), which another learner's address names; leave "
                                       f"that port free (e.g. ports two apart).")
        self.control_address = f"{control[0]}:{control[1]}"
        try:
            listener = _listen(*control)
            try:
                if spawn:
                    self._spawn(control)
                self._accept(listener)
            finally:
                listener.close()
            for channel in self.channels.values():
                channel.send({"cmd": "init", "checkpoint_replay": self.checkpoint_replay})
            init_process_group(backend, 0, self.num_learners, self.addresses, self.timeout,
                               all_reduce=spec.all_reduce)
            self.worker, self.agent = build_learner(config, self.env_kwargs, backend, spec, 0, seed,
                                                    checkpoint_replay=self.checkpoint_replay)
            self.env = self.worker.env
            for rank, channel in self.channels.items():
                self._expect(rank, channel.recv(self.timeout + 120.0), "ready")  # The followers' builds.
            self._broadcast_weights()
        except BaseException:
            self.close()
            raise

    # --- start ----------------------------------------------------------------------------------------------
    def _spawn(self, control):
        self._tmp = tempfile.mkdtemp(prefix="rlgraph-learners-")
        path = os.path.join(self._tmp, "config.json")
        execution = dict(self.config.get("execution_spec") or {}, num_learners=self.num_learners,
                         learner_addresses=self.addresses, learner_timeout_s=self.timeout)
        if self.spec.envs_per_learner:
            execution["envs_per_learner"] = self.spec.envs_per_learner
        with open(path, "w") as f:
            json.dump(dict(self.config, execution_spec=execution, environment_spec=self.env_kwargs), f)
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        for rank in range(1, self.num_learners):
            log = open(os.path.join(self._tmp, f"learner{rank}.log"), "wb")
            cmd = [sys.executable, "-m", "rlgraph.engines.distributed.learner_process", path, "--backend",
                   self.backend, "--rank", str(rank), "--seed", str(self.seed), "--control",
                   f"{control[0]}:{control[1]}"]
            if self.user_code is not None:
                cmd += ["--user-code", self.user_code]
            self.processes_[rank] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                                     start_new_session=True)
            log.close()
        logger.info("Started learners 1..%d (pids %s); their logs are in %s.", self.num_learners - 1,
                    [p.pid for p in self.processes_.values()], self._tmp)

    def _accept(self, listener):
        deadline = time.monotonic() + self.timeout
        while len(self.channels) < self.num_learners - 1:
            self._check_processes("while starting")
            listener.settimeout(max(0.05, min(0.5, deadline - time.monotonic())))
            try:
                sock, peer = listener.accept()
            except OSError:
                if time.monotonic() >= deadline:
                    missing = sorted(set(range(1, self.num_learners)) - set(self.channels))
                    raise RLGraphLearnerGroupError(
                        f"learners {missing} did not connect to learner 0's control channel at "
                        f"{self.control_address} within {self.timeout:g} s (execution_spec.learner_timeout_s); "
                        f"start each with `rlgraph train CONFIG --engine distributed --learner-rank R` and "
                        f"the same execution_spec.learner_addresses.") from None
                continue
            channel = ControlChannel(sock, f"learner at {peer[0]}:{peer[1]}")
            header, _ = channel.recv(self.timeout)
            rank = header.get("rank")
            if header.get("cmd") != "hello" or not isinstance(rank, int) or not 0 < rank < self.num_learners \
                    or rank in self.channels:
                channel.close()
                logger.warning("Refused a control connection from %s:%s (%s).", peer[0], peer[1], header)
                continue
            channel.peer = f"learner {rank}"
            self.channels[rank] = channel

    def _expect(self, rank, message, cmd):
        header, arrays = message
        if header.get("cmd") == "error":
            raise RLGraphLearnerGroupError(f"learner {rank} failed: {header.get('error')}")
        if header.get("cmd") != cmd:
            raise RLGraphLearnerGroupError(f"learner {rank} answered {header.get('cmd')!r} instead of {cmd!r}.")
        return header, arrays

    def _call_all(self, header, arrays=None, expect="ok", timeout=None):
        for channel in self.channels.values():
            channel.send(header, arrays)
        return {rank: self._expect(rank, self._recv(rank, timeout), expect) for rank in self.channels}

    def _recv(self, rank, timeout):
        try:
            return self.channels[rank].recv(timeout if timeout is not None else self.timeout)
        except RLGraphLearnerGroupError as e:
            raise self._failure(e) from None

    def _broadcast_weights(self):
        """Every learner starts from learner 0's variables (weights, optimizer slots, counters)."""
        self._call_all({"cmd": "set_weights"}, self.agent.executor.get_weights(trainable_only=False))

    # --- the engine interface ---------------------------------------------------------------------------------
    def run(self, num_env_steps):
        """Every learner runs ``ceil(num_env_steps / num_learners)`` environment steps (updates in lockstep)."""
        # Ctrl-C waits for the end of the step: the learners run it in lockstep, and one that left half-way would
        # leave the others in a gradient all-reduce (the run's last checkpoint follows the step).
        with interrupts_deferred():
            return self._run(num_env_steps)

    def _run(self, num_env_steps):
        per_learner = max(1, -(-int(num_env_steps) // self.num_learners))
        for channel in self.channels.values():
            channel.send({"cmd": "run", "steps": per_learner})
        try:
            out = self.worker.run(per_learner)
        except RLGraphLearnerGroupError as e:
            raise self._failure(e) from None
        self.learner_env_steps[0] = int(self.worker.env_steps)
        episodes = list(out["episodes"])
        env_steps = out["env_steps"]
        for rank in self.channels:
            header, _ = self._expect(rank, self._recv(rank, self.timeout), "ran")
            if header["updates"] != len(out["results"]):
                raise RLGraphLearnerGroupError(
                    f"learner {rank} made {header['updates']} updates where learner 0 made {len(out['results'])}: "
                    f"the learners fell out of step (their update schedules differ).")
            env_steps += header["env_steps"]
            self.learner_env_steps[rank] = int(header["total_env_steps"])
            episodes.extend((float(r), int(n)) for r, n in header["episodes"])
        return dict(env_steps=env_steps, episodes=episodes, results=out["results"])

    def evaluate(self, env, num_episodes):
        """Greedy returns of learner 0's weights (which every learner holds)."""
        return self.worker.evaluate(env, num_episodes)

    def store(self, path):
        """Learner 0's model and run state, and every other learner's run state under ``learner<r>/``."""
        with interrupts_deferred():  # (All learners' states or none: no answer left unread in a channel.)
            states = self._call_all({"cmd": "get_state"}, expect="state")
        for rank, (header, arrays) in states.items():
            directory = os.path.join(path, LEARNER_STATE_DIR.format(rank=rank))
            os.makedirs(directory, exist_ok=True)
            save_run_state(directory, decode_state(header["state"], arrays))
        self.worker.store(path)

    def load(self, path):
        """Restores learner 0 from ``path``, then every learner's variables and stored run state."""
        self.worker.load(path)
        self._broadcast_weights()
        for rank in self.channels:
            directory = os.path.join(path, LEARNER_STATE_DIR.format(rank=rank))
            state = load_run_state(directory) if os.path.isdir(directory) else None
            if state is None:
                raise RLGraphCheckpointError(
                    f"'{path}' holds no run state of learner {rank} ({directory}): it was written by a run with "
                    f"fewer learners; resume with --num-learners as stored.")
            tree, arrays = encode_state(state)
            self.channels[rank].send({"cmd": "set_state", "state": tree}, arrays)
            self._expect(rank, self._recv(rank, self.timeout), "ok")

    def summary(self):
        """The learners' count, environment steps and addresses."""
        return dict(num_learners=self.num_learners, learner_env_steps=list(self.learner_env_steps),
                    learner_addresses=list(self.addresses))

    def processes(self):
        """The learner processes started here, by rank (``{"learners": {rank: pid}}``)."""
        return dict(learners={rank: p.pid for rank, p in self.processes_.items()})

    # --- failures and shutdown --------------------------------------------------------------------------------
    def _check_processes(self, when):
        for rank, process in self.processes_.items():
            code = process.poll()
            if code is not None:
                raise RLGraphLearnerGroupError(f"learner {rank} (pid {process.pid}) exited with code {code} {when}"
                                               f"{self._log_tail(rank)}")

    def _failure(self, error, grace_s=3.0):
        """The error to raise for a failed collective or control call: names a learner that died, if one did.

        A killed learner's sockets close before the operating system reports its exit, so a collective can
        fail first: the learners started here get ``grace_s`` to show an exit before the error stays general.
        """
        deadline = time.monotonic() + (grace_s if self.processes_ else 0.0)
        while True:
            for rank, process in self.processes_.items():
                code = process.poll()
                if code is not None:
                    return RLGraphLearnerGroupError(f"learner {rank} (pid {process.pid}) died (exit code {code}); a "
                                                    f"synchronous learner group cannot go on without it: the run "
                                                    f"stops (continue from the last checkpoint with --resume)"
                                                    f"{self._log_tail(rank)}")
            if time.monotonic() >= deadline:
                return error if isinstance(error, RLGraphError) else RLGraphLearnerGroupError(str(error))
            time.sleep(0.05)

    def _log_tail(self, rank, lines=5):
        if self._tmp is None:
            return "."
        try:
            with open(os.path.join(self._tmp, f"learner{rank}.log"), errors="replace") as f:
                tail = [line.rstrip() for line in f.readlines() if line.strip()][-lines:]
        except OSError:
            return "."
        return "; its log ends:\n  " + "\n  ".join(tail) if tail else "."

    def close(self):
        """Stops every other learner (asks, then kills after a grace period) and leaves the group."""
        if self._closed:
            return
        self._closed = True
        for rank, channel in list(self.channels.items()):
            try:
                channel.send({"cmd": "stop"})
            except RLGraphError:
                pass
        deadline = time.monotonic() + 10.0
        for process in self.processes_.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10.0)
        for channel in self.channels.values():
            channel.close()
        env = getattr(self, "env", None)
        if env is not None and getattr(env, "close", None) is not None:
            env.close()
        from rlgraph.executors.process_group import destroy_process_group
        destroy_process_group()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


def _listen(host, port):
    import socket
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise RLGraphSpecError(f"execution_spec.learner_addresses: learner 0 cannot listen on {host}:{port} for its "
                               f"control channel (its port + 1): {e.strerror or e}.") from None
    sock.listen(64)
    return sock
