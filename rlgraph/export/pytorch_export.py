"""PyTorch runs' policies as TorchScript (``torch.jit.trace``) or ONNX (``torch.onnx``) files."""
import contextlib

from rlgraph.utils.errors import RLGraphBackendError


#: ONNX opset of exported models (onnxruntime 1.18+ runs it).
ONNX_OPSET = 17


def _module(greedy, named=False):
    """A ``torch.nn.Module`` around a ``GreedyPolicy``: float32 observations in, ``(actions, scores)`` out (with
    ``named``: the dict ``{"actions": ..., scores_name: ...}``).

    The agent's variables are the module's buffers, so that a trace refers to them as the module's state (written
    with it) instead of embedding them as constants.
    """
    import numpy as np
    import torch

    dtype = torch.from_numpy(np.zeros(0, greedy.state_space.dtype)).dtype
    name = greedy.scores_name

    class Greedy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for i, variable in enumerate(greedy.agent.executor.variables().values()):
                self.register_buffer(f"variable_{i}", variable)

        def forward(self, observations, *states):
            actions, scores, *next_states = greedy(observations.to(dtype), *states)
            out = [actions.to(torch.int64), scores.to(torch.float32)] + [s.to(torch.float32) for s in next_states]
            return dict(zip(output_names(greedy), out)) if named else tuple(out)

    return Greedy().eval()


@contextlib.contextmanager
def _frozen(agent):
    """The agent's variables without autograd while traced: they become the traced graph's constants."""
    import torch
    variables = [v for v in agent.executor.variables().values() if isinstance(v, torch.Tensor)]
    grads = [v.requires_grad for v in variables]
    try:
        for v in variables:
            v.requires_grad_(False)
        with torch.no_grad():
            yield
    finally:
        for v, g in zip(variables, grads):
            v.requires_grad_(g)


def output_names(greedy):
    """``actions``, the scores' name, and for a recurrent policy ``next_state_i`` per part of its state."""
    return ["actions", greedy.scores_name] + [f"next_{n}" for n in greedy.state_names]


def _example(greedy, batch=2):
    """Example inputs: observations, then (recurrent policies) a zero state per part."""
    import numpy as np
    import torch
    sample = greedy.state_space.with_batch_rank().sample(batch, rng=np.random.default_rng(0))
    states = [torch.zeros((batch,) + shape) for shape in greedy.state_shapes]
    return (torch.from_numpy(np.asarray(sample, np.float32)),) + tuple(states)


def export_torchscript(greedy, output):
    """Writes the policy as a TorchScript file (``torch.jit.load(output)(observations)`` returns
    ``{"actions": ..., scores_name: ...}``; a recurrent policy's takes ``(observations, state_0, ...)`` and also
    returns ``next_state_0, ...``)."""
    import torch

    with _frozen(greedy.agent), warnings_quiet():
        traced = torch.jit.trace(_module(greedy, named=True), _example(greedy), strict=False, check_trace=False)
        torch.jit.save(traced, output)
    return output


def export_onnx(greedy, output):
    """Writes the policy as an ONNX model: input ``observations`` (float32, ``[batch, ...]``), outputs ``actions``
    (int64 ``[batch]``) and the scores (``q_values`` or ``logits``, float32 ``[batch, actions]``); a recurrent
    policy also takes ``state_0, ...`` and returns ``next_state_0, ...`` (float32 ``[batch, units]``)."""
    import torch
    try:
        import onnx  # noqa: F401  (torch.onnx writes the model with it)
    except ImportError:
        raise RLGraphBackendError("export --format onnx needs the onnx package: pip install 'rlgraph[export]'.") \
            from None
    inputs, names = ["observations"] + greedy.state_names, output_names(greedy)
    with _frozen(greedy.agent), warnings_quiet():
        torch.onnx.export(_module(greedy), _example(greedy), output, dynamo=False, input_names=inputs,
                          output_names=names, opset_version=ONNX_OPSET,
                          dynamic_axes={n: {0: "batch"} for n in inputs + names})
    return output


@contextlib.contextmanager
def warnings_quiet():
    """torch's deprecation notices about TorchScript (``torch.jit``, which torch.onnx's exporter traces with; both
    still work in torch 2.13), kept out of the user's terminal."""
    import warnings

    import torch
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        # The LSTM scan's Python branch on the sequence length (1 when acting) and its in-place matmul into the
        # state buffer, which both exporters fix correctly for one step (checked step by step in test_export).
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation")
        yield
