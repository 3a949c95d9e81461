"""pact.from_torch / pact.load: a PyTorch module exported in-process, planned once, run on arrays."""

import numpy as np
import pytest
import torch

import pact


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))


def test_run_agrees_with_pytorch_on_numpy_and_torch_inputs():
    module = mlp()
    x = torch.randn(5, 8)
    model = pact.from_torch(module, x)
    assert model.accepted and model.inputs == [("input", "f32", (5, 8))] and model.outputs == ["output_0"]
    with torch.no_grad():
        want = module(x).numpy()
    for given in (x.numpy(), x, pact.tensor(x)):
        (got,) = model.run(given)
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    (by_name,) = model.run(input=x.numpy())
    np.testing.assert_array_equal(by_name, model.run(x.numpy())[0])
    (as_torch,) = model.run(x, as_torch=True)
    assert isinstance(as_torch, torch.Tensor) and torch.allclose(as_torch, torch.from_numpy(want), atol=1e-5)


def test_a_wrong_kernel_would_be_seen():
    # The agreement check above can fail: other weights give other outputs.
    model = pact.from_torch(mlp(), torch.zeros(5, 8))
    other = mlp()
    with torch.no_grad():
        other[0].weight.add_(0.5)
        want = other(torch.ones(5, 8)).numpy()
    (got,) = model.run(np.ones((5, 8), np.float32))
    assert np.abs(got - want).max() > 1e-2


def test_audit_names_capsule_provider_evidence_and_verdict():
    model = pact.from_torch(mlp(), torch.zeros(2, 8))
    audit = model.audit
    assert audit, "every planned node has an entry"
    for node, entry in audit.items():
        assert entry["capsule"] and entry["provider"] and entry["verdict"] == "accepted", node
        assert {e["obligation"] for e in entry["evidence"]} >= {"shape", "forward_value"}
    assert model.audit_document["verdict"] == "accepted"
    ops = {entry["op"] for entry in audit.values()}
    assert "gelu" in ops


def test_a_rejected_plan_says_which_obligation_failed():
    # cpu-deterministic admits the reference provider alone, which computes f32 and f64: a bf16 model is refused.
    module = mlp().to(torch.bfloat16)
    model = pact.from_torch(module, torch.zeros(2, 8, dtype=torch.bfloat16), profile="cpu-deterministic")
    assert not model.accepted
    rejected = {n: e for n, e in model.audit.items() if e["verdict"] == "rejected"}
    assert rejected and all(e["failing"] for e in rejected.values())
    assert any("bf16" in f["reason"] for e in rejected.values() for f in e["failing"])
    with pytest.raises(pact.Error) as e:
        model.run(torch.zeros(2, 8, dtype=torch.bfloat16))
    assert e.value.code == "unsupported"
    # The same model under cpu-checked runs, its bf16 outputs handed back through DLPack.
    checked = pact.from_torch(module, torch.zeros(2, 8, dtype=torch.bfloat16))
    x = torch.randn(2, 8).to(torch.bfloat16)
    (y,) = checked.run(x, as_torch=True)
    with torch.no_grad():
        want = module(x)
    assert y.dtype == torch.bfloat16 and float((y.float() - want.float()).abs().max()) < 5e-2
    with pytest.raises(pact.Error) as e:
        checked.run(x)  # numpy has no bfloat16
    assert e.value.code == "unsupported"


def test_a_cuda_profile_without_a_device_says_what_was_probed():
    try:
        model = pact.from_torch(mlp(), torch.zeros(2, 8), profile="cuda-checked")
    except pact.Error as e:
        assert e.code == "no_device" and "probed" in str(e)
    else:  # a machine with a CUDA device plans it
        assert model.profile == "cuda-checked"


def test_bad_inputs_are_errors_naming_the_input():
    model = pact.from_torch(mlp(), torch.zeros(4, 8))
    cases = [
        ((np.zeros((4, 8), np.float64),), "dtype", "f64"),
        ((np.zeros((4, 9), np.float32),), "shape", "[4, 9]"),
        ((np.zeros((8, 4), np.float32).T,), "contiguous", "contiguous"),
        ((np.zeros((4, 8), np.float32), np.zeros(1)), "count", "2 inputs"),
    ]
    for args, what, text in cases:
        with pytest.raises(pact.Error) as e:
            model.run(*args)
        assert e.value.code == "invalid_argument", what
        assert text in str(e.value), (what, str(e.value))
        assert "input" in str(e.value), what
    with pytest.raises(pact.Error) as e:
        model.run(np.zeros((4, 8), np.float32), nonsense=np.zeros(1))
    assert "nonsense" in str(e.value)


def test_capture_structure_reports_the_parameters():
    model = pact.from_torch(mlp(), torch.zeros(2, 8))
    capture = model.capture_structure()
    assert capture["structure_only"] is True
    params = sum(s["elements"] for s in capture["sources"] if s.get("kind") == "parameter") \
        if capture["sources"] and "elements" in capture["sources"][0] else None
    want = sum(p.numel() for p in mlp().parameters())
    text = repr(capture)
    assert params == want or str(want) in text


def test_export_failures_are_pact_errors():
    class Writes(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(3))

        def forward(self, x):
            self.cache[0] = x.sum()
            return x + 1

    with pytest.raises(pact.Error) as e:
        pact.from_torch(Writes(), torch.ones(3))
    assert e.value.code == "unsupported" and "in place" in str(e.value)
    with pytest.raises(pact.Error):
        pact.from_torch(torch.nn.Linear(2, 2), torch.ones(3, 3))  # PyTorch itself fails: named


def test_resnet18_agrees_with_pytorch():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    module = torchvision.models.resnet18()
    module.eval()
    x = torch.randn(1, 3, 224, 224)
    model = pact.from_torch(module, x)
    with torch.no_grad():
        want = module(x).numpy()
    (got,) = model.run(x.numpy())
    scale = max(1.0, float(np.abs(want).max()))
    assert float(np.abs(got - want).max()) / scale <= 1e-4
