"""How the processes of a run end: a parent-death watchdog, and Ctrl-C held back through steps that must finish.

A helper process of a run (an actor, a learner of rank > 0) ends by itself when the process that started it
dies, even by SIGKILL, so that a killed learner leaves nothing of its run behind. Two mechanisms, both installed
by ``watch_parent``: on Linux the kernel's ``PR_SET_PDEATHSIG`` (the process gets SIGTERM the moment its parent
dies), and everywhere a daemon thread that polls whether the watched process still lives (its parent changed,
or ``os.kill(pid, 0)`` fails) and then ends this process.

In the learner, ``interrupts_deferred`` holds Ctrl-C back while a step runs that must not stop half-way (a
shutdown that stops processes, a step of several learners in lockstep); the interrupt follows right after it.
"""
import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
import time

logger = logging.getLogger(__name__)

#: Seconds between two checks of the polling fallback.
POLL_SECONDS = 1.0

#: ``prctl`` option that sends a signal to this process when its parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def set_parent_death_signal(sig=signal.SIGTERM):
    """Asks the Linux kernel to send ``sig`` to this process when its parent dies; False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def pid_alive(pid):
    """Whether process ``pid`` exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def watch_parent(pid=None, what="process", poll_seconds=POLL_SECONDS, on_death=None):
    """Ends this process when process ``pid`` (default: the parent) dies.

    Args:
        pid: The process to watch (default: this process's parent, which also gets the kernel's death signal on
            Linux). Another pid (e.g. a Ray actor's driver) is watched by polling only.
        what: This process's role, for the log line.
        poll_seconds: Seconds between two checks of the polling thread.
        on_death: Called (in the watchdog thread) before the process ends; its errors are ignored.

    Returns:
        The watchdog thread (a daemon).
    """
    parent = os.getppid()
    if pid is None:
        pid = parent
        set_parent_death_signal(signal.SIGTERM)
        if not pid_alive(pid):  # It died before the signal was armed.
            os._exit(1)

    def watch():
        while True:
            time.sleep(poll_seconds)
            if (pid == parent and os.getppid() != parent) or not pid_alive(pid):
                logger.warning("%s %d: the process that started it (pid %d) is gone; exiting.", what, os.getpid(), pid)
                if on_death is not None:
                    try:
                        on_death()
                    except Exception:  # noqa: BLE001 - ending anyway.
                        pass
                os._exit(1)

    thread = threading.Thread(target=watch, name="rlgraph-parent-watchdog", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def interrupts_deferred():
    """Holds Ctrl-C (SIGINT) back while the block runs; an interrupt that came meanwhile is handed to the handler
    that was installed before (by default: ``KeyboardInterrupt`` raised) right after it. A no-op outside the
    main thread (only it gets signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        if callable(previous):
            previous(signal.SIGINT, None)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt


# --- a reaper for process trees that do not watch their parent (a local Ray) ------------------------------------
def _start_time(pid):
    """Process ``pid``'s start time (clock ticks after boot), or None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else int(fields[19])


def descendants(pid):
    """{pid: start time} of every process below ``pid`` (Linux: read from /proc; elsewhere empty)."""
    children = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            children.setdefault(int(fields[1]), []).append((int(name), int(fields[19])))
    out, todo = {}, [pid]
    while todo:
        for child, started in children.get(todo.pop(), []):
            if child not in out:
                out[child] = started
                todo.append(child)
    return out


def start_reaper(pid=None, poll_seconds=POLL_SECONDS):
    """Starts a small process that, once process ``pid`` (default: this one) is gone (even by SIGKILL), ends the
    processes that were below it (SIGTERM, then SIGKILL after 3 s). For children that would outlive their parent
    (a local Ray's agents wait on a GCS that died with it). Returns its ``subprocess.Popen``, or None where
    /proc is missing; stop it with ``stop_reaper`` when the tree is shut down normally."""
    import subprocess
    if not os.path.isdir("/proc"):
        return None
    code = ("import sys; from rlgraph.utils.process_watchdog import reaper_main; "
            "reaper_main(int(sys.argv[1]), float(sys.argv[2]))")
    return subprocess.Popen([sys.executable, "-c", code, str(pid or os.getpid()), str(poll_seconds)],
                            stdin=subprocess.DEVNULL, start_new_session=True)  # (Ctrl-C is not its to handle.)


def stop_reaper(process):
    """Ends a reaper of ``start_reaper`` (None: nothing to do)."""
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()


def reaper_main(pid, poll_seconds=POLL_SECONDS):
    """The reaper's loop: notes the processes below ``pid`` while it lives, then ends those still running."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    me = os.getpid()
    known = {}
    while pid_alive(pid):
        known.update({p: t for p, t in descendants(pid).items() if p != me})
        time.sleep(poll_seconds)
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 0.0)):
        alive = [p for p, started in known.items() if _start_time(p) == started]
        for p in alive:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [p for p in alive if _start_time(p) == known[p]]
