"""from_spec: type lookup, unknown types and keys, JSON files, nested specs."""
import json

import pytest

from rlgraph.components import Component, DenseLayer, NeuralNetwork, ReplayMemory
from rlgraph.components.layers import Layer
from rlgraph.components.memories import Memory
from rlgraph.utils.errors import RLGraphSpecError


@pytest.mark.parametrize("name", ["DenseLayer", "dense-layer", "dense_layer", "DENSE LAYER", "dense"])
def test_type_lookup_is_case_and_separator_insensitive(name):
    layer = Layer.from_spec({"type": name, "units": 3})
    assert isinstance(layer, DenseLayer) and layer.units == 3


def test_unknown_type_lists_close_matches():
    with pytest.raises(RLGraphSpecError, match="unknown Layer type 'dense-layr'.*Did you mean: DenseLayer"):
        Layer.from_spec({"type": "dense-layr", "units": 3})


def test_unknown_key_names_key_component_and_accepted_keys():
    with pytest.raises(RLGraphSpecError) as info:
        Memory.from_spec({"type": "replay-memory", "capcity": 10}, _path="memory_spec")
    msg = str(info.value)
    assert msg.startswith("memory_spec.capcity: unknown key 'capcity' for ReplayMemory")
    assert "Did you mean 'capacity'" in msg and "Accepted keys:" in msg and "capacity" in msg


def test_nested_spec_errors_name_their_path():
    with pytest.raises(RLGraphSpecError, match=r"layers\[1\]\.unitz: unknown key 'unitz' for DenseLayer"):
        NeuralNetwork.from_spec({"layers": [{"type": "dense", "units": 2}, {"type": "dense", "unitz": 2}]})


def test_bad_values_get_clear_errors():
    with pytest.raises(RLGraphSpecError, match=r"capacity: expected a positive int, got -3"):
        ReplayMemory.from_spec({"capacity": -3})
    with pytest.raises(RLGraphSpecError, match=r"^DenseLayer\.activation: expected an activation name .*got 'relux'.*"
                                               r"Did you mean 'relu'\?"):
        DenseLayer.from_spec({"units": 2, "activation": "relux"})


def test_spec_from_json_file(tmp_path):
    path = tmp_path / "net.json"
    path.write_text(json.dumps({"type": "neural-network", "layers": [{"type": "dense", "units": 4}]}))
    net = Component.from_spec(str(path))
    assert isinstance(net, NeuralNetwork) and net.layers[0].units == 4
    with pytest.raises(RLGraphSpecError, match="does not exist"):
        Component.from_spec(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(RLGraphSpecError, match="not valid JSON"):
        Component.from_spec(str(tmp_path / "bad.json"))


def test_dotted_type_imports_a_users_class():
    layer = Layer.from_spec({"type": "rlgraph.components.layers.dense_layer.DenseLayer", "units": 2})
    assert isinstance(layer, DenseLayer)
    with pytest.raises(RLGraphSpecError, match="would import module 'no.such'.*RLGRAPH_ALLOW_IMPORT=1"):
        Layer.from_spec({"type": "no.such.Module"})
    with pytest.raises(RLGraphSpecError, match="is not a Layer"):
        Layer.from_spec({"type": "rlgraph.components.memories.ReplayMemory"})


def test_ready_objects_pass_through():
    dense = DenseLayer(2)
    assert Layer.from_spec(dense) is dense
