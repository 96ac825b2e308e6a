"""Building blocks for unrolls [T, B] (or [B, T]) that contain episode boundaries."""
from rlgraph.components.component import Component
from rlgraph.utils.backend import jax, tf, torch
from rlgraph.utils.decorators import graph_fn, rlgraph_api


class SequenceHelper(Component):
    """Per-step discounts, next-step values, episode segments and discounted reverse cumulative sums.

    Convention used throughout rlgraph's RL maths: ``terminals[t]`` is True if the episode ended with step
    ``t`` (``r_t`` was its last reward; ``s_{t+1}`` starts a new episode). A sum running backwards in time
    is cut there by the per-step discount ``d_t = discount * (1 - terminal_t)``.

    The helper has no variables and its API methods do not wait for input spaces (they are fed with
    intermediate results of the components that use it), so it checks no spaces itself.

    Args:
        time_major: Whether sequences are laid out [T, B] (True) or [B, T] (False).

    API:
        calc_discounts(terminals [T, B], discount=1.0) -> [T, B] float32: ``discount * (1 - terminals)``.
        calc_segment_ids(terminals [T, B]) -> [T, B] int64: index of the episode a step belongs to within
            the unroll (0 at the first step, +1 after each terminal).
        calc_next_values(values [T, B], bootstrap_values [B]) -> [T, B]: ``V(s_{t+1})``, i.e. ``values``
            shifted one step back in time, the last step taking ``bootstrap_values`` (= V(s_T)).
        reverse_discounted_cumsum(values [T, B], discounts [T, B], bootstrap_values [B] = None) -> [T, B]:
            ``y_t = x_t + d_t * y_{t+1}`` with ``y_T = bootstrap_values`` (zeros if None). Computed as a
            parallel scan by recursive doubling (Hillis & Steele 1986; Blelloch 1990, linear recurrences):
            with ``x_T = bootstrap_values`` and ``d_T = 0`` appended, each of ceil(log2(T + 1)) rounds
            ``y_t += a_t * y_{t+k}``, ``a_t *= a_{t+k}`` (k = 1, 2, 4, ...; zero beyond the end) doubles the
            span each ``y_t`` covers: a few vector ops instead of T sequential steps (on PyTorch, sequences
            up to ``SEQUENTIAL_MAX_T`` steps run step by step, which is cheaper there). Same result up to
            float rounding (the sums are added in another order).
    """

    default_scope = "sequence-helper"
    #: PyTorch: up to this length the reverse cumulative sum runs step by step (eager ops on short sequences
    #: cost less one by one than the scan's fixed cost; measured crossover at T ~ 20 on CPU).
    SEQUENTIAL_MAX_T = 16

    def __init__(self, time_major=True, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.time_major = bool(time_major)

    @rlgraph_api(must_be_complete=False)
    def calc_discounts(self, terminals, discount=1.0):
        return self._graph_fn_calc_discounts(terminals, discount)

    @rlgraph_api(must_be_complete=False)
    def calc_segment_ids(self, terminals):
        return self._graph_fn_calc_segment_ids(terminals)

    @rlgraph_api(must_be_complete=False)
    def calc_next_values(self, values, bootstrap_values):
        return self._graph_fn_calc_next_values(values, bootstrap_values)

    @rlgraph_api(must_be_complete=False)
    def reverse_discounted_cumsum(self, values, discounts, bootstrap_values=None):
        return self._graph_fn_reverse_discounted_cumsum(values, discounts, bootstrap_values)

    @graph_fn
    def _graph_fn_calc_discounts(self, terminals, discount):
        return discount * (1.0 - self.ops.cast(terminals, "float32"))

    @graph_fn
    def _graph_fn_calc_segment_ids(self, terminals):
        flags = self.ops.cast(terminals, "int64")
        return self.ops.cumsum(flags, axis=0 if self.time_major else 1) - flags

    @graph_fn
    def _graph_fn_calc_next_values(self, values, bootstrap_values):
        if self.time_major:
            return self.ops.concat([values[1:], bootstrap_values[None]], axis=0)
        return self.ops.concat([values[:, 1:], bootstrap_values[:, None]], axis=1)

    # Per backend: the scan's rounds depend on T, which a TensorFlow trace does not know (a tf.while_loop over a
    # dynamic T), PyTorch does (a Python loop, step by step for short sequences) and JAX scans.
    @graph_fn(backend="tf")
    def _graph_fn_reverse_discounted_cumsum(self, values, discounts, bootstrap_values):
        if not self.time_major:
            values, discounts = tf.transpose(values), tf.transpose(discounts)
        discounts = tf.cast(discounts, values.dtype)
        if bootstrap_values is None:
            bootstrap_values = tf.zeros_like(values[0])
        y = tf.concat([values, tf.cast(bootstrap_values, values.dtype)[None]], axis=0)
        a = tf.concat([discounts, tf.zeros_like(y[:1])], axis=0)
        n = tf.shape(y)[0]

        def shift(v, k):  # v[t + k], zero beyond the end.
            return tf.concat([v[k:], tf.zeros_like(v[:k])], axis=0)

        def double(k, y, a):
            return 2 * k, y + a * shift(y, k), a * shift(a, k)

        # A while loop over the log2(T + 1) rounds (T is dynamic): much cheaper than tf.scan's T iterations.
        _, y, _ = tf.while_loop(lambda k, y, a: k < n, double, (tf.constant(1), y, a))
        out = y[:-1]
        return out if self.time_major else tf.transpose(out)

    @graph_fn(backend="jax")
    def _graph_fn_reverse_discounted_cumsum(self, values, discounts, bootstrap_values):
        # JAX: one lax.scan from the last step back (T is static in a jit program).
        jnp = jax.numpy
        if not self.time_major:
            values, discounts = values.T, discounts.T
        discounts = discounts.astype(values.dtype)
        last = jnp.zeros_like(values[0]) if bootstrap_values is None else bootstrap_values.astype(values.dtype)

        def step(carry, inputs_t):
            x, d = inputs_t
            y = x + d * carry
            return y, y

        _, out = jax.lax.scan(step, last, (values, discounts), reverse=True)
        return out if self.time_major else out.T

    @graph_fn(backend="pytorch")
    def _graph_fn_reverse_discounted_cumsum(self, values, discounts, bootstrap_values):
        if not self.time_major:
            values, discounts = values.t(), discounts.t()
        discounts = discounts.to(values.dtype)
        last = torch.zeros_like(values[0]) if bootstrap_values is None else bootstrap_values.to(values.dtype)
        if values.shape[0] <= self.SEQUENTIAL_MAX_T:
            out = [None] * values.shape[0]
            for t, (x, d) in reversed(list(enumerate(zip(values.unbind(0), discounts.unbind(0))))):
                last = out[t] = torch.addcmul(x, d, last)
            out = torch.stack(out) if out else torch.zeros_like(values)
            return out if self.time_major else out.t()
        y = torch.cat([values, last[None]])
        zeros = torch.zeros_like(y)
        a = torch.cat([discounts, zeros[:1]])
        n, k = y.shape[0], 1
        while k < n:  # v[t + k], zero beyond the end: cat([v[k:], zeros[:k]]).
            y = torch.addcmul(y, a, torch.cat([y[k:], zeros[:k]]))
            if 2 * k < n:
                a = a * torch.cat([a[k:], zeros[:k]])
            k *= 2
        out = y[:-1]
        return out if self.time_major else out.t()
