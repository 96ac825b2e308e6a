"""LSTMLayer's forward + backward pass against hand-written equivalents, at R2D2's learner shapes.

PyTorch: rlgraph's scan (one autograd node with hand-written backpropagation through time, resets at many steps
of the sequence; and, where rows reset at one step only as in R2D2's sequences, the native LSTM between) against
(a) the same LSTM written as a Python loop of per-step ops under autograd (what the layer ran before) and (b)
PyTorch's native ``torch.nn.LSTM`` without resets (ATen's C++ loop; it cannot zero the state inside a sequence,
so it is the floor, not an equivalent). TensorFlow: rlgraph's kernel (a masking ``tf.scan`` forward where rows
reset at many steps, TF's fused ``BlockLSTMV2`` where they reset at the first step only, as R2D2's training
sequences and acting do; the hand-written backward pass either way) inside a ``tf.function`` against (a) the
step loop under TF's autodiff (what the layer ran before) and (b) Keras' ``LSTM`` layer without resets.
Interleaved rounds, medians, ratios from one run; no absolute aims.

Acting (PyTorch): one step without gradients for ``--acting-batch`` environments, as R2D2's actors call it:
rlgraph's layer (a single-step kernel of a few ops) against ``torch.lstm`` over the one step (what the layer ran
before; oneDNN's RNN set-up dominates it) and ``torch.nn.LSTMCell``.

    python benchmarks/lstm_scan.py [--steps 20] [--batch 256] [--units 64] [--rounds 15] [--acting-batch 16]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def timed(fn, seconds):
    """Mean milliseconds of one ``fn()`` over at least ``seconds`` (after one warm-up call)."""
    fn()
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / n * 1e3


def layer_inputs(steps, batch, units, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((steps, batch, units)).astype(np.float32)
    resets = rng.random((steps, batch)) < 0.05  # Episode starts scattered over the sequence, as in R2D2.
    return x, resets


def built_layer(units, backend):
    """An ``LSTMLayer`` built time-major with an initial state and resets, on ``backend``."""
    from rlgraph.components.layers import LSTMLayer
    from rlgraph.spaces import BoolBox, FloatBox, Tuple
    from rlgraph.tests import ComponentTest

    spaces = dict(inputs=FloatBox(shape=(units,), add_batch_rank=True, add_time_rank=True, time_major=True),
                  initial_state=Tuple(FloatBox(shape=(units,)), FloatBox(shape=(units,)), add_batch_rank=True),
                  resets=BoolBox(add_batch_rank=True, add_time_rank=True, time_major=True))
    return ComponentTest(LSTMLayer(units), spaces, backend=backend).component


def pytorch_variants(steps, batch, units):
    import torch

    layer = built_layer(units, "pytorch")
    x_np, resets_np = layer_inputs(steps, batch, units)
    x, resets = torch.tensor(x_np), torch.tensor(resets_np)
    zeros = torch.zeros(batch, units)
    kernel, recurrent, bias = layer.kernel, layer.recurrent_kernel, layer.bias
    keep = (~resets).float()[:, :, None]

    def ours():
        outputs, (h, c) = layer._graph_fn_call(x, (zeros, zeros), resets)
        (outputs.sum() + c.sum()).backward()

    resets_one_step = torch.zeros_like(resets)
    resets_one_step[steps // 3] = resets.any(dim=0)  # R2D2's sequences: episode starts at one position only.

    def ours_one_step():
        outputs, (h, c) = layer._graph_fn_call(x, (zeros, zeros), resets_one_step)
        (outputs.sum() + c.sum()).backward()

    def python_loop():  # The per-step autograd loop, written out.
        xw = x @ kernel + bias
        h = c = zeros
        outs = []
        for t in range(steps):
            h, c = h * keep[t], c * keep[t]
            i, f, g, o = torch.addmm(xw[t], h, recurrent).chunk(4, dim=-1)
            c = torch.sigmoid(f + 1.0) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        (torch.stack(outs).sum() + c.sum()).backward()

    native = torch.nn.LSTM(units, units)

    def native_no_resets():
        outputs, (h, c) = native(x, (zeros[None], zeros[None]))
        (outputs.sum() + c.sum()).backward()

    return {"rlgraph (resets)": ours, "Python loop under autograd (resets)": python_loop,
            "torch.nn.LSTM (no resets)": native_no_resets,
            "rlgraph (resets at one step: native segments)": ours_one_step}


def pytorch_acting_variants(batch, units):
    """One step without gradients (acting): rlgraph's layer, ``torch.lstm``, ``torch.nn.LSTMCell``."""
    import torch

    from rlgraph.components.layers.lstm_scan_pytorch import _native

    layer = built_layer(units, "pytorch")
    x_np, _ = layer_inputs(1, batch, units)
    x = torch.tensor(x_np)
    h = torch.tensor(np.random.default_rng(1).standard_normal((batch, units)).astype(np.float32))
    c = h.flip(0)
    kernel, recurrent = layer.kernel.detach(), layer.recurrent_kernel.detach()
    bias = layer.bias.detach() + torch.tensor(np.repeat([0.0, 1.0, 0.0, 0.0], units), dtype=torch.float32)
    cell = torch.nn.LSTMCell(units, units)

    def ours():
        with torch.no_grad():
            layer._graph_fn_call(x, (h, c), None)

    def torch_lstm():
        with torch.no_grad():
            _native(x, kernel, recurrent, bias, h, c)

    def lstm_cell():
        with torch.no_grad():
            cell(x[0], (h, c))

    return {"rlgraph (one step)": ours, "torch.lstm over one step (before)": torch_lstm,
            "torch.nn.LSTMCell": lstm_cell}


def tf_variants(steps, batch, units):
    import tensorflow as tf

    layer = built_layer(units, "tf")
    x_np, resets_np = layer_inputs(steps, batch, units)
    x, resets = tf.constant(x_np), tf.constant(resets_np)
    zeros = tf.zeros((batch, units))
    variables = [layer.kernel, layer.recurrent_kernel, layer.bias]

    def layer_pass(resets):
        @tf.function
        def forward_backward():
            with tf.GradientTape() as tape:
                outputs, (h, c) = layer._graph_fn_call(x, (zeros, zeros), resets)
                loss = tf.reduce_sum(outputs) + tf.reduce_sum(c)
            return tape.gradient(loss, variables)
        return forward_backward

    ours = layer_pass(resets)
    ours_first_step = layer_pass(tf.concat([resets_np.any(axis=0)[None], tf.zeros_like(resets[1:])], axis=0))

    from rlgraph.components.layers.lstm_scan_tf import _scan_autodiff

    forget_bias = tf.constant(np.repeat([0.0, 1.0, 0.0, 0.0], units), dtype=tf.float32)
    keep = (1.0 - tf.cast(resets, tf.float32))[:, :, None]

    @tf.function
    def autodiff_unroll():  # The step loop under TF's autodiff (what the layer ran before).
        with tf.GradientTape() as tape:  # The bias read inside the tape: its gradient is computed, as in ours.
            hs, c = _scan_autodiff(x, layer.kernel, layer.recurrent_kernel, layer.bias + forget_bias, zeros, zeros,
                                   keep)
            loss = tf.reduce_sum(hs) + tf.reduce_sum(c)
        return tape.gradient(loss, variables)

    keras_lstm = tf.keras.layers.LSTM(units, return_sequences=True, return_state=True, time_major=False) \
        if "time_major" in tf.keras.layers.LSTM.__init__.__code__.co_varnames else \
        tf.keras.layers.LSTM(units, return_sequences=True, return_state=True)
    x_batch_major = tf.transpose(x, [1, 0, 2])
    keras_lstm(x_batch_major)  # Creates its weights.

    @tf.function
    def keras_no_resets():
        with tf.GradientTape() as tape:
            outputs, h, c = keras_lstm(x_batch_major, initial_state=[zeros, zeros])
            loss = tf.reduce_sum(outputs) + tf.reduce_sum(c)
        return tape.gradient(loss, keras_lstm.trainable_variables)

    return {"rlgraph (resets)": ours, "tf.scan under TF autodiff (resets)": autodiff_unroll,
            "Keras LSTM (no resets)": keras_no_resets,
            "rlgraph (resets at the first step: fused op)": ours_first_step}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--units", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seconds", type=float, default=0.3, help="minimum time of one repetition")
    parser.add_argument("--backend", choices=["tf", "pytorch"], action="append")
    parser.add_argument("--acting-batch", type=int, default=16, help="environments of the acting comparison")
    args = parser.parse_args()
    backends = args.backend or ["pytorch", "tf"]
    print(f"LSTM forward + backward, T={args.steps}, B={args.batch}, {args.units} units; median ms of "
          f"{args.rounds} interleaved rounds")
    for backend in backends:
        make = pytorch_variants if backend == "pytorch" else tf_variants
        report(backend, make(args.steps, args.batch, args.units), args)
    if "pytorch" in backends:
        print(f"\nActing: one step without gradients, B={args.acting_batch}, {args.units} units")
        report("pytorch", pytorch_acting_variants(args.acting_batch, args.units), args, unit="us")


def report(backend, variants, args, unit="ms"):
    """Times ``variants`` in interleaved rounds and prints their medians and ratios to the first (rlgraph's)."""
    times = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, fn in variants.items():
            times[name].append(timed(fn, args.seconds))
    scale = 1e3 if unit == "us" else 1.0
    medians = {name: statistics.median(ts) * scale for name, ts in times.items()}
    ours = next(iter(medians.values()))
    print(f"\n| {backend} | {unit} | {unit} / rlgraph {unit} |\n|---|---|---|")
    for name, value in medians.items():
        print(f"| {name} | {value:.2f} | {value / ours:.2f}x |")


if __name__ == "__main__":
    main()
