"""pact.Tensor: numpy and DLPack in and out without copies, Pact's ownership kept."""

import gc

import numpy as np
import pytest
import torch
import torch.utils.dlpack

import pact


def test_numpy_round_trip_shares_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = pact.tensor(a)
    assert (t.shape, t.dtype, t.provider) == ([3, 4], "f32", "external")
    b = np.asarray(t)
    assert b.ctypes.data == a.ctypes.data
    assert not b.flags.writeable  # Pact's values are read-only
    a[1, 2] = -7.0  # the same memory, seen through Pact
    assert b[1, 2] == -7.0


@pytest.mark.parametrize("dtype,name", [(np.float32, "f32"), (np.float64, "f64"), (np.float16, "f16"),
                                        (np.int64, "i64"), (np.int32, "i32"), (np.uint8, "u8"), (np.int8, "i8"),
                                        (np.bool_, "bool"), (np.complex64, "c64")])
def test_every_dtype_maps(dtype, name):
    a = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
    t = pact.tensor(a)
    assert t.dtype == name
    np.testing.assert_array_equal(np.asarray(t), a)


def test_strided_and_negative_strides_are_views():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = a[::-1, 1::2]
    t = pact.tensor(v)
    assert t.strides == [-6, 2] and not t.is_contiguous
    np.testing.assert_array_equal(np.asarray(t), v)


def test_refuses_what_pact_cannot_hold():
    with pytest.raises(pact.Error) as e:
        pact.tensor(np.zeros(3, dtype=np.uint16), "weights")
    assert e.value.code == "dtype_mismatch" and "weights" in str(e.value)
    with pytest.raises(pact.Error) as e:
        pact.tensor(np.zeros((2,) * 9, dtype=np.float32))
    assert e.value.code == "rank_exceeded"
    with pytest.raises(pact.Error) as e:
        pact.tensor("not an array", "x")
    assert e.value.code == "invalid_argument" and "x" in str(e.value)


def test_pact_holds_the_array_it_reads():
    a = np.ones((1000,), dtype=np.float32)
    t = pact.tensor(a)
    with pytest.raises(ValueError):  # numpy refuses to resize an exported buffer
        a.resize((10,))  # (refcheck=False is numpy's own way to free memory others still read)
    del a
    gc.collect()
    assert float(np.asarray(t).sum()) == 1000.0  # the buffer is still Pact's to read


def test_torch_round_trip_through_dlpack_is_zero_copy():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = pact.tensor(x)
    assert t.shape == [2, 3]
    back = torch.utils.dlpack.from_dlpack(t)
    assert back.data_ptr() == x.data_ptr()
    x[0, 0] = 42
    assert back[0, 0].item() == 42
    bf = pact.tensor(torch.ones(4, dtype=torch.bfloat16))
    assert bf.dtype == "bf16"
    assert torch.equal(torch.utils.dlpack.from_dlpack(bf), torch.ones(4, dtype=torch.bfloat16))
    with pytest.raises(pact.Error) as e:
        memoryview(bf)  # numpy has no bfloat16 (np.asarray would fall back to an object array)
    assert e.value.code == "unsupported"


def test_a_dlpack_capsule_is_consumed_once():
    capsule = torch.utils.dlpack.to_dlpack(torch.zeros(3))
    pact.from_dlpack(capsule)
    with pytest.raises(pact.Error) as e:
        pact.from_dlpack(capsule)
    assert e.value.code == "invalid_argument"


def test_a_hundred_megabytes_in_and_out_copy_nothing():
    a = np.random.default_rng(0).standard_normal(25 * 1024 * 1024, dtype=np.float32)  # 100 MiB
    with pact.ledger() as events:
        t = pact.tensor(a)
        b = np.asarray(t)
        c = torch.utils.dlpack.from_dlpack(t)
    assert events.copies == []
    assert events.allocations == [{"reason": "ExternalImport", "bytes": a.nbytes, "provider": "external"}]
    assert b.ctypes.data == a.ctypes.data and c.data_ptr() == a.ctypes.data


def test_the_ledger_records_what_a_run_allocates():
    # The ledger above is not empty by construction: a run's kernel results are allocations in it.
    model = pact.from_torch(torch.nn.Linear(4, 2), torch.zeros(3, 4))
    x = np.ones((3, 4), dtype=np.float32)
    with pact.ledger() as events:
        (y,) = model.run(x)
    reasons = [e["reason"] for e in events.allocations]
    assert reasons.count("ExternalImport") == 1 and "OperationOutput" in reasons
    assert events.copies == []
    assert y.shape == (3, 2)
