"""The signals that stop a run: SIGINT (Ctrl-C), SIGTERM (``kill``, ``docker stop``, batch schedulers) and SIGHUP
(the terminal closed) all do what Ctrl-C does, in one place.

A stop signal either stops the run at once (a ``KeyboardInterrupt``: while the run is built, in an evaluation)
or, inside a *safe-point region* (``safe_points``: the trainer's loop, a run's shutdown), is only recorded: the
trainer then stops at its next safe point, between two chunks of training, so that the checkpoint it writes
holds counters, model, optimizer, replay and random states of one moment (``--resume`` continues exactly as an
uninterrupted run would). A second signal is ignored (said once), unless it comes ``FORCE_AFTER_SECONDS`` or
more after the first while the run still has not reached its safe point: that one stops the run at once, without
a new checkpoint (the last one stays current).

``rlgraph train`` installs the handler for all three (``handling_stop_signals``); a Python program that calls
``rlgraph.engines.runner.train`` or ``Trainer.train`` itself gets the same treatment of Ctrl-C (SIGINT, where its
handler is Python's default) for the duration of the training loop, and may wrap its call in
``handling_stop_signals()`` for SIGTERM and SIGHUP too. An inherited "ignore SIGHUP" (``nohup``) is kept.
"""
import contextlib
import logging
import signal
import threading
import time

logger = logging.getLogger(__name__)

#: The signals that stop a run like Ctrl-C does (SIGHUP where the platform has it).
STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None),
                                 getattr(signal, "SIGHUP", None)) if s is not None)

#: A repeated stop signal this many seconds (or more) after the first, while the run has not yet reached its safe
#: point, stops it at once (no new checkpoint); earlier repeats are ignored.
FORCE_AFTER_SECONDS = 10.0


def signal_name(signum):
    """``"SIGTERM"`` for ``signal.SIGTERM``, ...; None for None."""
    if signum is None:
        return None
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_status(signum):
    """The exit status of a run a stop signal ended: 128 + the signal's number, as shells report a process the
    signal ended (SIGINT 130, SIGTERM 143, SIGHUP 129); 130 where no signal is known (a ``KeyboardInterrupt``
    raised otherwise)."""
    return 128 + int(signum) if signum is not None else 130


class _StopState:
    """What this process knows about the stop signals of the run in progress (one per process: signals are)."""

    def __init__(self):
        self.reset()
        self.installed = {}  # signum -> the handler ``handling_stop_signals`` replaced (while it is active).
        self.say = None  # Callable taking one line (the command line prints it), else the log.

    def reset(self):
        self.depth = 0  # Nesting of safe-point regions; 0: a stop signal raises ``KeyboardInterrupt`` at once.
        self.activity = None  # Callable: what the run does now (the innermost region's).
        self.forget()

    def forget(self):
        """Forgets the stop signal of an earlier run."""
        self.signum = None  # The first stop signal (None: none came).
        self.at = None  # When it came (time.monotonic()).
        self.during = None  # What the run was doing then (the region's ``activity()``).
        self.handled = False  # Whether something acted on it (raised, or the trainer stopped at a safe point).
        self.repeat_said = False
        self.forced = False  # Whether a repeated signal stopped the run away from a safe point.


_state = _StopState()


def _say(line):
    """Says ``line`` from the handler. (A handler that writes to stderr while the code it interrupted writes there
    too, e.g. a progress bar, gets a "reentrant call" error: the line is then dropped, the run goes on.)"""
    try:
        if _state.say is not None:
            _state.say(line)
        else:
            logger.warning(line)
    except (RuntimeError, OSError, ValueError):
        pass


def _on_stop_signal(signum, frame):
    """The handler of every stop signal (see the module's docstring for the rule)."""
    st = _state
    if st.signum is not None:  # A repeat.
        if st.depth and not st.handled and time.monotonic() - st.at >= FORCE_AFTER_SECONDS:
            st.handled = st.forced = True
            _say(f"{signal_name(signum)} again: stopping at once, without a new checkpoint (the last one stays "
                 f"current).")
            raise KeyboardInterrupt
        if not st.repeat_said:
            st.repeat_said = True
            if st.depth and not st.handled:
                _say(f"still stopping at the end of the current chunk, then a checkpoint; a further signal "
                     f"{FORCE_AFTER_SECONDS:g} s or more after the first stops at once without one.")
            else:
                _say("still stopping the run's processes; further signals are ignored.")
        return
    st.signum, st.at = signum, time.monotonic()
    try:
        st.during = st.activity() if st.activity is not None else None
    except Exception:  # noqa: BLE001 - a handler must not fail on a description.
        st.during = None
    if st.depth:
        logger.info("%s: stopping at the end of the current chunk (then a checkpoint).", signal_name(signum))
        return
    st.handled = True
    raise KeyboardInterrupt


def _ours(handler):
    return handler is _on_stop_signal


def _in_main_thread():
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def handling_stop_signals(say=None, then_ignore=False):
    """Installs the stop handler for SIGINT, SIGTERM and SIGHUP while the block runs (``rlgraph train``'s whole
    run), restoring the handlers it found afterwards; a no-op outside the main thread (only it gets signals).

    Args:
        say: Callable taking the one line said about a repeated signal (default: the log, at WARNING).
        then_ignore: After a stop signal came, ignore the stop signals instead of restoring the handlers found
            (a process that exits right after the block: a repeat must not end it by the signal instead).
    """
    if not _in_main_thread() or _state.installed:
        yield
        return
    _state.reset()
    _state.say = say
    try:
        for signum in STOP_SIGNALS:
            previous = signal.getsignal(signum)
            if signum == getattr(signal, "SIGHUP", None) and previous == signal.SIG_IGN:
                continue  # ``nohup``: the run is meant to outlive its terminal.
            signal.signal(signum, _on_stop_signal)
            _state.installed[signum] = previous
        yield
    finally:
        stopped = then_ignore and _state.signum is not None
        for signum, previous in _state.installed.items():
            signal.signal(signum, signal.SIG_IGN if stopped else previous if previous is not None else signal.SIG_DFL)
        _state.installed = {}
        _state.say = None


def keep_handlers():
    """Re-installs the stop handler where a library replaced it since ``handling_stop_signals`` (``ray.init``
    sets its own SIGTERM handler, which would end the process without a checkpoint)."""
    if not _in_main_thread():
        return
    for signum in list(_state.installed):
        current = signal.getsignal(signum)
        if not _ours(current):
            logger.debug("Re-installing the stop handler of %s (replaced by %r).", signal_name(signum), current)
            signal.signal(signum, _on_stop_signal)


@contextlib.contextmanager
def safe_points(activity=None):
    """A region in which a stop signal is only recorded (``requested``): the code inside checks at its safe
    points and stops there. A signal still unanswered when the region ends raises ``KeyboardInterrupt`` then.

    Where ``handling_stop_signals`` is not active and SIGINT has Python's default handler, Ctrl-C is handled so
    for the region's duration (a Python program that trains). A no-op outside the main thread.

    Args:
        activity: Callable returning what the code does now (recorded with a signal, for its line).
    """
    if not _in_main_thread():
        yield
        return
    st = _state
    own_sigint = None
    if signal.SIGINT not in st.installed and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        own_sigint = signal.signal(signal.SIGINT, _on_stop_signal)
    keep_handlers()
    outer_activity = st.activity
    st.depth += 1
    if activity is not None:
        st.activity = activity
    try:
        yield
    finally:
        st.depth -= 1
        st.activity = outer_activity
        if own_sigint is not None:
            signal.signal(signal.SIGINT, own_sigint)
    if st.signum is not None and not st.handled and st.depth == 0:
        st.handled = True
        raise KeyboardInterrupt


@contextlib.contextmanager
def interruptible():
    """Inside a ``safe_points`` region: a part that a stop signal ends at once (``KeyboardInterrupt``), e.g. an
    evaluation, whose abandoning leaves the run's state as it was before it. A signal that came before raises
    at the start."""
    st = _state
    if not _in_main_thread() or st.depth == 0:
        yield
        return
    if st.signum is not None and not st.handled:
        st.handled = True
        raise KeyboardInterrupt
    depth, st.depth = st.depth, 0
    try:
        yield
    finally:
        st.depth = depth


def new_run():
    """Called as a run starts (``rlgraph.engines.runner.train``, ``Trainer.train``): a stop signal that an earlier
    run of this process answered is forgotten, so that the next one stops this run (a program that trains again
    after an interrupted run)."""
    if _state.signum is not None and _state.handled and _state.depth == 0:
        _state.forget()


def requested():
    """The stop signal that came and that nothing acted on yet (its number), else None."""
    return _state.signum if _state.signum is not None and not _state.handled else None


def take():
    """Marks the signal ``requested`` returned as acted on (the trainer stops at this safe point); returns
    ``(signum, what the run was doing when it came)``."""
    _state.handled = True
    return _state.signum, _state.during


def forced():
    """Whether a repeated signal stopped the run at once, away from a safe point (its state is then not of one
    moment: no checkpoint may be written of it)."""
    return _state.forced


def received():
    """The first stop signal of the run in progress (its number, acted on or not), else None."""
    return _state.signum
