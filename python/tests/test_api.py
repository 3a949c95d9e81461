"""pact.plan, pact.train, pact.capture and pact.cli: the CLI's own code, in this process."""

import json
import os

import pytest

import pact

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "examples", "models", "digits_mlp.json")


def test_plan_a_file_a_dict_and_a_capture_directory():
    audit = pact.plan(MLP)
    assert audit["schema"] == "pact.plan-audit.v1" and audit["verdict"] == "accepted"
    assert all(k["capsule"] for k in audit["kernels"])
    with open(MLP) as f:
        doc = json.load(f)
    assert pact.plan(doc, "cpu-deterministic")["profile"] == "cpu-deterministic"
    assert pact.plan(MLP, vjp=True)["vjp"] is True
    capture_dir = os.path.join(ROOT, "tests", "fixtures", "torch", "mlp")
    assert pact.plan(capture_dir)["verdict"] == "accepted"


def test_plan_errors_carry_codes():
    with pytest.raises(pact.Error) as e:
        pact.plan(os.path.join(ROOT, "no", "such", "model.json"))
    assert e.value.code == "io_error"
    with pytest.raises(pact.Error) as e:
        pact.plan({"schema": "pact.ir.v1", "nodes": "not a list"})
    assert e.value.code in ("parse_error", "invalid_argument")
    with pytest.raises(pact.Error) as e:
        pact.plan(MLP, profile="no-such-profile")
    assert e.value.code == "invalid_argument" and "no-such-profile" in str(e.value)


def test_train_returns_the_report(tmp_path):
    report = pact.train(model="mlp", epochs=2, seed=3, threads=1, out=tmp_path)
    assert os.path.exists(os.path.join(report["run_dir"], "report.json"))
    assert report["config"]["profile"] == "cpu-checked" and report["config"]["epochs"] == 2
    epochs = report["epochs"]
    assert len(epochs) == 2 and epochs[-1]["accuracy"] > 0.8
    again = pact.train(model="mlp", epochs=2, seed=3, threads=1, out=tmp_path)
    assert again["run_dir"] != report["run_dir"]
    assert [e["loss"] for e in again["epochs"]] == [e["loss"] for e in epochs]  # cpu-checked is seeded


def test_train_refuses_options_as_the_cli_does(tmp_path):
    with pytest.raises(pact.Error) as e:
        pact.train(model="mlp", epochs=1, no_such_option=3, out=tmp_path)
    assert e.value.code == "invalid_argument" and "no-such-option" in str(e.value)
    with pytest.raises(pact.Error) as e:
        pact.train(model="mlp", epochs=0, out=tmp_path)
    assert e.value.code == "invalid_argument"
    assert os.listdir(tmp_path) == []  # a run that never started leaves no directory behind


def test_train_writes_where_run_dir_says_and_never_over_a_report(tmp_path):
    run = tmp_path / "my-run"
    report = pact.train(model="char-transformer", steps=3, batch_size=2, seed=1, threads=1, run_dir=run)
    assert report["run_dir"] == str(run)
    assert report["config"]["model"] == "char-transformer" and len(report["step_loss"]) == 3
    assert report["evaluation_loss"] > 0 and report["plan_audit"]["verdict"] == "accepted"
    assert (run / "report.html").exists() and (run / "graph.svg").exists()
    before = (run / "report.json").read_bytes()
    with pytest.raises(pact.Error) as e:
        pact.train(model="mlp", epochs=1, run_dir=run)
    assert e.value.code == "invalid_argument" and "already holds" in str(e.value)
    assert (run / "report.json").read_bytes() == before
    with pytest.raises(pact.Error) as e:
        pact.train(model="mlp", epochs=1, run_dir=tmp_path / "other", out=tmp_path)
    assert e.value.code == "invalid_argument"


def test_capture_llama_structure_only():
    c = pact.capture("llama", config="tiny")
    assert c["structure_only"] is True and c["schema"].startswith("pact.capture")
    assert c["banner"]
    smaller = pact.capture("llama", config="tiny", seq=8)
    assert smaller["digests"] != c["digests"]


def test_cli_runs_in_process(capfd):
    assert pact.cli("plan", MLP, "--json") == 0
    out = capfd.readouterr().out
    assert json.loads(out)["verdict"] == "accepted"
    with pytest.raises(pact.Error) as e:
        pact.cli("plan")  # the model argument is required
    assert e.value.code == "invalid_argument"
