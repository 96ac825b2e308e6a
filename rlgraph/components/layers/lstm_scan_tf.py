"""The TensorFlow kernel of ``LSTMLayer``: TF's fused LSTM op forward, backpropagation through time written out.

``tf.scan`` over a step function runs one small op after another at every step, and TF's autodiff of the loop
adds a weight-gradient matmul and its accumulation at every step of the backward loop. Where no episode boundary
lies inside the sequence (``keep`` is None or zeroes the state at the first step only, as in R2D2's sequences and
in acting), the forward pass is one ``BlockLSTMV2`` op (TF's fused C++ loop, gate layout ``[i, f, g, o]`` as
here). The backward pass is the one of ``lstm_scan_pytorch`` (Werbos 1990): the gates' derivatives for all steps
at once, a reverse ``tf.while_loop`` of a few ops per step, and the weight gradients as one matmul each over all
steps. (The gradient TF registers for ``BlockLSTMV2`` differs from autodiff of the unroll in TF 2.21, its ``f``
and ``g`` blocks seemingly swapped, so it is not used.) A sequence with boundaries inside it runs a ``tf.scan``
forward pass that masks the state at each and keeps the same activations, and the same backward pass. The
choice between the two forward passes is a ``tf.cond`` on the data inside the custom gradient: TF never
differentiates the cond itself (its gradient, built lazily, breaks when a graph is differentiated twice, e.g. by
``tf.gradients`` inside and a ``GradientTape`` outside).
"""
from rlgraph.utils.backend import tf

_functions = {}


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
    kernel, recurrent_kernel, bias = (tf.convert_to_tensor(v) for v in (kernel, recurrent_kernel, bias))
    if x.dtype not in (tf.float32, tf.float16):  # The fused op's types: others run the unroll under autodiff.
        return _scan_autodiff(x, kernel, recurrent_kernel, bias, h0, c0, keep)
    if keep is None:
        return _function("fused", _fused_lstm)(x, kernel, recurrent_kernel, bias, h0, c0)
    h0, c0 = h0 * keep[0], c0 * keep[0]  # A boundary at the first step only replaces the initial state.
    if x.shape[0] == 1:
        return _function("fused", _fused_lstm)(x, kernel, recurrent_kernel, bias, h0, c0)
    return _function("masked", _masked_lstm)(x, kernel, recurrent_kernel, bias, h0, c0, keep)


def _function(name, fn):
    """``fn`` with its gradient (``tf.custom_gradient`` applied on first use: importing tensorflow stays lazy)."""
    if name not in _functions:
        _functions[name] = tf.custom_gradient(fn)
    return _functions[name]


def _fused_lstm(x, kernel, recurrent_kernel, bias, h0, c0):
    """No state zeroed inside ``x``: ``(hs, c_T)`` by ``BlockLSTMV2``, with the hand-written backward pass."""
    acts = _forward_fused(x, kernel, recurrent_kernel, bias, h0, c0)

    def grad(d_hs, d_c_last):
        return _backward(d_hs, d_c_last, x, kernel, recurrent_kernel, h0, c0, None, acts)

    return (acts[-1], acts[4][-1]), grad


def _masked_lstm(x, kernel, recurrent_kernel, bias, h0, c0, keep):
    """The state zeroed where ``keep`` is 0: ``BlockLSTMV2`` where that is at the first step only (``h0``, ``c0``
    are masked already), else the masking ``tf.scan``; the hand-written backward pass either way."""
    acts = tf.cond(tf.reduce_all(keep[1:] > 0.0),
                   lambda: _forward_fused(x, kernel, recurrent_kernel, bias, h0, c0),
                   lambda: _forward_scan(x, kernel, recurrent_kernel, bias, h0, c0, keep))

    def grad(d_hs, d_c_last):
        return _backward(d_hs, d_c_last, x, kernel, recurrent_kernel, h0, c0, keep, acts) + (None,)

    return (acts[-1], acts[4][-1]), grad


def _forward_fused(x, kernel, recurrent_kernel, bias, h0, c0):
    """``BlockLSTMV2`` over all of ``x``: the activations ``(i, f, g, o, c, tanh(c), h)`` of all steps."""
    zeros = tf.zeros_like(bias[:h0.shape[-1]])  # No peepholes.
    i, cs, f, o, g, tanh_cs, hs = tf.raw_ops.BlockLSTMV2(
        seq_len_max=tf.cast(tf.shape(x)[0], tf.int64), x=x, cs_prev=c0, h_prev=h0,
        w=tf.concat([kernel, recurrent_kernel], axis=0), wci=zeros, wcf=zeros, wco=zeros, b=bias, cell_clip=-1.0,
        use_peephole=False)
    return i, f, g, o, cs, tanh_cs, hs


def _forward_scan(x, kernel, recurrent_kernel, bias, h0, c0, keep):
    """The step loop, the state masked by ``keep`` before each step: the same activations as ``_forward_fused``."""
    units = h0.shape[-1]
    xw = tf.tensordot(x, kernel, axes=1) + bias  # All steps' input projections at once.

    @tf.autograph.experimental.do_not_convert
    def step(acc, elems):
        h, c = acc[-1] * elems[1], acc[4] * elems[1]
        z = elems[0] + tf.matmul(h, recurrent_kernel)
        i, f, _, o = tf.split(tf.sigmoid(z), 4, axis=-1)
        g = tf.tanh(z[:, 2 * units:3 * units])
        c = f * c + i * g
        tanh_c = tf.tanh(c)
        return i, f, g, o, c, tanh_c, o * tanh_c

    zeros = tf.zeros_like(h0)
    return tuple(tf.scan(step, (xw, keep), initializer=(zeros, zeros, zeros, zeros, c0, zeros, h0)))


def _backward(d_hs, d_c_last, x, kernel, recurrent_kernel, h0, c0, keep, acts):
    """Backpropagation through time: ``(d x, d kernel, d recurrent_kernel, d bias, d h0, d c0)``."""
    i, f, g, o, cs, tanh_cs, hs = acts
    units = h0.shape[-1]
    if d_hs is None:
        d_hs = tf.zeros_like(hs)
    if d_c_last is None:
        d_c_last = tf.zeros_like(c0)
    c_prev = tf.concat([c0[None], cs[:-1]], axis=0)  # The states each step started from (masked by keep).
    h_prev = tf.concat([h0[None], hs[:-1]], axis=0)
    if keep is not None:
        c_prev, h_prev = c_prev * keep, h_prev * keep
    # d pre-activation = [dc g i(1-i), dc c_{t-1} f(1-f), dc i (1-g^2), dh tanh(c) o(1-o)]: the factors of all
    # steps at once (SigmoidGrad(y, dy) = dy y (1 - y), TanhGrad(y, dy) = dy (1 - y^2): one op each); and
    # dc += dh o (1 - tanh(c)^2) at each step.
    sigmoid_grad, tanh_grad = tf.raw_ops.SigmoidGrad, tf.raw_ops.TanhGrad
    factors = tf.concat([sigmoid_grad(y=i, dy=g), sigmoid_grad(y=f, dy=c_prev), tanh_grad(y=g, dy=i),
                         sigmoid_grad(y=o, dy=tanh_cs)], axis=-1)
    c_from_h = tanh_grad(y=tanh_cs, dy=o)
    recurrent_t = tf.transpose(recurrent_kernel)

    def step(dh, dc, elems):
        dh = dh + elems[0]
        dc = dc + dh * elems[1]
        dg = tf.concat([dc, dc, dc, dh], axis=-1) * elems[2]
        dh, dc = tf.matmul(dg, recurrent_t), dc * elems[3]
        if keep is not None:
            dh, dc = dh * elems[4], dc * elems[4]
        return dh, dc, dg

    elems = (d_hs, c_from_h, factors, f) + (() if keep is None else (keep,))
    steps = tf.shape(x)[0]

    @tf.autograph.experimental.do_not_convert
    def body(t, dh, dc, out):  # Reads step t's slices of the inputs in place (tf.scan would copy them first).
        dh, dc, dg = step(dh, dc, [e[t] for e in elems])
        return t - 1, dh, dc, out.write(t, dg)

    _, dh0, dc0, d_gates = tf.while_loop(
        lambda t, *_: t >= 0, body, (steps - 1, tf.zeros_like(h0), d_c_last,
                                     tf.TensorArray(factors.dtype, size=steps, element_shape=factors.shape[1:])))
    d_gates = d_gates.stack()
    flat = tf.reshape(d_gates, [-1, 4 * units])
    d_kernel = tf.matmul(tf.reshape(x, [-1, tf.shape(x)[-1]]), flat, transpose_a=True)
    d_recurrent = tf.matmul(tf.reshape(h_prev, [-1, units]), flat, transpose_a=True)
    d_x = tf.reshape(tf.matmul(flat, kernel, transpose_b=True), tf.shape(x))
    # The bias gradient (the sum over all rows) as a matmul: ~3x faster than TF's column reduction on one thread.
    d_bias = tf.reshape(tf.matmul(tf.ones([1, tf.shape(flat)[0]], flat.dtype), flat), [4 * units])
    return d_x, d_kernel, d_recurrent, d_bias, dh0, dc0


def _scan_autodiff(x, kernel, recurrent_kernel, bias, h0, c0, keep):
    """The plain ``tf.scan`` unroll under TF's autodiff (float64, and the reference of the tests)."""
    xw = tf.tensordot(x, kernel, axes=1) + bias

    @tf.autograph.experimental.do_not_convert
    def step(state, elems):
        h, c = state
        if keep is None:
            xw_t = elems
        else:
            xw_t, keep_t = elems
            h, c = h * keep_t, c * keep_t
        i, f, g, o = tf.split(xw_t + tf.matmul(h, recurrent_kernel), 4, axis=-1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        return tf.sigmoid(o) * tf.tanh(c), c

    hs, cs = tf.scan(step, xw if keep is None else (xw, keep), initializer=(h0, c0))
    return hs, cs[-1]
