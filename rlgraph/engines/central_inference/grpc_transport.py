"""Central inference over gRPC: actors on any machine, one bidirectional stream each.

Each actor opens one stream (``/rlgraph.CentralInference/Act``) to the server and sends a hello, then one
request per vector step, each answered by the step's actions. Messages follow ``wire``'s fixed layout of
raw arrays (dtype, shape, bytes); nothing from the network is unpickled. The server binds the loopback
address unless ``execution_spec.server_address`` says otherwise, checks an optional shared token (gRPC
metadata ``rlgraph-token``) and rejects, logs and drops a stream with a malformed or oversized message, a
wrong token or an unknown or already connected actor index; the server itself goes on. The token travels in
clear text: on untrusted networks, run the actors inside a VPN or an SSH tunnel.

The server's side (``GrpcTransport``) can start the actors as processes on this machine (as the engine does
by default) or wait for remote ones (``execution_spec.local_actors = false``; ``python -m
rlgraph.engines.central_inference.grpc_transport --help`` starts one); the actor's side
(``GrpcActorChannel``) implements ``ActorChannel`` for ``EnvActor``, the same actor loop as over shared memory.
"""
import argparse
import hmac
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures

import numpy as np

from rlgraph.engines.central_inference import wire
from rlgraph.engines.central_inference.env_actor import ActorChannel, EnvActor
from rlgraph.engines.central_inference.request import Request
from rlgraph.utils.errors import RLGraphError

logger = logging.getLogger(__name__)

SERVICE, METHOD = "rlgraph.CentralInference", "Act"
TOKEN_KEY = "rlgraph-token"
#: The environment variable that hands a local actor process the token (kept off the command line).
TOKEN_ENV = "RLGRAPH_CENTRAL_TOKEN"
#: Set in the environment of actor processes the server started.
LOCAL_ENV = "RLGRAPH_CENTRAL_LOCAL_ACTOR"
_MAX_HELLO = 4096


def _message_limit(num_envs, obs_leaves, action_shape, action_dtype):
    """The largest message of an actor with ``num_envs`` environments (observations twice, plus slack)."""
    per_env = sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize for shape, dtype in obs_leaves)
    action = int(np.prod(action_shape, dtype=np.int64)) * np.dtype(action_dtype).itemsize
    return 2 * num_envs * (per_env + action + 32) + 64 * 1024


class GrpcActorChannel(ActorChannel):
    """The actor's end of the gRPC transport: one stream to the server.

    Args:
        address: The server's ``HOST:PORT``.
        index: The actor's index (0..N-1; the server refuses one that is unknown or already connected).
        num_envs: The actor's environments (the server checks every message's arrays against it).
        token: The shared token, if the server wants one.
        connect_timeout: Seconds to wait for the server.
    """

    def __init__(self, address, index, num_envs, token=None, connect_timeout=60.0):
        import grpc

        self.grpc = grpc
        self.index, self.num_envs = int(index), int(num_envs)
        options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        self.channel = grpc.insecure_channel(address, options=options)
        grpc.channel_ready_future(self.channel).result(timeout=connect_timeout)
        stub = self.channel.stream_stream(f"/{SERVICE}/{METHOD}")
        self._outbox = queue.Queue()
        metadata = [(TOKEN_KEY, token)] if token else None
        self._responses = stub(iter(self._outbox.get, None), metadata=metadata)

    def hello(self, info):
        data = np.frombuffer(json.dumps(dict(info, index=self.index)).encode(), np.uint8)
        self._outbox.put(wire.encode(wire.HELLO, self.index, [data]))

    def send(self, obs, step=None, episodes=(), stats=None):
        import optree

        leaves = [np.asarray(x) for x in optree.tree_leaves(obs)]
        if step is None:
            self._outbox.put(wire.encode(wire.FIRST, self.index, leaves))
            return
        rewards, terminals, truncations, finished_ids, finished_final = step
        final = [np.asarray(x) for x in optree.tree_leaves(finished_final)] if len(finished_ids) else \
            [np.zeros((0,) + leaf.shape[1:], leaf.dtype) for leaf in leaves]
        episodes = list(episodes)[:self.num_envs]
        arrays = leaves + [np.asarray(rewards, np.float32), np.asarray(terminals, bool), np.asarray(truncations, bool),
                           np.asarray(finished_ids, np.int64)] + final + [
            np.asarray([r for r, _ in episodes], np.float64), np.asarray([n for _, n in episodes], np.int64),
            np.asarray(stats if stats is not None else (0.0, 0.0, 0.0), np.float64)]
        self._outbox.put(wire.encode(wire.STEP, self.index, arrays))

    def receive_actions(self):
        try:
            data = next(self._responses)
        except (StopIteration, self.grpc.RpcError) as e:
            if isinstance(e, self.grpc.RpcError) and e.code() != self.grpc.StatusCode.CANCELLED:
                logger.warning("Central inference actor %d: the server ended the stream (%s: %s).", self.index,
                               e.code().name, e.details())
            return None
        try:
            kind, _, arrays = wire.decode(data)
        except wire.WireError as e:
            logger.error("Central inference actor %d: a malformed answer from the server (%s); stopping.",
                         self.index, e)
            return None
        if kind != wire.ACTIONS or len(arrays) != 1 or arrays[0].shape[:1] != (self.num_envs,):
            logger.error("Central inference actor %d: an unexpected answer from the server; stopping.", self.index)
            return None
        return arrays[0]

    def close(self):
        self._outbox.put(None)
        self.channel.close()


def grpc_actor_main(argv=None):
    """An actor process: ``--server HOST:PORT --index I --env-kwargs JSON`` (or ``--config CONFIG --num-envs E
    --seed S``); the token comes from ``$RLGRAPH_CENTRAL_TOKEN``. No deep-learning backend is imported."""
    parser = argparse.ArgumentParser(prog="python -m rlgraph.engines.central_inference.grpc_transport",
                                     description="A central-inference actor: steps environments with actions "
                                                 "from an rlgraph inference server over gRPC.")
    parser.add_argument("--server", required=True, help="the server's HOST:PORT")
    parser.add_argument("--index", type=int, required=True, help="this actor's index (0..num_actors-1)")
    parser.add_argument("--env-kwargs", default=None, help="VectorEnv keywords as JSON")
    parser.add_argument("--config", default=None, help="a training config (its environment_spec)")
    parser.add_argument("--num-envs", type=int, default=None, help="with --config: this actor's environments")
    parser.add_argument("--seed", type=int, default=None, help="with --config: this actor's environment seed")
    parser.add_argument("--connect-timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    if os.environ.get(LOCAL_ENV):  # Started by the server: Ctrl-C is the learner's to handle; it then stops us.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        from rlgraph.utils.process_watchdog import watch_parent
        watch_parent(what="Central inference actor")  # A learner killed by SIGKILL takes its actors with it.
    if args.env_kwargs is not None:
        env_kwargs = json.loads(args.env_kwargs)
    elif args.config is not None:
        with open(args.config) as f:
            env_kwargs = dict(json.load(f)["environment_spec"])
        if args.num_envs is not None:
            env_kwargs["num_envs"] = args.num_envs
        if args.seed is not None:
            env_kwargs["seed"] = args.seed
    else:
        parser.error("give --env-kwargs or --config")
    channel = GrpcActorChannel(args.server, args.index, env_kwargs.get("num_envs", 1), os.environ.get(TOKEN_ENV),
                               args.connect_timeout)
    actor = EnvActor(channel, env_kwargs, args.index)
    try:
        actor.run()
    finally:
        actor.close()


class _Slot:
    """The server's view of one actor index: its stream, answers and (for a local actor) its process."""

    def __init__(self, index, num_envs):
        self.index, self.num_envs = index, num_envs
        self.process = None
        self.generation = 0  # Counts connections; a stale stream's end is ignored.
        self.connected = False
        self.info = None
        self.answers = None


class GrpcTransport:
    """The server's end of the gRPC transport: a gRPC server, one stream per actor, optional local actors.

    Args:
        env_counts: Environments of each actor (one entry per actor).
        obs_leaves: ``(shape, dtype)`` of each leaf of one observation.
        action_shape, action_dtype: Of one action.
        address: The ``HOST:PORT`` to bind (port 0: any free port); default ``127.0.0.1:0``.
        token: A shared token every actor must present (None: none).
        local_actors: ``start`` launches actor processes on this machine (else remote actors connect).
    """

    name = "grpc"

    def __init__(self, env_counts, obs_leaves, action_shape, action_dtype, address=None, token=None,
                 local_actors=True):
        import grpc

        self.grpc = grpc
        self.env_counts = [int(n) for n in env_counts]
        self.num_actors = len(self.env_counts)
        self.obs_leaves = [(tuple(shape), np.dtype(dtype)) for shape, dtype in obs_leaves]
        self.action_shape, self.action_dtype = tuple(action_shape), np.dtype(action_dtype)
        self.token = token
        self.local_actors = bool(local_actors)
        self.slots = [_Slot(i, n) for i, n in enumerate(self.env_counts)]
        self.max_bytes = max(_message_limit(n, self.obs_leaves, action_shape, action_dtype) for n in self.env_counts)
        self.inbox = queue.Queue()
        self.rejected = 0
        self._lock = threading.Lock()
        self.closed = False
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=self.num_actors + 4),
                                  options=[("grpc.max_receive_message_length", self.max_bytes),
                                           ("grpc.max_send_message_length", -1)],
                                  maximum_concurrent_rpcs=self.num_actors + 4)
        handler = grpc.method_handlers_generic_handler(SERVICE, {METHOD: grpc.stream_stream_rpc_method_handler(
            self._act)})
        self.server.add_generic_rpc_handlers((handler,))
        address = address or "127.0.0.1:0"
        host = address.rpartition(":")[0]
        try:
            port = self.server.add_insecure_port(address)
        except RuntimeError as e:
            raise RLGraphError(f"execution_spec.server_address: cannot bind {address!r} ({e}).") from None
        if not port:
            raise RLGraphError(f"execution_spec.server_address: cannot bind {address!r}.")
        self.address = f"{host}:{port}"
        self.server.start()

    # --- the stream of one actor (a gRPC thread) ------------------------------------------------------------
    def _reject(self, context, code, why):
        with self._lock:
            self.rejected += 1
        logger.warning("Central inference (gRPC): rejected a stream from %s: %s", context.peer(), why)
        context.abort(code, why)

    def _act(self, requests, context):
        grpc = self.grpc
        if self.token is not None:
            given = dict(context.invocation_metadata()).get(TOKEN_KEY, "")
            if not hmac.compare_digest(str(given).encode(), self.token.encode()):
                self._reject(context, grpc.StatusCode.UNAUTHENTICATED, "wrong or missing token")
        slot = generation = None
        try:
            first = next(requests, None)
            if first is None:
                return
            try:
                kind, index, arrays = wire.decode(first, _MAX_HELLO + 64)
                if kind != wire.HELLO or len(arrays) != 1 or arrays[0].dtype != np.uint8:
                    raise wire.WireError("the first message of a stream must be a hello")
                info = json.loads(arrays[0].tobytes().decode())
                if not isinstance(info, dict):
                    raise wire.WireError("a hello must hold a JSON object")
            except (wire.WireError, ValueError) as e:
                self._reject(context, grpc.StatusCode.INVALID_ARGUMENT, f"malformed hello ({e})")
            if not 0 <= index < self.num_actors:
                self._reject(context, grpc.StatusCode.NOT_FOUND,
                             f"unknown actor index {index} (the server has {self.num_actors} actors)")
            slot = self.slots[index]
            if info.get("num_envs") != slot.num_envs:
                self._reject(context, grpc.StatusCode.INVALID_ARGUMENT,
                             f"actor {index} has {info.get('num_envs')!r} environments; the server expects "
                             f"{slot.num_envs}")
            with self._lock:
                if slot.connected:
                    slot = None
                else:
                    slot.generation += 1
                    generation = slot.generation
                    slot.connected, slot.info, slot.answers = True, info, queue.Queue()
            if slot is None:
                self._reject(context, grpc.StatusCode.ALREADY_EXISTS, f"actor {index} is already connected")
            answers = slot.answers
            for data in requests:
                try:
                    request = self._request(slot, data)
                except wire.WireError as e:
                    self._reject(context, grpc.StatusCode.INVALID_ARGUMENT, f"actor {index}: {e}")
                self.inbox.put(request)
                actions = answers.get()
                if actions is None:  # stop
                    return
                yield wire.encode(wire.ACTIONS, index, [actions])
        finally:
            if generation is not None:
                with self._lock:
                    if slot.generation == generation:  # (a reconnection may replace it at once)
                        slot.connected, slot.answers = False, None
                self.inbox.put(("ended", slot.index, generation))

    def _request(self, slot, data):
        """A ``Request`` from a message of actor ``slot``, every array checked against the layout."""
        kind, index, arrays = wire.decode(data, self.max_bytes)
        if index != slot.index:
            raise wire.WireError(f"a message names actor {index} on the stream of actor {slot.index}")
        e, n = slot.num_envs, len(self.obs_leaves)

        def check(array, shape, dtype, what):
            if array.shape != tuple(shape) or array.dtype != dtype:
                raise wire.WireError(f"{what} has shape {array.shape} and dtype {array.dtype}; expected "
                                     f"{tuple(shape)} and {np.dtype(dtype)}")
            return array

        if kind == wire.FIRST:
            if len(arrays) != n:
                raise wire.WireError(f"a first request holds {n} arrays, not {len(arrays)}")
        elif kind != wire.STEP or len(arrays) != 2 * n + 7:
            raise wire.WireError(f"expected a step request of {2 * n + 7} arrays, got kind {kind!r} with "
                                 f"{len(arrays)}")
        obs = [check(a, (e,) + s, d, f"observation {i}")
               for i, (a, (s, d)) in enumerate(zip(arrays, self.obs_leaves))]
        if kind == wire.FIRST:
            return Request(slot.index, True, obs, received=time.perf_counter())
        rewards = check(arrays[n], (e,), np.float32, "rewards")
        terminals = check(arrays[n + 1], (e,), np.bool_, "terminals")
        truncations = check(arrays[n + 2], (e,), np.bool_, "truncations")
        ids = arrays[n + 3]
        if ids.ndim != 1 or ids.dtype != np.int64 or ids.size > e or (ids.size and (ids.min() < 0 or ids.max() >= e
                                                                                  or np.unique(ids).size != ids.size)):
            raise wire.WireError(f"finished environment ids must be unique int64 in [0, {e})")
        k = ids.size
        final = [check(a, (k,) + s, d, f"final observation {i}")
                 for i, (a, (s, d)) in enumerate(zip(arrays[n + 4:2 * n + 4], self.obs_leaves))]
        returns, lengths, stats = arrays[2 * n + 4:]
        if returns.ndim != 1 or returns.size > e or lengths.shape != returns.shape:
            raise wire.WireError("episode returns and lengths must be two 1-D arrays of equal length <= the "
                                 "environments")
        check(returns, returns.shape, np.float64, "episode returns")
        check(lengths, lengths.shape, np.int64, "episode lengths")
        check(stats, (3,), np.float64, "stats")
        if not (np.isfinite(rewards).all() and np.isfinite(stats).all()):
            raise wire.WireError("rewards and stats must be finite")
        return Request(slot.index, False, obs, rewards, terminals.astype(bool), truncations.astype(bool), ids,
                       final if k else None, list(zip(returns.tolist(), lengths.tolist())), tuple(stats.tolist()),
                       time.perf_counter())

    # --- actors ---------------------------------------------------------------------------------------------
    def start(self, index, env_kwargs):
        """Starts (or restarts) a local actor process ``index`` (with ``local_actors``; else the remote actor of
        that index is expected to connect)."""
        self.stop(index)
        if not self.local_actors:
            return
        try:
            env_json = json.dumps(dict(env_kwargs, num_envs=self.env_counts[index]))
        except TypeError as e:
            raise RLGraphError(f"Central inference: environment_spec must be JSON data to reach the actor "
                               f"processes ({e}).") from None
        env = dict(os.environ, **{LOCAL_ENV: "1"})
        if self.token is not None:
            env[TOKEN_ENV] = self.token
        # SIGINT ignored first, before the imports: a Ctrl-C to the process group is the learner's to handle.
        code = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); import sys; "
                "sys.argv[0] = 'rlgraph-env-actor'; from rlgraph.engines.central_inference."
                "grpc_transport import grpc_actor_main; grpc_actor_main()")
        self.slots[index].process = subprocess.Popen(
            [sys.executable, "-c", code, "--server", self.address, "--index", str(index), "--env-kwargs", env_json],
            env=env, close_fds=True)

    def stop(self, index):
        """Ends actor ``index``'s stream (and its local process)."""
        slot = self.slots[index]
        with self._lock:
            if slot.answers is not None:
                slot.answers.put(None)
            slot.connected, slot.info, slot.answers = False, None, None
            slot.generation += 1
        process, slot.process = slot.process, None
        if process is not None and process.poll() is None:
            process.kill()
            try:
                process.wait(5.0)
            except subprocess.TimeoutExpired:
                logger.warning("Central inference: actor %d (pid %d) did not end after SIGKILL.", index, process.pid)

    def pids(self):
        """Local actors' process ids (index order; None for a remote actor or a free slot)."""
        return [None if s.process is None else s.process.pid for s in self.slots]

    def info(self, index):
        return self.slots[index].info

    def ready(self, index):
        return self.slots[index].connected

    # --- requests and answers -------------------------------------------------------------------------------
    def poll(self, timeout):
        """Requests that arrived within ``timeout`` seconds; see ``ShmTransport.poll``."""
        items = []
        try:
            items.append(self.inbox.get(timeout=max(timeout, 0.0)) if timeout > 0 else self.inbox.get_nowait())
            while True:
                items.append(self.inbox.get_nowait())
        except queue.Empty:
            pass
        requests, dead = [], []
        for item in items:
            if isinstance(item, Request):
                slot = self.slots[item.index]
                if slot.connected:
                    requests.append(item)
                continue
            _, index, generation = item
            slot = self.slots[index]
            if generation == slot.generation:
                code = None if slot.process is None else slot.process.poll()
                dead.append((index, "its stream ended" + (f" (exit code {code})" if code is not None else ""), True))
        for slot in self.slots:  # A local actor that ended before it connected.
            if slot.process is not None and not slot.connected and slot.info is None and \
                    slot.process.poll() is not None and all(d[0] != slot.index for d in dead):
                dead.append((slot.index, f"its process ended (exit code {slot.process.returncode})", False))
                slot.process = None
        return requests, dead

    def reply(self, index, actions):
        slot = self.slots[index]
        answers = slot.answers
        if answers is not None:
            answers.put(np.ascontiguousarray(actions))

    def close(self):
        """Stops all actors and the gRPC server (idempotent)."""
        if self.closed:
            return
        self.closed = True
        for index in range(self.num_actors):
            self.stop(index)
        self.server.stop(grace=1.0).wait(5.0)


if __name__ == "__main__":
    grpc_actor_main()
