"""``rlgraph tune``: a grid sweep on Ray Tune, each trial an ordinary rlgraph run, with its results and best
config written beside the trials."""
import json
import os
import signal

import pytest

from rlgraph.cli import main as cli_main
from rlgraph.engines.tune import format_table, parse_grid, run_sweep, target_of, trial_name
from rlgraph.utils.errors import RLGraphSpecError
from small_configs import small_dqn_config

ray = pytest.importorskip("ray")


def test_grid_values_are_parsed_like_set_values():
    grid = parse_grid(["optimizer_spec.learning_rate=1e-3,3e-4", "network_spec.0.units=[32],[64]",
                       'environment_spec.env_spec=CartPole-v1,"a,b"', "dueling=true,false"])
    assert grid["optimizer_spec.learning_rate"] == [("1e-3", 1e-3), ("3e-4", 3e-4)]
    assert [v for _, v in grid["network_spec.0.units"]] == [[32], [64]]
    assert [v for _, v in grid["environment_spec.env_spec"]] == ["CartPole-v1", "a,b"]
    assert [v for _, v in grid["dueling"]] == [True, False]
    for bad, message in (("lr", "expected KEY.PATH=V1,V2"), ("lr=1,,2", "an empty value")):
        with pytest.raises(RLGraphSpecError, match=message):
            parse_grid([bad])
    with pytest.raises(RLGraphSpecError, match="given twice"):
        parse_grid(["a=1", "a=2"])
    assert trial_name({"optimizer_spec.learning_rate": 0.001, "x.env": "CartPole-v1"}, 3) == \
        "learning_rate=0.001_env=CartPole-v1_seed=3"


def test_a_bad_grid_key_gets_the_did_you_mean_of_set_before_ray_starts(tmp_path, capsys):
    cfg = small_dqn_config(tmp_path)
    with pytest.raises(RLGraphSpecError, match="agent.optimizer_spec.learnin_rate: unknown key 'learnin_rate' for "
                                               "AdamOptimizer. Did you mean 'learning_rate'?"):
        run_sweep(cfg, ["optimizer_spec.learnin_rate=1e-3,3e-4"], logdir=str(tmp_path / "sweep"), backend="pytorch")
    assert cli_main(["tune", cfg, "--grid", "train_spec.chunk_step=10,20", "--backend", "pytorch",
                     "--logdir", str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err
    assert "train_spec.chunk_step: unknown key 'chunk_step'. Did you mean 'chunk_steps'?" in err
    assert len(err.strip().splitlines()) == 1
    assert not ray.is_initialized() and not os.path.exists(tmp_path / "sweep")


@pytest.fixture
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.timeout(240)
def test_a_two_trial_sweep_writes_results_and_the_best_config(tmp_path, local_ray):
    cfg = small_dqn_config(tmp_path)
    sweep = tmp_path / "sweep"
    handler = signal.getsignal(signal.SIGINT)
    out = run_sweep(cfg, ["optimizer_spec.learning_rate=1e-3,3e-4"], logdir=str(sweep),
                    sets=["network_spec.0.units=32"], steps=1200, backend="pytorch", seed=5)
    assert signal.getsignal(signal.SIGINT) is handler  # Tune's Ctrl-C handler is not left to the caller.
    rows = json.loads((sweep / "tune_results.json").read_text())
    assert rows == json.loads(json.dumps(out["rows"])) and len(rows) == 2
    assert sorted(r["params"]["optimizer_spec.learning_rate"] for r in rows) == [3e-4, 1e-3]
    targets = [target_of(r) for r in rows]
    assert targets == sorted(targets, reverse=True) and out["target"] == "eval_mean_return"
    for row in rows:
        assert set(row["params"]) == {"optimizer_spec.learning_rate"} and row["seed"] == 5
        assert row["status"] == "finished" and row["env_steps"] == 1200
        assert row["eval_mean_return"] is not None and row["final_mean_return"] is not None
        # Each trial is an ordinary run in its own logdir.
        summary = json.loads(open(os.path.join(row["logdir"], "summary.json")).read())
        assert summary["eval_mean_return"] == row["eval_mean_return"] and summary["env_steps"] == 1200
        stored = json.loads(open(os.path.join(row["logdir"], "config.json")).read())
        assert stored["optimizer_spec"]["learning_rate"] == row["params"]["optimizer_spec.learning_rate"]
        assert stored["network_spec"][0]["units"] == 32
        assert os.path.dirname(row["logdir"]) == str(sweep)
        assert any(f.startswith("events.out.tfevents") for f in os.listdir(row["logdir"]))
        assert os.path.isdir(os.path.join(row["logdir"], "checkpoints"))
    best = json.loads((sweep / "best_config.json").read_text())
    assert best["optimizer_spec"]["learning_rate"] == rows[0]["params"]["optimizer_spec.learning_rate"]
    assert best["network_spec"][0]["units"] == 32 and best["type"] == "dqn"
    table = format_table(out["rows"], ["optimizer_spec.learning_rate"]).splitlines()
    assert len(table) == 3 and "optimizer_spec.learning_rate" in table[0] and table[1].startswith("1 ")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_asha_from_the_command_line_sees_every_chunk_and_keeps_the_rows_of_stopped_trials(tmp_path, capsys,
                                                                                          local_ray):
    cfg = small_dqn_config(tmp_path)
    sweep = tmp_path / "sweep"
    assert cli_main(["tune", cfg, "--grid", "optimizer_spec.learning_rate=3e-3,1e-5", "--steps", "3200",
                     "--scheduler", "asha", "--backend", "pytorch", "--logdir", str(sweep),
                     "--set", "train_spec.eval_episodes=0"]) == 0
    out = capsys.readouterr().out
    assert "Trials sorted by final_mean_return:" in out and "tune_results.json" in out
    rows = json.loads((sweep / "tune_results.json").read_text())
    assert len(rows) == 2 and {r["status"] for r in rows} <= {"finished", "stopped"}
    assert "finished" in {r["status"] for r in rows}
    for row in rows:
        assert row["reports"] >= 2 and row["final_mean_return"] is not None  # Intermediate results per chunk.
        assert row["env_steps"] == 3200 if row["status"] == "finished" else row["env_steps"] < 3200
    best = json.loads((sweep / "best_config.json").read_text())
    assert best["optimizer_spec"]["learning_rate"] == rows[0]["params"]["optimizer_spec.learning_rate"]
