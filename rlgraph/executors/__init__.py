"""Executors: run a built component graph on a backend (and, later, across processes and machines)."""
from rlgraph.executors.graph_executor import GraphExecutor


def __getattr__(name):
    if name == "TensorFlowExecutor":
        from rlgraph.executors.tensorflow_executor import TensorFlowExecutor
        return TensorFlowExecutor
    if name == "PyTorchExecutor":
        from rlgraph.executors.pytorch_executor import PyTorchExecutor
        return PyTorchExecutor
    raise AttributeError(name)


__all__ = ["GraphExecutor", "TensorFlowExecutor", "PyTorchExecutor"]
