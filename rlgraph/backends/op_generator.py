"""The random-number generator that graph functions draw from: their executor's own, per thread.

An executor holds one generator and makes it current while its graph functions run (PyTorch: at each call) or
are traced (TensorFlow), so that their random ops (exploration, sampling, a uniform replay's indices) draw from a
state the executor can save and restore, apart from every other executor in the process (an actor's and a
learner's in two threads, several agents in one process) and from the backend's global generator.
"""
import contextlib
import threading

_local = threading.local()


def _stack():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


@contextlib.contextmanager
def op_generator(generator):
    """Within the block (in this thread), ``current_op_generator()`` is ``generator``."""
    stack = _stack()
    stack.append(generator)
    try:
        yield generator
    finally:
        stack.pop()


def current_op_generator():
    """The generator of the innermost enclosing ``op_generator`` block (or ``drawing_from`` call), or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def drawing_from(owner, fn):
    """``fn`` made to run with ``owner.op_generator`` current (read at each call: it may be set after this wraps
    ``fn``); for the executors' hot call paths, cheaper than entering ``op_generator`` at each call."""
    def call(*args, **kwargs):
        stack = _stack()
        stack.append(owner.op_generator)
        try:
            return fn(*args, **kwargs)
        finally:
            stack.pop()
    return call
