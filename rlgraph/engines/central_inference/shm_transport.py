"""Central inference over shared memory: actor processes on this machine, one shared block and one pipe each.

Each actor owns one ``multiprocessing.shared_memory`` block holding fixed arrays (observations, the step's
rewards and episode-end flags, the final observations of finished episodes, finished-episode statistics, and
the actions coming back). Per vector step one byte goes each way over a pipe (the signal); no array is
pickled on the hot path. The server's side (``ShmTransport``) creates the blocks, starts the actor
processes and turns what arrived into ``Request`` objects; the actor's side (``ShmActorChannel``) implements
``ActorChannel`` for ``EnvActor``.

Actor processes are fresh interpreters (``python -c``, like multiprocessing's "spawn" but without re-running
the launching script): they never inherit a deep-learning backend from the learner's process, and a script
that imports one at its top (or lacks an ``if __name__ == "__main__"`` guard) does not run again in them.
Their pipe is a socket pair passed by file descriptor (POSIX).
"""
import json
import logging
import multiprocessing.connection
import os
import signal
import socket
import subprocess
import sys
import time
from multiprocessing import shared_memory

import numpy as np
import optree

from rlgraph.engines.central_inference.env_actor import ActorChannel, EnvActor
from rlgraph.engines.central_inference.request import Request
from rlgraph.utils.errors import RLGraphError

logger = logging.getLogger(__name__)

# One-byte signals: actor -> server, then server -> actor.
FIRST, STEP, HELLO = b"F", b"S", b"H"
ACTIONS, QUIT = b"A", b"Q"
_ALIGN = 64


def block_layout(num_envs, obs_leaves, action_shape, action_dtype):
    """The arrays of one actor's shared block: a list of ``(name, shape, dtype str, offset)`` and its size.

    Args:
        num_envs: The actor's environments (E).
        obs_leaves: ``(shape, dtype)`` of each leaf of one observation.
        action_shape, action_dtype: Of one action.
    """
    e = int(num_envs)
    fields = [(f"obs{i}", (e,) + tuple(shape), dtype) for i, (shape, dtype) in enumerate(obs_leaves)]
    fields += [(f"final{i}", (e,) + tuple(shape), dtype) for i, (shape, dtype) in enumerate(obs_leaves)]
    fields += [("final_ids", (e,), "int64"), ("rewards", (e,), "float32"), ("terminals", (e,), "bool"),
               ("truncations", (e,), "bool"), ("episode_returns", (e,), "float64"),
               ("episode_lengths", (e,), "int64"),
               ("counts", (2,), "int64"),  # finished envs, finished episodes
               ("stats", (3,), "float64"),  # env seconds, wait seconds, vector steps
               ("actions", (e,) + tuple(action_shape), action_dtype)]
    layout, offset = [], 0
    for name, shape, dtype in fields:
        dtype = np.dtype(dtype).str
        layout.append((name, tuple(int(s) for s in shape), dtype, offset))
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        offset += -(-nbytes // _ALIGN) * _ALIGN
    return layout, max(offset, _ALIGN)


def block_views(buf, layout):
    """Numpy views of a shared block's arrays by name."""
    return {name: np.ndarray(shape, dtype=np.dtype(dtype), buffer=buf, offset=offset)
            for name, shape, dtype, offset in layout}


class ShmActorChannel(ActorChannel):
    """The actor's end of the shared-memory transport: writes requests into its block, signals over its pipe.

    Args:
        conn: The actor's end of the pipe (a ``multiprocessing.connection.Connection``).
        shm_name: The name of the actor's shared block.
        layout: ``block_layout``'s layout.
    """

    def __init__(self, conn, shm_name, layout):
        self.conn = conn
        self.shm = shared_memory.SharedMemory(name=shm_name)
        self.views = block_views(self.shm.buf, layout)
        self.num_leaves = sum(1 for name, *_ in layout if name.startswith("obs"))
        self.capacity = self.views["episode_returns"].shape[0]

    def hello(self, info):
        self.conn.send_bytes(HELLO + json.dumps(info).encode())

    def send(self, obs, step=None, episodes=(), stats=None):
        v = self.views
        leaves = optree.tree_leaves(obs)
        for i in range(self.num_leaves):
            v[f"obs{i}"][...] = leaves[i]
        if step is None:
            self.conn.send_bytes(FIRST)
            return
        rewards, terminals, truncations, finished_ids, finished_final = step
        v["rewards"][...] = rewards
        v["terminals"][...] = terminals
        v["truncations"][...] = truncations
        k = len(finished_ids)
        if k:
            v["final_ids"][:k] = finished_ids
            for i, leaf in enumerate(optree.tree_leaves(finished_final)):
                v[f"final{i}"][:k] = leaf
        n = min(len(episodes), self.capacity)
        if n:
            returns, lengths = zip(*episodes[:n])
            v["episode_returns"][:n] = returns
            v["episode_lengths"][:n] = lengths
        v["counts"][:] = (k, n)
        if stats is not None:
            v["stats"][:] = stats
        self.conn.send_bytes(STEP)

    def receive_actions(self):
        try:
            signal_byte = self.conn.recv_bytes()
        except (EOFError, OSError):  # The server went away.
            return None
        if signal_byte != ACTIONS:
            return None
        return self.views["actions"].copy()

    def close(self):
        self.views = None
        try:
            self.shm.close()
        except BufferError:  # A view still alive; the process ends anyway.
            pass
        self.conn.close()


def shm_actor_main(argv=None):
    """The entry point of an actor process: ``INDEX FD SHM_NAME LAYOUT_JSON ENV_KWARGS_JSON`` (what
    ``ShmTransport.start`` passes). No deep-learning backend is imported here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's to handle; it then stops us.
    from rlgraph.utils.process_watchdog import watch_parent
    watch_parent(what="Central inference actor")  # A learner killed by SIGKILL takes its actors with it.
    index, fd, shm_name, layout, env_kwargs = sys.argv[1:6] if argv is None else argv
    index = int(index)
    layout = [(name, tuple(shape), dtype, offset) for name, shape, dtype, offset in json.loads(layout)]
    conn = multiprocessing.connection.Connection(int(fd))
    # The server owns (and unlinks) the block. Python < 3.13 would register it with a resource tracker of this
    # process too, which unlinks it when the actor ends (a replacement then finds no block).
    from multiprocessing import resource_tracker
    resource_tracker.register = lambda *args, **kwargs: None
    channel = ShmActorChannel(conn, shm_name, layout)
    env_kwargs = json.loads(env_kwargs)
    actor = EnvActor(channel, env_kwargs, index)
    try:
        actor.run()
    finally:
        actor.close()


class _Slot:
    """The server's view of one actor: its process, pipe, shared block and the arrays in it."""

    def __init__(self, index, process, conn, shm, views):
        self.index, self.process, self.conn, self.shm, self.views = index, process, conn, shm, views
        self.info = None  # The actor's hello (pid, num_envs, backends).
        self.dead = False  # Reported dead once (its owner stops or replaces it).
        self.started = time.perf_counter()


#: What an actor process runs (arguments follow in ``sys.argv``). SIGINT is ignored first, before the imports: a
#: Ctrl-C to the process group is the learner's to handle (it then stops the actors), also while one still starts.
_ACTOR_CODE = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); import sys; "
               "sys.argv[0] = 'rlgraph-env-actor'; "
               "from rlgraph.engines.central_inference.shm_transport import shm_actor_main; shm_actor_main()")


class ShmTransport:
    """The server's end of the shared-memory transport: actor processes, their blocks and pipes.

    Args:
        env_counts: Environments of each actor (one entry per actor).
        obs_leaves: ``(shape, dtype)`` of each leaf of one observation.
        action_shape, action_dtype: Of one action.
    """

    name = "shm"

    def __init__(self, env_counts, obs_leaves, action_shape, action_dtype):
        if os.name != "posix":
            raise RLGraphError("The shared-memory transport of central inference needs a POSIX system.")
        self.env_counts = [int(n) for n in env_counts]
        self.num_actors = len(self.env_counts)
        self.layouts = [block_layout(n, obs_leaves, action_shape, action_dtype) for n in self.env_counts]
        self.num_leaves = len(obs_leaves)
        self.slots = [None] * self.num_actors
        self.blocks = []
        self.closed = False
        try:
            for layout, size in self.layouts:
                self.blocks.append(shared_memory.SharedMemory(create=True, size=size))
        except BaseException:
            self.close()
            raise

    # --- actors ---------------------------------------------------------------------------------------------
    def start(self, index, env_kwargs):
        """Starts (or restarts) actor ``index`` with ``VectorEnv`` keywords ``env_kwargs`` (E environments)."""
        if self.slots[index] is not None:
            self.stop(index)
        try:
            env_json = json.dumps(dict(env_kwargs, num_envs=self.env_counts[index]))
        except TypeError as e:
            raise RLGraphError(f"Central inference: environment_spec must be JSON data to reach the actor "
                               f"processes ({e}).") from None
        shm, layout = self.blocks[index], self.layouts[index][0]
        server_end, actor_end = socket.socketpair()
        try:
            fd = actor_end.fileno()
            layout_json = json.dumps([[name, list(shape), dtype, offset] for name, shape, dtype, offset in layout])
            process = subprocess.Popen([sys.executable, "-c", _ACTOR_CODE, str(index), str(fd), shm.name, layout_json,
                                        env_json], pass_fds=(fd,), close_fds=True)
        except BaseException:
            server_end.close()
            raise
        finally:
            actor_end.close()
        conn = multiprocessing.connection.Connection(server_end.detach())
        self.slots[index] = _Slot(index, process, conn, shm, block_views(shm.buf, layout))

    def stop(self, index, grace=0.0):
        """Ends actor ``index`` (asks it to quit, waits ``grace`` seconds, then kills it)."""
        slot, self.slots[index] = self.slots[index], None
        if slot is None:
            return
        if grace > 0 and slot.process.poll() is None:
            try:
                slot.conn.send_bytes(QUIT)
            except OSError:
                pass
            try:
                slot.process.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if slot.process.poll() is None:
            slot.process.kill()
            try:
                slot.process.wait(5.0)
            except subprocess.TimeoutExpired:
                logger.warning("Central inference: actor %d (pid %d) did not end after SIGKILL.", index,
                               slot.process.pid)
        slot.conn.close()
        slot.views = None

    def pids(self):
        """The actors' process ids (index order; None for a slot without a process)."""
        return [None if s is None else s.process.pid for s in self.slots]

    def info(self, index):
        """Actor ``index``'s hello (a dict with "pid", "num_envs", "backends"), or None before it arrived."""
        slot = self.slots[index]
        return None if slot is None else slot.info

    def ready(self, index):
        """Whether actor ``index`` has said hello (its environments exist)."""
        slot = self.slots[index]
        return slot is not None and slot.info is not None and not slot.dead

    # --- requests and answers -------------------------------------------------------------------------------
    def poll(self, timeout):
        """Requests that arrived within ``timeout`` seconds (those already waiting at once).

        Returns:
            ``(requests, dead)``: a list of ``Request`` and a list of ``(index, why, said_hello)`` for actors
            whose process ended or whose pipe broke (the caller stops and replaces them).
        """
        live = [s for s in self.slots if s is not None and not s.dead]
        if not live:
            time.sleep(min(timeout, 0.05))
            return [], []
        # A process that ends closes its end of the pipe: its connection turns readable (EOF).
        waitables = {s.conn: s for s in live}
        ready = multiprocessing.connection.wait(list(waitables), timeout)
        requests, dead = [], []
        now = time.perf_counter()
        for obj in ready:
            slot = waitables[obj]
            try:
                message = slot.conn.recv_bytes()
            except (EOFError, OSError) as e:
                try:
                    code = slot.process.wait(0.5)
                except subprocess.TimeoutExpired:
                    code = None
                slot.dead = True
                dead.append((slot.index, f"its process ended (exit code {code})" if code is not None
                             else f"its pipe broke ({type(e).__name__})", slot.info is not None))
                continue
            tag = message[:1]
            if tag == HELLO:
                slot.info = json.loads(message[1:].decode())
                # The first request follows at once; take it in this poll if it is there.
                if slot.conn.poll(0.0):
                    try:
                        message = slot.conn.recv_bytes()
                    except (EOFError, OSError):
                        continue
                    tag = message[:1]
                else:
                    continue
            if tag in (FIRST, STEP):
                requests.append(self._request(slot, tag == FIRST, now))
            else:
                logger.warning("Central inference: actor %d sent an unknown signal %r; ignored.", slot.index, tag)
        return requests, dead

    def _request(self, slot, first, now):
        v, n = slot.views, self.num_leaves
        obs = [v[f"obs{i}"] for i in range(n)]
        if first:
            return Request(slot.index, True, obs, received=now)
        k, num_episodes = (int(c) for c in v["counts"])
        finished_ids = v["final_ids"][:k].copy()
        final = [v[f"final{i}"][:k].copy() for i in range(n)] if k else None
        episodes = list(zip(v["episode_returns"][:num_episodes].tolist(), v["episode_lengths"][:num_episodes].tolist()))
        return Request(slot.index, False, obs, v["rewards"].copy(), v["terminals"].copy(), v["truncations"].copy(),
                       finished_ids, final, episodes, tuple(v["stats"].tolist()), now)

    def reply(self, index, actions):
        """Writes ``actions`` [E, ...] into actor ``index``'s block and signals it (a dead actor is skipped:
        the next ``poll`` reports it)."""
        slot = self.slots[index]
        if slot is None:
            return
        slot.views["actions"][...] = actions
        try:
            slot.conn.send_bytes(ACTIONS)
        except OSError:
            pass

    def close(self):
        """Stops all actors and frees the shared blocks (idempotent)."""
        if getattr(self, "closed", False):
            return
        for index, slot in enumerate(self.slots):
            if slot is not None:
                try:
                    slot.conn.send_bytes(QUIT)
                except OSError:
                    pass
        deadline = time.perf_counter() + 2.0
        for index in range(len(self.slots)):
            slot = self.slots[index]
            if slot is not None:
                try:
                    slot.process.wait(max(0.0, deadline - time.perf_counter()))
                except subprocess.TimeoutExpired:
                    pass
                self.stop(index)
        for shm in self.blocks:
            try:
                shm.close()
            except BufferError:
                pass
            try:
                shm.unlink()
            except FileNotFoundError:
                pass
        self.blocks = []
        self.closed = True
