"""The TensorFlow kernel of ``LSTMLayer``: TF's fused LSTM op forward, backpropagation through time written out.

``tf.scan`` over a step function runs ~10 ops per step forward, and TF's autodiff of the loop runs ~25 per step
backward, among them one weight-gradient matmul per step. Where no episode boundary lies inside the sequence
(``keep`` is None or zeroes the state at the first step only, as in R2D2's sequences and in acting), the forward
pass is one ``BlockLSTMV2`` op (TF's fused C++ loop, gate layout ``[i, f, g, o]`` as here) and the backward pass
is the one of ``lstm_scan_pytorch`` (Werbos 1990): the gates' derivatives for all steps at once, a reverse loop
of a few ops per step, and the weight gradients as one matmul each over all steps. (The gradient TF registers
for ``BlockLSTMV2`` mixes up the ``f`` and ``g`` blocks in TF 2.21, so it is not used.) A sequence with
boundaries inside it runs the ``tf.scan`` unroll with the state masked at each (decided in the graph).
"""
from rlgraph.utils.backend import tf

_fused_function = None


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
    recurrent_kernel = tf.convert_to_tensor(recurrent_kernel)  # Read once, not at every step.
    kernel, bias = tf.convert_to_tensor(kernel), tf.convert_to_tensor(bias)
    if x.dtype not in (tf.float32, tf.float16):  # The fused op's types.
        return _scan(x, kernel, recurrent_kernel, bias, h0, c0, keep)
    if keep is None:
        return _fused()(x, kernel, recurrent_kernel, bias, h0, c0)
    h0, c0 = h0 * keep[0], c0 * keep[0]  # A boundary at the first step only replaces the initial state.
    if x.shape[0] == 1:
        return _fused()(x, kernel, recurrent_kernel, bias, h0, c0)
    return tf.cond(tf.reduce_all(keep[1:] > 0.0),
                   lambda: _fused()(x, kernel, recurrent_kernel, bias, h0, c0),
                   lambda: _scan(x, kernel, recurrent_kernel, bias, h0, c0, keep))


def _scan(x, kernel, recurrent_kernel, bias, h0, c0, keep):
    """The ``tf.scan`` unroll (TF's autodiff differentiates it), the state masked by ``keep`` at every step."""
    xw = tf.tensordot(x, kernel, axes=1) + bias  # All steps' input projections at once.

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


def _fused():
    """``_fused_lstm`` with its gradient (decorated on first use: importing tensorflow stays lazy)."""
    global _fused_function
    if _fused_function is None:
        _fused_function = tf.custom_gradient(_fused_lstm)
    return _fused_function


def _fused_lstm(x, kernel, recurrent_kernel, bias, h0, c0):
    """``BlockLSTMV2`` over all of ``x`` (no state zeroed inside): ``(hs, c_T)``, with its backward pass."""
    units = h0.shape[-1]
    zeros = tf.zeros_like(bias[:units])  # No peepholes.
    i, cs, f, o, g, tanh_cs, hs = tf.raw_ops.BlockLSTMV2(
        seq_len_max=tf.cast(tf.shape(x)[0], tf.int64), x=x, cs_prev=c0, h_prev=h0,
        w=tf.concat([kernel, recurrent_kernel], axis=0), wci=zeros, wcf=zeros, wco=zeros, b=bias, cell_clip=-1.0,
        use_peephole=False)

    def grad(d_hs, d_c_last):
        if d_hs is None:
            d_hs = tf.zeros_like(hs)
        if d_c_last is None:
            d_c_last = tf.zeros_like(c0)
        c_prev = tf.concat([c0[None], cs[:-1]], axis=0)
        h_prev = tf.concat([h0[None], hs[:-1]], axis=0)
        # d pre-activation = [dc g i(1-i), dc c_{t-1} f(1-f), dc i (1-g^2), dh tanh(c) o(1-o)]: the factors of all
        # steps at once; dc += dh o (1 - tanh(c)^2) at each step.
        factors = tf.concat([g * i * (1.0 - i), c_prev * f * (1.0 - f), i * (1.0 - g * g),
                             tanh_cs * o * (1.0 - o)], axis=-1)
        c_from_h = o * (1.0 - tanh_cs * tanh_cs)
        recurrent_t = tf.transpose(recurrent_kernel)

        def step(acc, elems):
            dh, dc, _ = acc
            d_hs_t, c_from_h_t, factors_t, f_t = elems
            dh = dh + d_hs_t
            dc = dc + dh * c_from_h_t
            dg = tf.concat([dc, dc, dc, dh], axis=-1) * factors_t
            return tf.matmul(dg, recurrent_t), dc * f_t, dg

        dhs, dcs, d_gates = tf.scan(step, (d_hs, c_from_h, factors, f), reverse=True,
                                    initializer=(tf.zeros_like(h0), d_c_last, tf.zeros_like(factors[0])))
        flat = tf.reshape(d_gates, [-1, 4 * units])
        d_kernel = tf.matmul(tf.reshape(x, [-1, tf.shape(x)[-1]]), flat, transpose_a=True)
        d_recurrent = tf.matmul(tf.reshape(h_prev, [-1, units]), flat, transpose_a=True)
        d_x = tf.reshape(tf.matmul(flat, kernel, transpose_b=True), tf.shape(x))
        return d_x, d_kernel, d_recurrent, tf.reduce_sum(flat, axis=0), dhs[0], dcs[0]

    return (hs, cs[-1]), grad
