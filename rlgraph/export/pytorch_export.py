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

        def forward(self, observations):
            actions, scores = greedy(observations.to(dtype))
            actions, scores = actions.to(torch.int64), scores.to(torch.float32)
            return {"actions": actions, name: scores} if named else (actions, scores)

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


def _example(greedy, batch=2):
    import numpy as np
    import torch
    sample = greedy.state_space.with_batch_rank().sample(batch, rng=np.random.default_rng(0))
    return torch.from_numpy(np.asarray(sample, np.float32))


def export_torchscript(greedy, output):
    """Writes the policy as a TorchScript file (``torch.jit.load(output)(observations)`` returns
    ``{"actions": ..., scores_name: ...}``)."""
    import torch

    with _frozen(greedy.agent), warnings_quiet():
        traced = torch.jit.trace(_module(greedy, named=True), (_example(greedy),), strict=False, check_trace=False)
        torch.jit.save(traced, output)
    return output


def export_onnx(greedy, output):
    """Writes the policy as an ONNX model: input ``observations`` (float32, ``[batch, ...]``), outputs ``actions``
    (int64 ``[batch]``) and the scores (``q_values`` or ``logits``, float32 ``[batch, actions]``)."""
    import torch
    try:
        import onnx  # noqa: F401  (torch.onnx writes the model with it)
    except ImportError:
        raise RLGraphBackendError("export --format onnx needs the onnx package: pip install 'rlgraph[export]'.") \
            from None
    names = ["actions", greedy.scores_name]
    with _frozen(greedy.agent), warnings_quiet():
        torch.onnx.export(_module(greedy), (_example(greedy),), output, dynamo=False, input_names=["observations"],
                          output_names=names, opset_version=ONNX_OPSET,
                          dynamic_axes={n: {0: "batch"} for n in ["observations"] + names})
    return output


@contextlib.contextmanager
def warnings_quiet():
    """torch's deprecation notices about TorchScript (``torch.jit``, which torch.onnx's exporter traces with; both
    still work in torch 2.13), kept out of the user's terminal."""
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        yield
