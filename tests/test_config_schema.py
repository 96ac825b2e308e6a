"""``rlgraph schema``: the JSON Schema of training configs accepts every shipped config and refuses bad keys."""
import glob
import json
import os

import jsonschema
import pytest

from rlgraph.cli import main as cli_main
from rlgraph.engines.config_schema import config_schema

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
TRAINING_CONFIGS = sorted(p for p in glob.glob(os.path.join(CONFIGS, "*.json"))
                          if "environment_spec" in json.load(open(p)))


@pytest.fixture(scope="module")
def validator():
    schema = config_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(validator, config):
    return [e.message for e in validator.iter_errors(config)]


def test_cli_prints_and_writes_a_valid_draft_2020_12_schema(tmp_path, capsys):
    assert cli_main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(printed)
    assert printed["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    out = tmp_path / "rlgraph-config.schema.json"
    assert cli_main(["schema", "--output", str(out)]) == 0
    assert json.loads(out.read_text()) == printed
    assert cli_main(["schema", "--output", str(tmp_path / "missing" / "x.json")]) == 2
    assert "cannot be written" in capsys.readouterr().err


@pytest.mark.parametrize("path", TRAINING_CONFIGS, ids=os.path.basename)
def test_every_shipped_config_validates(validator, path):
    with open(path) as f:
        assert errors(validator, json.load(f)) == []


def test_the_schema_lists_types_keys_and_rules(validator):
    schema = validator.schema
    assert {"dqn", "apex", "r2d2", "impala", "appo"} <= set(schema["properties"]["type"]["anyOf"][0]["enum"])
    train = schema["properties"]["train_spec"]["properties"]
    assert train["chunk_steps"]["minimum"] == 1 and train["chunk_steps"]["description"]
    execution = schema["properties"]["execution_spec"]["properties"]
    assert execution["transport"]["enum"] == ["shm", "grpc"] and execution["num_actors"]["default"] == 2
    assert "Environments per actor" in execution["envs_per_actor"]["description"]


@pytest.mark.parametrize("change, message", [
    (dict(train_spec={"chunk_steps": 0}), "0 is less than the minimum of 1"),
    (dict(train_spec={"chunk_step": 10}), "'chunk_step' was unexpected"),
    (dict(execution_spec={"transport": "tcp"}), "'tcp' is not one of"),
    (dict(environment_spec={"num_envs": 0}), "0 is less than the minimum of 1"),
    (dict(dueling="yes"), "'yes' is not of type 'boolean'"),
    (dict(discount=1.5), "1.5 is greater than the maximum of 1"),
    (dict(duelling=True), "'duelling' was unexpected"),
    (dict(unroll_length=8), "'unroll_length' was unexpected"),  # an IMPALA key in a DQN config
    (dict(type="ppo"), "'ppo' is not valid"),
    (dict(memory_spec={"type": "prio-replay"}), "is not valid under any of the given schemas"),
])
def test_bad_configs_do_not_validate(validator, change, message):
    with open(os.path.join(CONFIGS, "dqn_cartpole.json")) as f:
        config = dict(json.load(f), **change)
    found = errors(validator, config)
    assert any(message in e for e in found), found


def test_type_names_validate_as_the_lookup_reads_them(validator):
    with open(os.path.join(CONFIGS, "dqn_cartpole.json")) as f:
        config = json.load(f)
    for spelling in ("DQNAgent", "DQN", "dqn_agent"):
        assert errors(validator, dict(config, type=spelling)) == []
    assert errors(validator, dict(config, memory_spec=dict(config["memory_spec"], type="PrioritizedReplay"))) == []
