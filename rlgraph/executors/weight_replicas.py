"""Per-device replicas of a PyTorch graph's variables, for towers on other devices than the weights' own.

PyTorch components hold their variables as tensor objects (attributes, dicts), so a tower cannot be handed
other tensors. Instead, for the time of a tower, every variable's data is swapped (``Tensor.data = ...``,
as ``nn.Module._apply`` moved parameters between devices) to a replica on the tower's device, and swapped
back after it. The tensors stay the same objects, so the graph functions, autograd (gradients w.r.t. a
variable come out on the tower's device) and checkpoints see nothing of it.

Replicas are kept between calls and refreshed only where the variable changed since (PyTorch's version
counter of the variable, which in-place writes bump); a tower's in-place writes (a memory's priorities,
a counter) land in the replica and are copied back into the variable when the tower ends, so towers run
in sequence have exactly the semantics of towers on one device.
"""
import contextlib

from rlgraph.utils.backend import torch
from rlgraph.utils.placement import placed_on


class WeightReplicas:
    """Replicas of ``variables`` per device (see the module's doc).

    Args:
        variables: The variables (tensors) a tower may read or write.
        home: The device the variables live on (a ``torch.device``).
        always_copy: Replicate even on ``home`` (copies on the same device): what tests use to exercise the
            replica path on a machine without several devices.
    """

    def __init__(self, variables, home, always_copy=False):
        self.variables = list(variables)
        self.home = torch.device(home)
        self.always_copy = always_copy
        self._replicas = {}  # device -> [replica tensor per variable]
        self._synced = {}  # device -> [the variable's version at which its replica equalled it]

    def needed(self, device):
        """Whether a tower on ``device`` runs on replicas."""
        return self.always_copy or torch.device(device) != self.home

    @contextlib.contextmanager
    def on(self, device):
        """Within: every variable's data is its replica on ``device`` (a no-op where not ``needed``)."""
        if not self.needed(device):
            yield
            return
        device = torch.device(device)
        replicas = self._replicas.get(device)
        if replicas is None:
            replicas = self._replicas[device] = [torch.empty_like(v, device=device, requires_grad=False)
                                                 for v in self.variables]
            self._synced[device] = [None] * len(self.variables)
        synced = self._synced[device]
        originals, before = [], []
        with torch.no_grad():
            for i, (var, replica) in enumerate(zip(self.variables, replicas)):
                if synced[i] != var._version:
                    replica.copy_(var.detach(), non_blocking=True)
                    synced[i] = var._version
                originals.append(var.data)
                var.data = replica
                before.append(var._version)
        try:
            with placed_on(device):  # Records a memory samples in the tower go to the tower's device.
                yield
        finally:
            with torch.no_grad():
                for i, (var, original, replica) in enumerate(zip(self.variables, originals, replicas)):
                    written = var._version != before[i]
                    var.data = original
                    if written:
                        var.copy_(replica)
                        synced[i] = var._version


__all__ = ["WeightReplicas"]
