"""Assembly: the meta graph records API and graph-function calls; misuse inside API methods is reported."""
import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component, DenseLayer, NeuralNetwork
from rlgraph.graphs.meta_graph_builder import MetaGraphBuilder
from rlgraph.spaces import FloatBox
from rlgraph.utils.decorators import count_return_values
from rlgraph.utils.errors import RLGraphAPIError, RLGraphBackendError, RLGraphBuildError


class TwoOutputs(Component):
    @rlgraph_api
    def split(self, x):
        a, b = self._graph_fn_split(x)
        return b, a

    @graph_fn
    def _graph_fn_split(self, x):
        return x * 2.0, x * 3.0


class Root(Component):
    def __init__(self):
        self.net = NeuralNetwork(DenseLayer(4), DenseLayer(2))
        self.two = TwoOutputs()
        super().__init__(self.net, self.two, scope="root")

    @rlgraph_api
    def act(self, states):
        return self.net.call(states)

    @rlgraph_api
    def both(self, states):
        a, b = self.two.split(states)
        return self.net.call(a), b


def test_meta_graph_lists_api_methods_and_call_chains():
    meta = MetaGraphBuilder().assemble(Root(), dict(states=FloatBox(shape=(3,), add_batch_rank=True)))
    assert meta.api_methods == ["act", "both", "variables"]
    assert meta.call_chain("act") == ["root.act", "root/neural-network.call", "root/neural-network/dense.call",
                                      "root/neural-network/dense-1.call"]
    assert meta.call_chain("both")[:2] == ["root.both", "root/two-outputs.split"]
    text = meta.describe("both")
    assert "[graph_fn] root/two-outputs._graph_fn_split" in text
    dot = meta.to_dot()
    assert dot.startswith("digraph") and "root/neural-network/dense._graph_fn_call" in dot
    # Before the build, nothing has a space.
    assert "?" in meta.describe("act")


def test_count_return_values_from_source():
    def one(self, x):
        return x

    def two(self, x):
        if x:
            return x, x
        return x, None

    def none(self, x):
        x.append(1)

    def nested_lambda(self, x):
        f = lambda y: (y, y)  # noqa: E731
        return f(x)

    assert count_return_values(one) == 1
    assert count_return_values(two) == 2
    assert count_return_values(none) == 0
    assert count_return_values(nested_lambda) == 1


class Arithmetic(Component):
    @rlgraph_api
    def bad(self, x):
        return x + 1.0


class Branching(Component):
    @rlgraph_api
    def bad(self, x):
        if x:
            return x
        return x


class Unpacking(Component):
    @rlgraph_api
    def bad(self, x):
        a, b = x
        return a


@pytest.mark.parametrize("cls, words", [(Arithmetic, "@graph_fn"), (Branching, "truth value"),
                                        (Unpacking, "unpacked")])
def test_records_cannot_be_computed_with_in_api_methods(cls, words):
    with pytest.raises(RLGraphAPIError, match=words):
        MetaGraphBuilder().assemble(cls(), dict(x=FloatBox()))


class Stranger(Component):
    def __init__(self, other):
        super().__init__(scope="stranger")
        self.other = other

    @rlgraph_api
    def call(self, x):
        return self.other.call(x)


def test_calling_a_component_that_is_not_a_sub_component_is_an_error():
    dense = DenseLayer(2)
    Component(dense, scope="elsewhere")
    with pytest.raises(RLGraphAPIError, match="not one of its sub-components"):
        MetaGraphBuilder().assemble(Stranger(dense), dict(x=FloatBox(shape=(2,), add_batch_rank=True)))


def test_missing_root_input_space_names_component_method_and_argument():
    with pytest.raises(RLGraphBuildError, match=r"argument 'inputs' of API method 'call' of the root component 'dense'"):
        MetaGraphBuilder().assemble(DenseLayer(3), dict())


class OnlyTF(Component):
    @rlgraph_api
    def run(self, x):
        return self._graph_fn_run(x)

    @graph_fn(backend="tf")
    def _graph_fn_run(self, x):
        return x


def test_missing_backend_implementation_is_reported():
    from rlgraph.tests import ComponentTest
    with pytest.raises(RLGraphBackendError, match="no implementation for backend 'pytorch'"):
        ComponentTest(OnlyTF(), dict(x=FloatBox(add_batch_rank=True)), backend="pytorch")


def test_per_backend_graph_fn_registration_keeps_all():
    from rlgraph.components.layers.lstm_layer import LSTMLayer  # One of the few true per-backend bodies.
    gf = LSTMLayer._graph_fn_call
    assert set(gf.impls) == {"tf", "pytorch", "jax"}
    assert np.all([callable(f) for f in gf.impls.values()])


def test_calling_an_api_method_of_an_unbuilt_component_is_an_error():
    with pytest.raises(RLGraphAPIError, match="not part of a built graph"):
        DenseLayer(2).call(np.zeros((1, 2)))
