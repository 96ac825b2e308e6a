"""One writer per run directory: a run holds an exclusive lock on ``LOGDIR/.lock`` while it writes there.

The lock is an ``flock`` on that file, which the operating system releases when the process ends, however it
ends (even by SIGKILL): a lock is never stale. The file names the holder's pid, so that a refused run can say
who holds it. Within one process the lock is shared (the runner and its trainer both hold it); processes this
one forks do not keep it (their copy of the descriptor is closed), nor do programs it starts (close-on-exec).
On a filesystem without locks the run goes on unlocked, with a warning.
"""
import errno
import logging
import os
import threading
import weakref

from rlgraph.utils.errors import RLGraphError
from rlgraph.utils.process_watchdog import pid_alive

logger = logging.getLogger(__name__)

#: The lock file in a run's logdir.
LOCK_FILE = ".lock"

_held = {}  # realpath of a logdir -> [descriptor or None (unlocked filesystem), holders]
_guard = threading.Lock()


class RunDirectoryInUse(RLGraphError):
    """Another process writes into the run directory (it holds its lock).

    Attributes:
        logdir: The run directory.
        pid: The holder's pid as its lock file names it (None if unreadable).
    """

    def __init__(self, message, logdir, pid):
        super().__init__(message)
        self.logdir, self.pid = logdir, pid


def _holder_pid(fd):
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def _refusal(logdir, pid):
    if pid is None:
        return (f"logdir '{logdir}' is in use by another run (its lock file {os.path.join(logdir, LOCK_FILE)} names "
                f"no pid yet); one run writes into a run directory at a time: wait for it to end, or choose another "
                f"--logdir.")
    if not pid_alive(pid):
        return (f"logdir '{logdir}' is still locked by processes that the run of pid {pid} (no longer running) "
                f"started; wait for them to end (they stop within seconds of their run), or choose another --logdir.")
    return (f"logdir '{logdir}' is in use: the run of pid {pid} writes into it (one run per run directory); wait "
            f"for it to end or stop it (kill {pid}), or choose another --logdir.")


class RunLock:
    """This process's hold on a run directory's lock (``acquire``); ``release`` (idempotent; also when the object
    is collected) gives it up, and the lock ends with its last holder in this process."""

    def __init__(self, key, logdir):
        self.key, self.logdir = key, logdir
        self._finalizer = weakref.finalize(self, _release, key)

    @property
    def held(self):
        return self._finalizer.alive

    def release(self):
        self._finalizer()


def acquire(logdir):
    """Takes the lock of the run directory ``logdir`` (which must exist) for this process.

    Returns:
        A ``RunLock``.

    Raises:
        RunDirectoryInUse: Another process holds it (named by its pid).
        RLGraphError: The lock file cannot be created (an unwritable logdir).
    """
    key = os.path.realpath(logdir)
    with _guard:
        if key in _held:
            _held[key][1] += 1
            return RunLock(key, logdir)
        _held[key] = [_lock(key, logdir), 1]
        return RunLock(key, logdir)


def _lock(key, logdir):
    """The descriptor of ``key``'s lock file, locked by this process (None on a filesystem without locks)."""
    import fcntl
    path = os.path.join(key, LOCK_FILE)
    for _ in range(20):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise RLGraphError(f"logdir '{logdir}': its lock file {path} cannot be created: "
                               f"{e.strerror or e}.") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                pid = _holder_pid(fd)
                os.close(fd)
                raise RunDirectoryInUse(_refusal(logdir, pid), logdir, pid) from None
            os.close(fd)
            logger.warning("logdir '%s' cannot be locked (%s): a second run writing into it would not be refused.",
                           logdir, e.strerror or e)
            return None
        # Its previous holder removes the file as it lets go: a descriptor of a removed file locks nothing.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        return fd
    raise RLGraphError(f"logdir '{logdir}': its lock file {path} keeps being replaced; is another program removing it?")


def _release(key):
    with _guard:
        entry = _held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _held[key]
        fd = entry[0]
    if fd is None:
        return
    try:
        os.unlink(os.path.join(key, LOCK_FILE))  # (While locked: nobody else can hold this file.)
    except OSError:
        pass
    os.close(fd)  # Releases the lock.


def _forget_in_child():
    """In a forked child: closes its copies of this process's lock descriptors (the lock stays the parent's)."""
    global _guard
    _guard = threading.Lock()  # (Another thread of the parent may have held it at the fork.)
    for entry in _held.values():
        if entry[0] is not None:
            try:
                os.close(entry[0])
            except OSError:
                pass
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
