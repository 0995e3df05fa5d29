"""cuttle.Model against the command line on the same checkpoint."""
import json
import os

import numpy as np
import pytest

import cuttle
from conftest import cli_predict, cuttle_cli


@pytest.fixture
def model(cli_run):
    with cuttle.Model.load(os.path.join(cli_run, "model.safetensors"), device="cpu:2") as m:
        yield m


def test_predict_equals_cli_predict(model, cli_run, images, tmp_path):
    np.save(tmp_path / "x.npy", images)
    cli = cli_predict("--weights", os.path.join(cli_run, "model.safetensors"),
                      str(tmp_path / "x.npy"))
    ours = model.predict(images)
    assert ours.dtype == np.float32 and ours.shape == (70, 10)
    assert np.array_equal(ours, cli)


def test_evaluate_equals_cli_eval(model, cli_run, data_dir):
    cli = json.loads(cuttle_cli("eval", "--weights", os.path.join(cli_run, "model.safetensors"),
                                "--data-dir", data_dir, "--threads", "2", "--json"))
    ours = model.evaluate(data_dir=data_dir)
    assert ours["n"] == cli["n"] == 200
    assert f"{ours['accuracy']:.6f}" == f"{cli['accuracy']:.6f}"
    assert f"{ours['loss']:.6f}" == f"{cli['loss']:.6f}"


def test_saved_model_reads_back_and_the_cli_predicts_it(model, images, tmp_path):
    path = str(tmp_path / "saved.safetensors")
    model.save(path)
    with cuttle.Model.load(path) as back:
        assert np.array_equal(back.predict(images), model.predict(images))
        assert (back.class_names, back.mean, back.std) == (model.class_names, model.mean,
                                                           model.std)
    np.save(tmp_path / "x.npy", images)
    assert np.array_equal(cli_predict("--weights", path, str(tmp_path / "x.npy")),
                          model.predict(images))


def test_exported_onnx_predicts_the_same_in_the_cli(model, images, tmp_path):
    path = str(tmp_path / "model.onnx")
    model.export_onnx(path)
    np.save(tmp_path / "x.npy", images)
    assert np.array_equal(cli_predict("--model", path, str(tmp_path / "x.npy")),
                          model.predict(images))
    model.export_onnx(path, batch=5, opset=17)
    np.save(tmp_path / "x5.npy", images[:5])
    assert np.array_equal(cli_predict("--model", path, str(tmp_path / "x5.npy")),
                          model.predict(images[:5]))


def write_plain_safetensors(path, state):
    """A state_dict as safetensors without cuttle's metadata (as PyTorch's
    safetensors.torch.save_file writes it)."""
    header, offset = {}, 0
    for name, value in state.items():
        kind = {np.float32: "F32", np.int64: "I64"}[value.dtype.type]
        header[name] = {"dtype": kind, "shape": list(value.shape),
                        "data_offsets": [offset, offset + value.nbytes]}
        offset += value.nbytes
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for value in state.values():
            f.write(value.tobytes())


def test_plain_state_dict_loads_given_its_model(model, images, tmp_path):
    path = str(tmp_path / "plain.safetensors")
    write_plain_safetensors(path, model.state_dict())
    with pytest.raises(cuttle.Error, match="model=, input_shape= and classes="):
        cuttle.Model.load(path)
    with cuttle.Model.load(path, model="simplecnn", input_shape=(1, 28, 28), classes=10) as m:
        assert np.array_equal(m.predict(images), model.predict(images))
        assert m.class_names == [str(c) for c in range(10)] and m.dataset is None


def test_predict_takes_any_batch(model, images):
    whole = model.predict(images)
    assert model.predict(images[:0]).shape == (0, 10)
    for n in (1, 3, 64, 65):
        np.testing.assert_allclose(model.predict(images[:n]), whole[:n], rtol=1e-5, atol=1e-5)


def test_predict_copies_a_strided_array(model, images):
    strided = np.asfortranarray(images)
    assert not strided.flags.c_contiguous
    assert np.array_equal(model.predict(strided), model.predict(images))


def test_load_state_dict_sets_the_weights(model, images):
    fresh = cuttle.Model("simplecnn", classes=10, seed=9)
    assert not np.array_equal(fresh.predict(images), model.predict(images))
    fresh.load_state_dict(model.state_dict())
    assert np.array_equal(fresh.predict(images), model.predict(images))
    fresh.close()


@pytest.mark.parametrize("name", ["lenet5", "resnet18", "vgg8_bn"])
def test_builtin_models_build_and_predict(name):
    with cuttle.Model(name, classes=7, input_shape=(3, 32, 32)) as m:
        assert m.predict(np.zeros((2, 3, 32, 32), np.float32)).shape == (2, 7)
        state = m.state_dict()
    assert all(isinstance(v, np.ndarray) for v in state.values())
    if name == "resnet18":
        assert state["bn1.num_batches_tracked"].dtype == np.int64


def test_auto_device_takes_the_gpu_or_the_cpu():
    with cuttle.Model(device="auto") as m:
        assert m.device.startswith(("cpu", "cuda"))


def test_closed_model_raises_instead_of_crashing(images):
    m = cuttle.Model()
    m.close()
    m.close()
    for call in (lambda: m.predict(images), m.state_dict, lambda: m.save("x.safetensors")):
        with pytest.raises(cuttle.Error, match="closed"):
            call()
