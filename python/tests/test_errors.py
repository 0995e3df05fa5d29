"""Bad input raises an exception with a message that says what was wrong;
nothing reaches the C library that could crash the interpreter."""
import numpy as np
import pytest

import cuttle


@pytest.fixture(scope="module")
def model():
    with cuttle.Model() as m:
        yield m


def test_error_is_a_runtime_error():
    assert issubclass(cuttle.Error, RuntimeError)


def test_missing_checkpoint(tmp_path):
    path = str(tmp_path / "nothing.safetensors")
    with pytest.raises(cuttle.Error, match="nothing.safetensors") as e:
        cuttle.Model.load(path)
    assert e.value.status == "CT_ERR_IO"


def test_corrupt_checkpoint(tmp_path):
    path = tmp_path / "junk.safetensors"
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    with pytest.raises(cuttle.Error) as e:
        cuttle.Model.load(str(path))
    assert e.value.status == "CT_ERR_FORMAT"


def test_truncated_checkpoint(model, tmp_path):
    path = tmp_path / "whole.safetensors"
    model.save(str(path))
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(cuttle.Error) as e:
        cuttle.Model.load(str(path))
    assert e.value.status == "CT_ERR_FORMAT"


def test_checkpoint_of_another_model(model, tmp_path):
    path = str(tmp_path / "simplecnn.safetensors")
    model.save(path)
    with pytest.raises(cuttle.Error, match="fc1"):
        cuttle.Model.load(path, model="lenet5")


@pytest.mark.parametrize("shape", [(2, 1, 28), (2, 3, 28, 28), (2, 1, 32, 32), (1, 28, 28)],
                         ids=["ndim", "channels", "size", "no_batch"])
def test_wrong_shape(model, shape):
    with pytest.raises(ValueError, match=r"\[N, 1, 28, 28\]"):
        model.predict(np.zeros(shape, np.float32))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int64, np.uint8])
def test_wrong_dtype(model, dtype):
    with pytest.raises(TypeError, match="float32"):
        model.predict(np.zeros((1, 1, 28, 28), dtype))


def test_not_an_array(model):
    with pytest.raises(TypeError, match="numpy array"):
        model.predict([[[[0.0] * 28] * 28]])


def test_unknown_model_name():
    with pytest.raises(cuttle.Error, match="resnet18"):  # the message lists the built-in ones
        cuttle.Model("resnet19")


@pytest.mark.parametrize("device", ["tpu", "cpu:x", "cuda:99"], ids=["tpu", "cpu_x", "cuda_99"])
def test_unknown_device(device):
    with pytest.raises(cuttle.Error):
        cuttle.Model(device=device)


def test_bad_input_shape_and_classes():
    with pytest.raises(ValueError, match="input_shape"):
        cuttle.Model(input_shape=(28, 28))
    with pytest.raises(ValueError, match="classes"):
        cuttle.Model(classes=0)


def test_load_state_dict_refuses_a_mismatch_and_changes_nothing(model):
    state = model.state_dict()
    before = model.predict(np.ones((1, 1, 28, 28), np.float32))
    wrong = dict(state, **{"fc3.weight": np.zeros((9, 84), np.float32)})
    with pytest.raises(ValueError, match="fc3.weight"):
        model.load_state_dict(wrong)
    missing = {k: v for k, v in state.items() if k != "conv1.bias"}
    with pytest.raises(ValueError, match="conv1.bias"):
        model.load_state_dict(missing)
    with pytest.raises(ValueError, match="float64"):
        model.load_state_dict(dict(state, **{"fc3.bias": state["fc3.bias"].astype(np.float64)}))
    assert np.array_equal(model.predict(np.ones((1, 1, 28, 28), np.float32)), before)
