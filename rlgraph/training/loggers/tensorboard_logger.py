"""TensorBoard: the run's scalars as event files in its logdir (what ``rlgraph plot`` and TensorBoard read)."""
import sys
import time

from rlgraph.training.loggers.base import MetricLogger, metric_name
from rlgraph.utils.process_watchdog import interrupts_deferred


class ScalarWriter:
    """Buffers scalars and writes each step's as one TensorBoard event (``flush``, ``close``).

    tensorboardX hands every ``add_scalar`` to its writer thread through a process queue (about 60 us each):
    a run with many short episodes (two scalars each) would spend a large part of its time there. The events
    read back as the same scalars (tag, value, step), in the same order.

    Args:
        writer: A tensorboardX ``SummaryWriter``.
    """

    def __init__(self, writer):
        self.writer = writer
        self.pending = []  # (step, tag, value)

    def add_scalar(self, tag, value, step):
        self.pending.append((int(step), metric_name(tag), float(value)))

    def flush(self):
        """Writes the buffered scalars: one event per step."""
        if not self.pending:
            return
        from tensorboardX.proto.summary_pb2 import Summary
        by_step = {}
        for step, tag, value in self.pending:
            by_step.setdefault(step, []).append(Summary.Value(tag=tag, simple_value=value))
        self.pending = []
        file_writer = self.writer._get_file_writer()
        for step, values in by_step.items():
            file_writer.add_summary(Summary(value=values), step)

    def close(self):
        """Flushes and closes the writer."""
        try:
            self.flush()
        finally:
            self.writer.close()


def summary_writer_class():
    """tensorboardX's ``SummaryWriter``, imported without importing PyTorch where it is not loaded yet.

    tensorboardX imports torch at its import only to accept torch tensors as values (the trainer passes
    floats); on the TensorFlow backend that would add PyTorch's import (about a second) to every run's
    start-up. While tensorboardX is imported, ``import torch`` fails (a ``None`` entry in ``sys.modules``),
    which tensorboardX handles; the entry is removed right after, so torch stays importable.
    """
    if "tensorboardX" in sys.modules or "torch" in sys.modules:
        from tensorboardX import SummaryWriter
        return SummaryWriter
    sys.modules["torch"] = None
    try:
        from tensorboardX import SummaryWriter
    finally:
        if "torch" in sys.modules and sys.modules["torch"] is None:
            del sys.modules["torch"]
    return SummaryWriter


class TensorBoardLogger(MetricLogger):
    """TensorBoard event files in ``logdir`` (one file per session; ``run_records`` reads them back).

    Ctrl-C is held back while the writer opens, writes and closes (``interrupts_deferred``): tensorboardX hands
    events to its writer thread through a ``multiprocessing.Queue``, whose feeder thread a ``KeyboardInterrupt``
    in the middle of a ``put`` can leave stuck, and closing the writer then waits for its thread forever.

    Args:
        logdir: The run's logdir.
    """

    name = "tensorboard"

    def __init__(self, logdir):
        # tensorboardX names a file after the second it was opened and truncates a file of that name: a session
        # that starts within the same second as the last one (a short run resumed at once) would erase its events.
        with interrupts_deferred():
            self.writer = ScalarWriter(summary_writer_class()(logdir, filename_suffix=f".{time.time_ns()}"))

    def add_scalar(self, tag, value, step):
        self.writer.add_scalar(tag, value, step)

    def flush(self):
        with interrupts_deferred():
            self.writer.flush()

    def close(self, status="finished"):
        with interrupts_deferred():
            self.writer.close()
