"""Buffer donation on JAX: programs on one device give the buffers of the variables they change to XLA
(the new values written where the old ones were); the results equal those of programs without donation; programs
that call the host, and acting programs, donate nothing (a failed host call leaves the variables as they were); a
buffer two variables share stays valid for the other."""
import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component, ReplayMemory
from rlgraph.components.optimizers import AdamOptimizer
from rlgraph.spaces import FloatBox
from rlgraph.tests import ComponentTest
from rlgraph.utils.errors import RLGraphError, RLGraphRuntimeError
from small_components import Regression

jax = pytest.importorskip("jax")

SPACES = dict(x=FloatBox(shape=(3,), add_batch_rank=True), y=FloatBox(add_batch_rank=True), time_percentage=float)
RNG = np.random.default_rng(34)
X = RNG.normal(size=(32, 3)).astype(np.float32)
Y = (np.sin(X[:, 0]) + X[:, 1] * X[:, 2]).astype(np.float32)


def _pair():
    """The same regression built twice on JAX, with and without donation (read when a program is first made), with
    the same weights."""
    donating = ComponentTest(Regression(AdamOptimizer(0.05, clip_grad_norm=1.0)), SPACES, backend="jax")
    plain = ComponentTest(Regression(AdamOptimizer(0.05, clip_grad_norm=1.0)), SPACES, backend="jax")
    plain.executor.donate = False
    plain.executor.set_weights(donating.executor.get_weights(trainable_only=False))
    return donating, plain


def _boxes(test):
    return test.executor.variables()


def test_an_update_donates_what_it_changes_and_equals_one_without_donation():
    donating, plain = _pair()
    for step, batch in enumerate([32, 32, 16]):  # 16: a second input signature, traced and compiled anew.
        before = {k: box.value for k, box in _boxes(donating).items()}
        kept = {k: box.value for k, box in _boxes(plain).items()}
        args = [X[:batch], Y[:batch], 0.1 * step]
        out, ref = donating.test(("update", args)), plain.test(("update", args))
        np.testing.assert_allclose(out[0], ref[0], rtol=1e-6)
        after = donating.executor.get_weights(trainable_only=False)
        for k, v in plain.executor.get_weights(trainable_only=False).items():
            np.testing.assert_allclose(after[k], v, rtol=1e-6, err_msg=f"{k} after update {step}")
        changed = [k for k in before if not np.array_equal(np.asarray(kept[k]), after[k])]
        # The weights and the optimizer's slots changed, their old buffers were given to XLA; without donation
        # the old arrays stay alive.
        assert any("kernel" in k for k in changed) and len(changed) >= 4, changed
        assert all(before[k].is_deleted() for k in changed), [k for k in changed if not before[k].is_deleted()]
        assert not any(v.is_deleted() for v in kept.values())
    assert donating.executor.trace_counts["update"] == plain.executor.trace_counts["update"] == 2


def test_acting_donates_nothing_and_reads_the_donated_updates():
    donating, plain = _pair()
    before = {k: box.value for k, box in _boxes(donating).items()}
    np.testing.assert_allclose(donating.test(("predict", [X])), plain.test(("predict", [X])), rtol=1e-6)
    assert not any(v.is_deleted() for v in before.values())
    donating.test(("update", [X, Y, 0.0]))
    plain.test(("update", [X, Y, 0.0]))
    np.testing.assert_allclose(donating.test(("predict", [X])), plain.test(("predict", [X])), rtol=1e-6)


def test_a_shared_buffer_inside_one_graph_is_copied_before_it_is_donated():
    test = ComponentTest(Twins(), dict(x=FloatBox(add_batch_rank=True)), backend="jax")
    boxes = _boxes(test)
    a, b = boxes["twins/a"], boxes["twins/b"]
    test.test(("sync", []))
    b.value = a.value  # As a target network's sync may leave it (JAX returns a forwarded input as it is).
    shared = a.value
    out = test.test(("step", [np.ones(4, np.float32)]))
    assert float(out) == 4.0 and float(test.read_variable_values("twins/a")) == 4.0
    assert not shared.is_deleted() and float(b.value) == 0.0  # b's value survived a's donation.
    test.test(("step", [np.ones(2, np.float32)]))
    assert float(test.read_variable_values("twins/a")) == 6.0 and float(test.read_variable_values("twins/b")) == 0.0


class Twins(Component):
    """Two variables: ``step`` adds the input's sum to ``a``, ``sync`` copies ``a`` into ``b``."""

    def __init__(self):
        super().__init__(scope="twins")
        self.a = self.b = None

    def create_variables(self, input_spaces, action_space=None):
        self.a = self.get_variable("a", shape=(), initializer="zeros", trainable=False)
        self.b = self.get_variable("b", shape=(), initializer="zeros", trainable=False)

    @rlgraph_api
    def step(self, x):
        return self._graph_fn_step(x)

    @rlgraph_api
    def sync(self):
        return self._graph_fn_sync()

    @graph_fn
    def _graph_fn_step(self, x):
        return self.ops.assign(self.a, self.a + self.ops.sum(x))

    @graph_fn
    def _graph_fn_sync(self):
        return self.ops.assign(self.b, self.a)


class Memorizer(Component):
    """A replay memory whose storage is a variable of the graph."""

    def __init__(self):
        super().__init__(scope="memorizer")
        self.memory = ReplayMemory(1000)
        self.add_components(self.memory)

    @rlgraph_api
    def observe(self, states):
        return self.memory.insert_records(states)


def test_a_replay_memory_insert_writes_into_its_storage_in_place():
    """The point of donation: without it, every insert of a few records copies the whole storage."""
    test = ComponentTest(Memorizer(), dict(states=FloatBox(shape=(64,), add_batch_rank=True)), backend="jax")
    storage = _boxes(test)["memorizer/replay-memory/storage"]
    states = RNG.normal(size=(5, 64)).astype(np.float32)
    test.test(("observe", [states]))
    old = storage.value
    pointer = old.unsafe_buffer_pointer()
    test.test(("observe", [states + 1]))
    assert old.is_deleted() and storage.value.unsafe_buffer_pointer() == pointer
    stored = test.read_variable_values("memorizer/replay-memory/storage")
    np.testing.assert_array_equal(stored[:10], np.concatenate([states, states + 1]))
    assert not stored[10:].any()


class HostChecked(Component):
    """Adds the sum of its input to a total, through a host call that refuses a negative sum."""

    def __init__(self):
        super().__init__(scope="host-checked")
        self.total = None

    def create_variables(self, input_spaces, action_space=None):
        self.total = self.get_variable("total", shape=(), initializer="zeros", trainable=False)

    @rlgraph_api
    def add(self, x):
        return self._graph_fn_add(x)

    @graph_fn
    def _graph_fn_add(self, x):
        def checked(s):
            if s < 0:
                raise RLGraphError("a negative sum")
            return [s]
        (s,) = self.ops.host_call(checked, [self.ops.sum(x)], [(np.float32, ())])
        return self.ops.assign(self.total, self.total + s)


def test_a_program_that_calls_the_host_donates_nothing_and_a_failed_call_keeps_the_variables():
    test = ComponentTest(HostChecked(), dict(x=FloatBox(add_batch_rank=True)), backend="jax")
    box = _boxes(test)["host-checked/total"]
    assert float(test.test(("add", [np.ones(3, np.float32)]))) == 3.0
    old = box.value
    with pytest.raises(RLGraphRuntimeError, match="a negative sum"):
        test.test(("add", [-np.ones(3, np.float32)]))
    assert not old.is_deleted() and float(test.read_variable_values("host-checked/total")) == 3.0
    assert float(test.test(("add", [np.ones(2, np.float32)]))) == 5.0 and not old.is_deleted()
    assert "add" not in test.executor.eager_methods


def test_execute_steps_donates_and_equals_one_without_donation():
    donating, plain = _pair()
    rows = np.stack([RNG.permutation(32)[:8] for _ in range(6)])
    before = {k: box.value for k, box in _boxes(donating).items()}
    out = donating.executor.execute_steps("update", rows, X, Y, 0.0)
    ref = plain.executor.execute_steps("update", rows, X, Y, 0.0)
    np.testing.assert_allclose(out[0], ref[0], rtol=1e-5)
    after = donating.executor.get_weights(trainable_only=False)
    for k, v in plain.executor.get_weights(trainable_only=False).items():
        np.testing.assert_allclose(after[k], v, rtol=1e-5, atol=1e-7, err_msg=k)
    assert any(before[k].is_deleted() for k in before if "kernel" in k)


def test_values_put_on_the_device_do_not_share_the_callers_numpy_memory():
    """Variables set from numpy and converted inputs are copies (on a CPU, ``jax.device_put`` of a large enough
    array would share its memory): a later write to the caller's array (a reused buffer) changes nothing, and a
    donating insert never writes into it."""
    test = ComponentTest(Memorizer(), dict(states=FloatBox(shape=(64,), add_batch_rank=True)), backend="jax")
    storage = np.ones((1000, 64), np.float32)
    test.executor.set_weights({"memorizer/replay-memory/storage": storage})
    storage[:] = 7.0
    test.test(("observe", [np.zeros((5, 64), np.float32)]))
    stored = test.read_variable_values("memorizer/replay-memory/storage")
    assert not stored[:5].any() and (stored[5:] == 1.0).all() and (storage == 7.0).all()
    x = np.ones(1 << 16, np.float32)
    converted = test.executor.backend.to_backend(x)
    x[:] = 5.0
    np.testing.assert_array_equal(np.asarray(converted), 1.0)
