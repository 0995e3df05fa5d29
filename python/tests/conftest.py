"""Shared fixtures: the command-line program, a Fashion-MNIST slice, and one
short training run of `cuttle train` on it.  Run from the repository root
with the package on PYTHONPATH and CUTTLE_LIBRARY naming the build's
libcuttle.so (tests/test_python.sh does both)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
FASHION = "/usr/share/datasets/fashion-mnist"
TRAIN_IMAGES, TEST_IMAGES = 640, 200
# the run both trainers make: 3 epochs of 10 steps, stopped after 25 (the
# last epoch partial), with the CLI's default recipe otherwise
RUN = {"epochs": 3, "batch": 64, "max_steps": 25, "seed": 3, "device": "cpu:2"}


def cuttle_cli(*args):
    """Run build/cuttle; its stdout, or a test failure with its stderr."""
    done = subprocess.run([os.path.join(BUILD, "cuttle"), *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"cuttle {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def cli_predict(*args):
    """Logits of `cuttle predict --json ARGS` as a float32 array [N, classes]."""
    out = json.loads(cuttle_cli("predict", "--json", "--threads", "2", *args))
    return np.array([p["logits"] for p in out["predictions"]], np.float32)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    if not os.path.exists(f"{FASHION}/train-images-idx3-ubyte.gz"):
        pytest.fail(f"{FASHION} is missing: apt-get install dataset-fashion-mnist")
    out = tmp_path_factory.mktemp("fashion")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "fashion_slice.py"), FASHION,
                    str(out), str(TRAIN_IMAGES), str(TEST_IMAGES)], check=True)
    return str(out)


@pytest.fixture(scope="session")
def cli_run(data_dir, tmp_path_factory):
    """The directory of the CLI's run (model.safetensors, metrics.jsonl)."""
    out = str(tmp_path_factory.mktemp("cli_run"))
    cuttle_cli("train", "--data-dir", data_dir, "--out", out, "--threads", "2",
               *[f"--{k.replace('_', '-')}={v}" for k, v in RUN.items() if k != "device"])
    return out


@pytest.fixture
def images():
    """70 random images: more than one predict batch of 64, the last partial."""
    return np.random.default_rng(5).standard_normal((70, 1, 28, 28), dtype=np.float32)
