"""Building blocks for unrolls [T, B] (or [B, T]) that contain episode boundaries."""
from rlgraph.components.component import Component
from rlgraph.utils.backend import tf, torch
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
            ``y_t = x_t + d_t * y_{t+1}`` with ``y_T = bootstrap_values`` (zeros if None).
    """

    default_scope = "sequence-helper"

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

    # --- TensorFlow ------------------------------------------------------------------------------------
    @graph_fn(backend="tf")
    def _graph_fn_calc_discounts(self, terminals, discount):
        return tf.cast(discount, tf.float32) * (1.0 - tf.cast(terminals, tf.float32))

    @graph_fn(backend="tf")
    def _graph_fn_calc_segment_ids(self, terminals):
        axis = 0 if self.time_major else 1
        return tf.cumsum(tf.cast(terminals, tf.int64), axis=axis, exclusive=True)

    @graph_fn(backend="tf")
    def _graph_fn_calc_next_values(self, values, bootstrap_values):
        if self.time_major:
            return tf.concat([values[1:], bootstrap_values[None]], axis=0)
        return tf.concat([values[:, 1:], bootstrap_values[:, None]], axis=1)

    @graph_fn(backend="tf")
    def _graph_fn_reverse_discounted_cumsum(self, values, discounts, bootstrap_values):
        if not self.time_major:
            values, discounts = tf.transpose(values), tf.transpose(discounts)
        discounts = tf.cast(discounts, values.dtype)
        if bootstrap_values is None:
            bootstrap_values = tf.zeros_like(values[0])
        out = tf.scan(lambda acc, xd: xd[0] + xd[1] * acc, (values, discounts),
                      initializer=tf.cast(bootstrap_values, values.dtype), reverse=True)
        return out if self.time_major else tf.transpose(out)

    # --- PyTorch -----------------------------------------------------------------------------------------
    @graph_fn(backend="pytorch")
    def _graph_fn_calc_discounts(self, terminals, discount):
        return discount * (1.0 - terminals.to(torch.float32))

    @graph_fn(backend="pytorch")
    def _graph_fn_calc_segment_ids(self, terminals):
        flags = terminals.to(torch.int64)
        return torch.cumsum(flags, dim=0 if self.time_major else 1) - flags

    @graph_fn(backend="pytorch")
    def _graph_fn_calc_next_values(self, values, bootstrap_values):
        if self.time_major:
            return torch.cat([values[1:], bootstrap_values[None]], dim=0)
        return torch.cat([values[:, 1:], bootstrap_values[:, None]], dim=1)

    @graph_fn(backend="pytorch")
    def _graph_fn_reverse_discounted_cumsum(self, values, discounts, bootstrap_values):
        if not self.time_major:
            values, discounts = values.t(), discounts.t()
        discounts = discounts.to(values.dtype)
        acc = torch.zeros_like(values[0]) if bootstrap_values is None else bootstrap_values.to(values.dtype)
        out = [None] * values.shape[0]
        for t in range(values.shape[0] - 1, -1, -1):
            acc = torch.addcmul(values[t], discounts[t], acc)
            out[t] = acc
        out = torch.stack(out) if out else torch.zeros_like(values)
        return out if self.time_major else out.t()
