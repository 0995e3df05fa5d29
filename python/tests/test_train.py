"""cuttle.train against cuttle train: the same options give the same run."""
import json
import os

import numpy as np
import pytest

import cuttle
from conftest import RUN

TIMING = ("seconds", "images_per_second")


@pytest.fixture(scope="module")
def python_run(data_dir):
    metrics = []
    model = cuttle.train(data_dir=data_dir, callback=metrics.append, **RUN)
    yield model, metrics
    model.close()


def test_train_gives_the_cli_weights_bit_for_bit(python_run, cli_run):
    model, _ = python_run
    with cuttle.Model.load(os.path.join(cli_run, "model.safetensors")) as cli:
        ours, theirs = model.state_dict(), cli.state_dict()
    assert list(ours) == list(theirs)
    for name in ours:
        assert ours[name].dtype == theirs[name].dtype, name
        assert np.array_equal(ours[name], theirs[name]), name


def test_train_callback_gets_the_cli_metrics(python_run, cli_run):
    _, metrics = python_run
    with open(os.path.join(cli_run, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    assert [m["epoch"] for m in metrics] == [1, 2, 3]
    assert [m["partial"] for m in metrics] == [False, False, True]
    for ours, theirs in zip(metrics, lines, strict=True):
        for key in ("train_loss", "train_accuracy", "test_loss", "test_accuracy"):
            assert f"{ours[key]:.6f}" == f"{theirs[key]:.6f}", (ours["epoch"], key)
        assert f"{ours['lr']:.6g}" == f"{theirs['lr']:.6g}"


def test_train_is_reproducible(python_run, data_dir):
    model, metrics = python_run
    again = []
    with cuttle.train(data_dir=data_dir, callback=again.append, **RUN) as second:
        first_weights, second_weights = model.state_dict(), second.state_dict()
    strip = [{k: v for k, v in m.items() if k not in TIMING} for m in metrics]
    assert strip == [{k: v for k, v in m.items() if k not in TIMING} for m in again]
    assert all(np.array_equal(first_weights[k], second_weights[k]) for k in first_weights)


def test_trained_model_knows_its_data(python_run):
    model, _ = python_run
    assert (model.name, model.dataset, model.classes, model.input_shape) == \
        ("simplecnn", "fashion-mnist", 10, (1, 28, 28))
    assert model.class_names[0] == "T-shirt/top" and len(model.mean) == 1


@pytest.mark.parametrize("bad", [{"optim": "lion"}, {"augment": "rotate"}, {"epochs": 0},
                                 {"schedule": "linear"}, {"max_steps": -1}],
                         ids=["optim", "augment", "epochs", "schedule", "max_steps"])
def test_train_refuses_bad_options(bad):
    with pytest.raises(ValueError):
        cuttle.train(**bad)


def test_train_refuses_an_unknown_dataset():
    with pytest.raises(cuttle.Error, match="imagenet"):
        cuttle.train(data="imagenet")
