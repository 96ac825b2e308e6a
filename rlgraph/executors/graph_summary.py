"""The built graph where a user looks for it: placement text beside the run, TF graphs in TensorBoard.

``write_graph_summaries(executor, logdir)`` writes ``logdir/graph.txt`` (the meta graph's ``describe()``: every
API method's call tree with the spaces, and for the update methods of a device strategy their towers, devices
and learner processes) and, on TensorFlow, the graph of every API method (or of those traced so far) to
``logdir/graphs/<api method>/`` for TensorBoard's Graphs tab, where the towers' ops carry their devices
(colour by "Device").
"""
import logging
import os

logger = logging.getLogger(__name__)

#: The file beside a run that holds the meta graph's description.
GRAPH_TEXT = "graph.txt"


def write_graph_summaries(executor, logdir, trace=True, exclude=()):
    """Writes ``executor``'s graph description (and, on TF, its traced graphs) under ``logdir``.

    Args:
        executor: A built graph executor.
        logdir: Where to write.
        trace: Trace the API methods not traced yet first (TF traces a method on its first call), so that every
            method's graph is written; False: only the graphs traced so far (a run's, without tracing more).
        exclude: API methods whose graphs not to write (written before).

    Returns:
        The description text (also in ``logdir/graph.txt``).
    """
    text = executor.meta_graph.describe()
    os.makedirs(logdir, exist_ok=True)
    with open(os.path.join(logdir, GRAPH_TEXT), "w") as f:
        f.write(text + "\n")
    if trace:
        executor.trace()
    functions = getattr(executor, "concrete_functions", None)
    if functions:
        from rlgraph.utils.backend import tf
        done = set(exclude)
        for (name, _), function in functions.items():
            if name in done:
                continue
            done.add(name)
            writer = tf.summary.create_file_writer(os.path.join(logdir, "graphs", name))
            try:
                with writer.as_default():
                    tf.summary.graph(function.graph)
            finally:
                writer.close()
    return text


__all__ = ["GRAPH_TEXT", "write_graph_summaries"]
