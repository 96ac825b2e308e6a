"""The PyTorch kernel of ``LSTMLayer``: an LSTM scan over time with a hand-written backward pass.

Autograd over a Python loop of per-step ops records ~15 graph nodes per step and replays them one by one; the
backward pass of a 20-step scan then costs several times its forward pass. ``lstm_scan`` records a single
node: its forward pass keeps the activated gates and cell states of all steps, and its backward pass is
backpropagation through time written out (Werbos 1990) with the step-independent factors (the gates'
derivatives) computed for all steps at once, so that each step costs eight small ops. The input projection
``x @ kernel + bias`` stays outside (one matmul over all steps, differentiated by autograd), and the
recurrent kernel's gradient is one matmul over all steps at the end.

Where no episode boundary lies inside the sequence (``keep`` is None), or only at a few steps (R2D2's sequences
reset at one position at most), PyTorch's native ``torch.lstm`` (ATen's C++ loop, the same gate layout
``[i, f, g, o]``) runs instead, between those steps, the state zeroed at each. A single step (acting: one step for
a batch of environments) is a handful of ops under autograd: ``torch.lstm`` costs about 170 us per call at any
length (oneDNN's RNN set-up), the single step about 60 us.
"""
from rlgraph.utils.backend import torch

_function = None

#: With at most one step that zeroes some row's state per this many steps, the native LSTM runs between them.
NATIVE_SEGMENT_STEPS = 4


def lstm_scan(x, kernel, recurrent_kernel, bias, h0, c0, keep):
    """Runs an LSTM over the time rank of ``x``.

    Args:
        x: ``[T, B, in]`` (time-major).
        kernel: ``[in, 4 * U]``; recurrent_kernel: ``[U, 4 * U]``; bias: ``[4 * U]``, the forget bias already
            added to its ``f`` block (gate blocks ``[i, f, g, o]``).
        h0, c0: ``[B, U]`` each, the state before the first step.
        keep: ``[T, B, 1]``, 0.0 where the state is zeroed before step t (an episode starts), else 1.0; None
            when it is never zeroed.

    Returns:
        ``(hs [T, B, U], c_T [B, U])``: the hidden states of all steps and the last cell state.
    """
    if x.shape[0] == 1:
        if keep is not None:
            h0, c0 = h0 * keep[0], c0 * keep[0]
        return _step(x[0], kernel, recurrent_kernel, bias, h0, c0)
    if keep is None:
        return _native(x, kernel, recurrent_kernel, bias, h0, c0)
    # Steps where some row's state is zeroed. Few of them (R2D2's sequences reset at one position at most): the
    # native LSTM runs between them and the state is masked at each.
    reset_steps = torch.nonzero(keep[:, :, 0].eq(0.0).any(dim=1)).flatten().tolist()
    if len(reset_steps) <= max(1, x.shape[0] // NATIVE_SEGMENT_STEPS):
        bounds = sorted(set([0] + reset_steps + [x.shape[0]]))
        h, c, outputs = h0, c0, []
        for start, end in zip(bounds[:-1], bounds[1:]):
            if start in reset_steps:
                h, c = h * keep[start], c * keep[start]
            hs, c = _native(x[start:end], kernel, recurrent_kernel, bias, h, c)
            h = hs[-1]
            outputs.append(hs)
        return (outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=0)), c
    xw = x @ kernel + bias  # All steps' input projections at once (autograd differentiates this part).
    if torch.is_grad_enabled() and any(t.requires_grad for t in (xw, recurrent_kernel, h0, c0)):
        return _lstm_function().apply(xw, recurrent_kernel, h0, c0, keep)
    return _forward(xw, recurrent_kernel, h0, c0, keep)[:2]


def _native(x, kernel, recurrent_kernel, bias, h0, c0):
    """PyTorch's native LSTM over all of ``x`` (no resets): ``(hs, c_T)``."""
    hs, _, c_last = torch.lstm(x, (h0[None], c0[None]), [kernel.t(), recurrent_kernel.t(), bias,
                               torch.zeros_like(bias)], True, 1, 0.0, False, False, False)
    return hs, c_last[0]


def _step(x, kernel, recurrent_kernel, bias, h, c):
    """One LSTM step for ``x [B, in]`` (autograd differentiates it): ``(h' [1, B, U], c' [B, U])``."""
    i, f, g, o = torch.addmm(bias, x, kernel).addmm_(h, recurrent_kernel).chunk(4, dim=1)
    c = torch.sigmoid(f).mul(c).addcmul_(torch.sigmoid(i), torch.tanh(g))
    return (torch.sigmoid(o) * torch.tanh(c))[None], c


def _forward(xw, recurrent_kernel, h0, c0, keep):
    """The scan without autograd: ``(hs, c_T, gates, tanh(c) of all steps, h_{t-1}, c_{t-1} as used)``."""
    steps, batch, units = xw.shape[0], h0.shape[0], recurrent_kernel.shape[0]
    gates = torch.empty_like(xw)  # Activated gates of all steps: sigmoid(i), sigmoid(f), tanh(g), sigmoid(o).
    hs = xw.new_empty(steps + 1, batch, units)
    cs = xw.new_empty(steps + 1, batch, units)
    tanh_cs = xw.new_empty(steps, batch, units)
    h_prev, c_prev = xw.new_empty(steps, batch, units), xw.new_empty(steps, batch, units)
    hs[0], cs[0] = h0, c0
    u2, u3 = 2 * units, 3 * units
    for t in range(steps):
        h = torch.mul(hs[t], keep[t], out=h_prev[t])
        c = torch.mul(cs[t], keep[t], out=c_prev[t])
        g = torch.addmm(xw[t], h, recurrent_kernel, out=gates[t])
        torch.sigmoid_(g[:, :u2])
        torch.tanh_(g[:, u2:u3])
        torch.sigmoid_(g[:, u3:])
        c_new = torch.mul(g[:, units:u2], c, out=cs[t + 1]).addcmul_(g[:, :units], g[:, u2:u3])
        torch.mul(g[:, u3:], torch.tanh(c_new, out=tanh_cs[t]), out=hs[t + 1])
    return hs[1:], cs[steps], gates, tanh_cs, h_prev, c_prev


def _backward(grad_hs, grad_c_last, recurrent_kernel, gates, tanh_cs, h_prev, c_prev, keep):
    """Backpropagation through time: ``(d xw, d recurrent_kernel, d h0, d c0)``."""
    steps, batch, units = gates.shape[0], h_prev.shape[1], recurrent_kernel.shape[0]
    u2, u3 = 2 * units, 3 * units
    # Derivatives of the activations w.r.t. their pre-activations: s (1 - s) for sigmoids, 1 - g^2 for tanh(g).
    d_act = gates * (1.0 - gates)
    g_gate = gates[..., u2:u3]
    torch.mul(g_gate, g_gate, out=d_act[..., u2:u3]).neg_().add_(1.0)
    # d pre-activation of i, f, g = dc * [g, c_{t-1}, i] * their activation derivatives.
    dc_factor = gates.new_empty(steps, batch, 3, units)
    torch.mul(g_gate, d_act[..., :units], out=dc_factor[:, :, 0])
    torch.mul(c_prev, d_act[..., units:u2], out=dc_factor[:, :, 1])
    torch.mul(gates[..., :units], d_act[..., u2:u3], out=dc_factor[:, :, 2])
    o_gate = gates[..., u3:]
    o_factor = tanh_cs * d_act[..., u3:]  # d pre-activation of o = dh * tanh(c) * o (1 - o).
    c_from_h = (1.0 - tanh_cs * tanh_cs).mul_(o_gate)  # dc += dh * o * (1 - tanh(c)^2).
    f_gate = gates[..., units:u2]
    grad_gates = torch.empty_like(gates)
    dh = h_prev.new_zeros(batch, units)
    dc = grad_c_last.clone() if grad_c_last is not None else h_prev.new_zeros(batch, units)
    recurrent_t = recurrent_kernel.t()
    for t in range(steps - 1, -1, -1):
        if grad_hs is not None:
            dh = dh.add_(grad_hs[t])
        dg = grad_gates[t]
        torch.mul(dh, o_factor[t], out=dg[:, u3:])
        dc = dc.addcmul_(dh, c_from_h[t])
        torch.mul(dc_factor[t], dc[:, None], out=dg[:, :u3].view(batch, 3, units))
        dc = dc.mul_(f_gate[t])
        dh = torch.mm(dg, recurrent_t).mul_(keep[t])
        dc.mul_(keep[t])
    grad_recurrent = h_prev.reshape(-1, units).t() @ grad_gates.reshape(-1, 4 * units)
    return grad_gates, grad_recurrent, dh, dc


def _lstm_function():
    """The ``torch.autograd.Function`` of the scan (defined on first use: importing torch stays lazy)."""
    global _function
    if _function is None:
        from torch.autograd.function import once_differentiable

        class LSTMScanFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, xw, recurrent_kernel, h0, c0, keep):
                hs, c_last, gates, tanh_cs, h_prev, c_prev = _forward(xw, recurrent_kernel, h0, c0, keep)
                ctx.save_for_backward(recurrent_kernel, gates, tanh_cs, h_prev, c_prev, keep)
                return hs, c_last

            @staticmethod
            @once_differentiable
            def backward(ctx, grad_hs, grad_c_last):
                recurrent_kernel, gates, tanh_cs, h_prev, c_prev, keep = ctx.saved_tensors
                return _backward(grad_hs, grad_c_last, recurrent_kernel, gates, tanh_cs, h_prev, c_prev,
                                 keep) + (None,)

        _function = LSTMScanFunction
    return _function
