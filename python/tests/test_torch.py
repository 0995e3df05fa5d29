"""A state_dict is PyTorch's: it loads into the same model in torch, which
computes the same logits, and comes back unchanged through torch.save."""
import numpy as np
import pytest

import cuttle

torch = pytest.importorskip("torch")


class SimpleCNN(torch.nn.Module):
    """models/simplecnn.model in PyTorch (the same names and shapes)."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1, self.conv2 = torch.nn.Conv2d(1, 6, 5), torch.nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2 = torch.nn.Linear(256, 120), torch.nn.Linear(120, 84)
        self.fc3 = torch.nn.Linear(84, classes)

    def forward(self, x):
        f = torch.nn.functional
        x = f.max_pool2d(f.relu(self.conv1(x)), 2)
        x = f.max_pool2d(f.relu(self.conv2(x)), 2).flatten(1)
        return self.fc3(f.relu(self.fc2(f.relu(self.fc1(x)))))


def test_state_dict_loads_into_torch_with_the_same_logits(images):
    with cuttle.Model(seed=4) as m:
        net = SimpleCNN()
        net.load_state_dict({k: torch.from_numpy(v) for k, v in m.state_dict().items()})
        with torch.no_grad():
            expected = net(torch.from_numpy(images)).numpy()
        np.testing.assert_allclose(m.predict(images), expected, rtol=1e-4, atol=1e-5)


def test_state_dict_round_trips_through_torch_save(images, tmp_path):
    with cuttle.Model("resnet18", seed=4) as m, cuttle.Model("resnet18", seed=5) as other:
        torch.save({k: torch.from_numpy(v) for k, v in m.state_dict().items()},
                   tmp_path / "state.pt")
        loaded = torch.load(tmp_path / "state.pt")
        other.load_state_dict({k: v.numpy() for k, v in loaded.items()})
        assert all(np.array_equal(a, b) for a, b in zip(m.state_dict().values(),
                                                         other.state_dict().values()))
        assert np.array_equal(other.predict(images[:4]), m.predict(images[:4]))


def test_torch_weights_give_torch_logits(images):
    torch.manual_seed(0)
    net = SimpleCNN().eval()
    with cuttle.Model() as m:
        m.load_state_dict({k: v.numpy() for k, v in net.state_dict().items()})
        with torch.no_grad():
            expected = net(torch.from_numpy(images)).numpy()
        np.testing.assert_allclose(m.predict(images), expected, rtol=1e-4, atol=1e-5)
