"""PyTorch's optimizer update: the slots of all variables as slices of flat buffers, one update per buffer.

``PyTorchBackend.apply_gradients`` runs an ``Optimizer``'s ``update_rule`` once per (device, dtype) group of
variables, on their gradients and slots flattened into one vector each, not once per variable (a dozen vector ops
instead of a dozen per variable: the per-variable Python loop cost more than the backward pass of small networks);
an optimizer that names a fused kernel (``Optimizer.fused_kernel``: Adam's) runs ATen's multi-tensor kernel of the
same rule instead.
"""
from rlgraph.utils.backend import torch

#: The key of an optimizer's flat layout in its ``backend_state``.
_LAYOUT = "pytorch_flat_slots"


def apply_flat(optimizer, variables, gradients, learning_rate):
    """Clips ``gradients`` to ``optimizer``'s global norm and applies its update; returns the norm before
    clipping (see ``Backend.apply_gradients``)."""
    keys = optimizer.checked_keys(variables, gradients)
    with torch.no_grad():
        if optimizer.in_build_run:
            # The build's sample runs: only create the slots. (Slots created here are not among the variables the
            # build restores afterwards, so they must not change.)
            for k in keys:
                optimizer.slots_for(k, variables[k])
            return global_norm([gradients[k].to(variables[k].dtype) for k in keys])
        flat = optimizer.backend_state.get(_LAYOUT)
        if flat is None or not flat.fits(keys, variables):
            flat = optimizer.backend_state[_LAYOUT] = FlatSlots(
                keys, variables, [optimizer.slots_for(k, variables[k]) for k in keys], optimizer.slot_names)
        groups = flat.flat_gradients(gradients)
        norm = global_norm(groups)
        if optimizer.clip_grad_norm is not None:
            scale = optimizer.clip_grad_norm / torch.clamp(norm, min=optimizer.clip_grad_norm)
            groups = [g * scale.to(g.device, g.dtype) for g in groups]
        optimizer.steps.add_(1)
        learning_rate = torch.as_tensor(learning_rate)
        kernel = optimizer.fused_kernel()
        for group, g in zip(flat.groups, groups):
            lr, step = learning_rate.to(g.dtype), optimizer.steps.to(g.dtype)
            fused = _fused(kernel[0]) if kernel is not None else None
            if fused is not None and group.dtype in (torch.float32, torch.float64) and group.contiguous:
                fused(group, g, lr, step, **kernel[1])
            else:
                delta, new_slots = optimizer.update_rule(g, dict(group.slots), lr, step)
                for name, value in new_slots.items():
                    group.slots[name].copy_(value)
                group.subtract(delta)
    return norm


def global_norm(grads):
    """The global norm of ``grads`` (tensors on any devices) in float32, as a tensor on the first one's device.

    The sum of squares by ``torch.sum`` (pairwise summation): ``torch.linalg.vector_norm`` accumulates float32
    serially on the CPU, 8e-5 relative off at 1.5M entries, enough to move every clipped step off TF's and JAX's
    (``tests/test_optimizers.py::test_global_norm_of_a_large_gradient_is_exact``)."""
    squares = [torch.sum(torch.square(g if g.dtype == torch.float32 else g.float())) for g in grads]
    return torch.sqrt(sum(s.to(squares[0].device) for s in squares)) if squares else torch.tensor(0.0)


def fused_adam(group, grad, learning_rate, step, beta_1, beta_2, epsilon):
    """Adam's update as ATen's fused kernel (``torch.optim.Adam(fused=True)``'s: the same update, one multi-tensor
    kernel; agrees with ``AdamOptimizer.update_rule`` to float rounding, ``tests/test_optimizers.py``)."""
    torch._fused_adam_(group.variables, group.views(grad), group.slot_views["m"], group.slot_views["v"], [],
                       [step.to(grad.device)] * len(group.variables), lr=float(learning_rate), beta1=beta_1,
                       beta2=beta_2, weight_decay=0.0, eps=epsilon, amsgrad=False, maximize=False)
    # The kernel writes in place without bumping version counters, which others read to see a change
    # (``WeightReplicas`` refreshes a tower's replicas by them; autograd checks saved tensors by them).
    torch.autograd.graph.increment_version(group.variables + group.slot_views["m"] + group.slot_views["v"])


#: Fused kernels by the name an optimizer's ``fused_kernel`` gives: the ATen op each needs and its call.
FUSED_KERNELS = {"adam": ("_fused_adam_", fused_adam)}


def _fused(name):
    """The fused kernel ``name`` where this PyTorch build has its ATen op, else None."""
    op, kernel = FUSED_KERNELS.get(name, (None, None))
    return kernel if op is not None and getattr(torch, op, None) is not None else None


class FlatSlots:
    """An optimizer's slot variables of a set of PyTorch variables as slices of one flat buffer per slot.

    Variables are grouped by (device, dtype); per group, each slot name has one 1-D buffer, and every
    variable's slot variable is re-pointed (``Tensor.set_``) to its slice of it, so that it stays the same
    tensor object under the same name (checkpoints, ``read_variable_values``) while the update rule runs
    once on the whole group.

    Args:
        keys: The variables' keys, in the order of the gradients.
        variables: Key -> variable.
        slots: Per key, slot name -> slot variable (same shape and dtype as the variable).
        slot_names: The slot names.
    """

    class Group:
        """The variables of one (device, dtype): keys, variables, shapes, sizes and the flat slot buffers."""

        def __init__(self, dtype):
            self.dtype = dtype
            self.keys, self.variables, self.shapes, self.sizes = [], [], [], []
            self.slots = {}
            self.slot_views = {}  # slot name -> each variable's slot variable (views of ``slots[name]``)
            self.contiguous = True

        def subtract(self, delta):
            """``variable -= delta`` for each variable, ``delta`` being the group's flat update."""
            torch._foreach_sub_(self.variables, self.views(delta))

        def views(self, flat):
            """A flat vector of the group as one view per variable, in the variables' shapes."""
            return [c.view(s) for c, s in zip(flat.split(self.sizes), self.shapes)]

    def __init__(self, keys, variables, slots, slot_names):
        self.keys = tuple(keys)
        self.variables = [variables[k] for k in keys]
        slots_of = dict(zip(keys, slots))
        groups = {}
        for k, var in zip(keys, self.variables):
            group = groups.get((var.device, var.dtype))
            if group is None:
                group = groups[(var.device, var.dtype)] = self.Group(var.dtype)
            group.keys.append(k)
            group.variables.append(var)
            group.shapes.append(tuple(var.shape))
            group.sizes.append(var.numel())
        self.groups = list(groups.values())
        for group in self.groups:
            members = [slots_of[k] for k in group.keys]
            for name in slot_names:
                # Current values are kept (slots restored from a checkpoint, or of an earlier layout).
                buffer = torch.cat([m[name].detach().reshape(-1) for m in members])
                offset = 0
                for m, shape, size in zip(members, group.shapes, group.sizes):
                    m[name].set_(buffer[offset:offset + size].view(shape))
                    offset += size
                group.slots[name] = buffer
                group.slot_views[name] = [m[name] for m in members]
            # Multi-tensor kernels walk each tensor's memory in order: they need contiguous variables.
            group.contiguous = all(v.is_contiguous() for v in group.variables)
        self.single = len(self.groups) == 1

    def fits(self, keys, variables):
        """Whether this layout serves these variables (same keys, same variable objects, in order)."""
        return tuple(keys) == self.keys and all(variables[k] is v for k, v in zip(keys, self.variables))

    def flat_gradients(self, gradients):
        """Per group, the gradients of its variables concatenated into one vector of the group's dtype."""
        if self.single:
            group = self.groups[0]
            return [torch.cat([gradients[k].reshape(-1) for k in group.keys]).to(group.dtype)]
        return [torch.cat([gradients[k].reshape(-1).to(group.dtype) for k in group.keys]) for group in self.groups]
