"""A long short-term memory (LSTM) layer unrolled over the time rank."""
import numpy as np

from rlgraph.components.layers.layer import Layer
from rlgraph.components.layers.lstm_scan_pytorch import lstm_scan
from rlgraph.components.layers.lstm_scan_tf import lstm_scan as tf_lstm_scan
from rlgraph.spaces import BoolBox, FloatBox, Tuple
from rlgraph.utils.backend import jax, tf, torch
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, Number, check_args


class LSTMLayer(Layer):
    """An LSTM (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000) over a sequence.

    For each step t, with ``[i, f, g, o] = x_t @ kernel + h_{t-1} @ recurrent_kernel + bias`` (four blocks of
    ``units`` columns in this order)::

        c_t = sigmoid(f + forget_bias) * c_{t-1} + sigmoid(i) * tanh(g)
        h_t = sigmoid(o) * tanh(c_t)

    A positive ``forget_bias`` (Jozefowicz et al. 2015) keeps the cell state early in training. The weights
    have the same layout on both backends: ``kernel [in, 4 * units]``, ``recurrent_kernel [units, 4 * units]``
    and ``bias [4 * units]``.

    API:
        call(inputs, initial_state=None, resets=None): Unrolls over the time rank of ``inputs`` (a FloatBox of
            shape ``[in]`` with batch and time ranks, time-major ``[T, B, in]`` or batch-major ``[B, T, in]``
            as its space says). ``initial_state`` is a tuple ``(h, c)``, each ``[B, units]`` (None: zeros).
            ``resets`` is a bool ``[T, B]`` (or ``[B, T]``, like ``inputs``): True at step t zeroes the state
            before step t, where a new episode starts (at t=0 it replaces ``initial_state`` by zeros).
            Returns ``(outputs, (h_T, c_T))``: the ``h_t`` of all steps in the layout of ``inputs``
            (``[T, B, units]`` or ``[B, T, units]``) and the state after the last step.

    Args:
        units: Size of the hidden and cell states.
        forget_bias: Added to the forget gate's pre-activation.
        kernel_initializer: Initializer of the input kernel.
        recurrent_initializer: Initializer of the recurrent kernel.
        bias_initializer: Initializer of the bias.
    """

    __aliases__ = ("lstm",)

    default_scope = "lstm"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(units=Int(min=1), forget_bias=Number())

    def __init__(self, units, forget_bias=1.0, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        args = check_args("LSTMLayer", LSTMLayer.ARG_RULES, dict(units=units, forget_bias=forget_bias))
        self.units = args["units"]
        self.forget_bias = args["forget_bias"]
        self.kernel_initializer = kernel_initializer
        self.recurrent_initializer = recurrent_initializer
        self.bias_initializer = bias_initializer
        self.kernel = self.recurrent_kernel = self.bias = None
        self.time_major = None

    def check_input_spaces(self, input_spaces, action_space=None):
        where = "LSTMLayer, API method 'call'"
        space = input_spaces["inputs"]
        if not (isinstance(space, FloatBox) and space.rank == 1 and space.has_batch_rank and space.has_time_rank):
            raise RLGraphSpaceError(f"{where}, argument 'inputs': expected a FloatBox of shape [in] with batch and "
                                    f"time ranks, got {space!r}.")
        state = input_spaces.get("initial_state")
        if state is not None:
            ok = isinstance(state, Tuple) and len(state) == 2 and all(
                isinstance(s, FloatBox) and s.shape == (self.units,) for s in state) and state.has_batch_rank \
                and not state.has_time_rank
            if not ok:
                raise RLGraphSpaceError(f"{where}, argument 'initial_state': expected a Tuple (h, c) of two FloatBox "
                                        f"of shape ({self.units},) with a batch rank and no time rank, got {state!r}.")
        resets = input_spaces.get("resets")
        if resets is not None:
            if not (isinstance(resets, BoolBox) and resets.rank == 0 and resets.has_batch_rank
                    and resets.has_time_rank and resets.time_major == space.time_major):
                layout = "[T, B] (time-major)" if space.time_major else "[B, T] (batch-major)"
                raise RLGraphSpaceError(f"{where}, argument 'resets': expected a scalar BoolBox with batch and time "
                                        f"ranks laid out {layout} like 'inputs', got {resets!r}.")

    def create_variables(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        self.time_major = space.time_major
        n = 4 * self.units
        self.kernel = self.get_variable("kernel", shape=(space.shape[0], n), initializer=self.kernel_initializer)
        self.recurrent_kernel = self.get_variable("recurrent-kernel", shape=(self.units, n),
                                                  initializer=self.recurrent_initializer)
        self.bias = self.get_variable("bias", shape=(n,), initializer=self.bias_initializer)

    @rlgraph_api
    def call(self, inputs, initial_state=None, resets=None):
        return self._graph_fn_call(inputs, initial_state, resets)

    # Per backend: the recurrent scan is each backend's own kernel (lstm_scan_tf / lstm_scan_pytorch / lax.scan).
    @graph_fn(backend="tf")
    def _graph_fn_call(self, inputs, initial_state, resets):
        x = inputs if self.time_major else tf.transpose(inputs, [1, 0, 2])
        forget_bias = np.zeros(4 * self.units)
        forget_bias[self.units:2 * self.units] = self.forget_bias
        bias = self.bias + tf.constant(forget_bias, dtype=self.bias.dtype)
        if initial_state is None:
            zeros = tf.zeros(tf.stack([tf.shape(x)[1], self.units]), dtype=x.dtype)
            initial_state = (zeros, zeros)
        if self.in_build_run:
            # The build infers spaces only: the outputs' (the input projection's layout, ``units`` wide) without
            # the loop, whose graph takes a recurrent agent's build most of its time (its steps run at every call).
            xw = tf.tensordot(x, self.kernel, axes=1) + bias
            hs = tf.zeros_like(xw[:, :, :self.units]) + initial_state[0]
            outputs = hs if self.time_major else tf.transpose(hs, [1, 0, 2])
            return outputs, (hs[-1], hs[-1] + initial_state[1])
        keep = None
        if resets is not None:
            r = resets if self.time_major else tf.transpose(resets)
            keep = (1.0 - tf.cast(r, x.dtype))[:, :, None]
        hs, c = tf_lstm_scan(x, self.kernel, self.recurrent_kernel, bias, initial_state[0], initial_state[1], keep)
        outputs = hs if self.time_major else tf.transpose(hs, [1, 0, 2])
        return outputs, (hs[-1], c)

    @graph_fn(backend="pytorch")
    def _graph_fn_call(self, inputs, initial_state, resets):
        x = inputs if self.time_major else inputs.transpose(0, 1)
        if initial_state is None:
            h = c = x.new_zeros((x.shape[1], self.units))
        else:
            h, c = initial_state
        keep = None
        if resets is not None:
            r = resets if self.time_major else resets.transpose(0, 1)
            keep = (~r).to(x.dtype)[:, :, None]
        bias = torch.cat([self.bias[:self.units], self.bias[self.units:2 * self.units] + self.forget_bias,
                          self.bias[2 * self.units:]])
        outputs, c = lstm_scan(x, self.kernel, self.recurrent_kernel, bias, h, c, keep)
        return (outputs if self.time_major else outputs.transpose(0, 1)), (outputs[-1], c)

    @graph_fn(backend="jax")
    def _graph_fn_call(self, inputs, initial_state, resets):
        jnp, ops, units = jax.numpy, self.ops, self.units
        x = inputs if self.time_major else jnp.swapaxes(inputs, 0, 1)
        if initial_state is None:
            h = c = jnp.zeros((x.shape[1], units), x.dtype)
        else:
            h, c = initial_state
        bias = ops.read_value(self.bias).at[units:2 * units].add(self.forget_bias)
        xw = jnp.matmul(x, ops.read_value(self.kernel)) + bias  # All steps' input projections at once.
        recurrent = ops.read_value(self.recurrent_kernel)
        if resets is None:
            keep = jnp.ones(x.shape[:2] + (1,), x.dtype)
        else:
            keep = (1.0 - (resets if self.time_major else jnp.swapaxes(resets, 0, 1)).astype(x.dtype))[:, :, None]

        def step(state, inputs_t):
            (h, c), (xw_t, keep_t) = state, inputs_t
            h, c = h * keep_t, c * keep_t
            i, f, g, o = jnp.split(xw_t + jnp.matmul(h, recurrent), 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        (h, c), outputs = jax.lax.scan(step, (h, c), (xw, keep))
        return (outputs if self.time_major else jnp.swapaxes(outputs, 0, 1)), (h, c)
