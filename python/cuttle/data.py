"""Datasets as the C library loads them (ct_dataset_load), normalized."""
import ctypes

import numpy as np

from ._lib import P, check, encode, lib
from ._net import pointer


class Dataset:
    """One split of a known dataset (a ct_dataset), freed by close()."""

    def __init__(self, name, split, data_dir=None):
        handle = P()
        check(lib.ct_dataset_load(encode(name), encode(data_dir), encode(split),
                                  ctypes.byref(handle)))
        self.handle, self.name = handle, name

    def __len__(self):
        return lib.ct_dataset_size(self.handle)

    @property
    def image_shape(self):
        h = self.handle
        return (lib.ct_dataset_channels(h), lib.ct_dataset_height(h), lib.ct_dataset_width(h))

    def batch(self, indices):
        """Images [n, C, H, W] (float32, normalized) and labels [n] (int64) of items."""
        indices = np.ascontiguousarray(indices, np.int64)
        images = np.empty((len(indices),) + self.image_shape, np.float32)
        labels = np.empty(len(indices), np.int64)
        check(lib.ct_dataset_batch(self.handle, indices.ctypes.data_as(ctypes.POINTER(
            ctypes.c_int64)), len(indices), pointer(images), pointer(labels)))
        return images, labels

    def close(self):
        if self.handle:
            lib.ct_dataset_free(self.handle)
            self.handle = None


def load_data(name="fashion-mnist", split="test", data_dir=None, limit=None):
    """A split ("train" or "test") of fashion-mnist, mnist, cifar10, cifar100
    or an image folder ("folder" with data_dir) as (images, labels): float32
    [N, C, H, W] normalized as training normalizes it (the dataset's
    per-channel mean and std) and int64 [N]; the first `limit` items only
    when given.  data_dir None: Debian's place for fashion-mnist."""
    dataset = Dataset(name, split, data_dir)
    try:
        n = len(dataset) if limit is None else min(int(limit), len(dataset))
        return dataset.batch(np.arange(n))
    finally:
        dataset.close()


def evaluate(net, dataset):
    """Mean cross-entropy and accuracy of a Net over a whole dataset, in
    batches of the net's size, the last padded with its first item (as
    cuttle eval and train do)."""
    n, batch = len(dataset), net.batch
    loss, correct = 0.0, 0
    logits = np.empty((batch, net.classes), np.float32)
    for start in range(0, n, batch):
        valid = min(batch, n - start)
        indices = np.full(batch, start, np.int64)
        indices[:valid] = np.arange(start, start + valid)
        images, labels = dataset.batch(indices)
        net.logits_of(images, logits)
        rows, labels = logits[:valid].astype(np.float64), labels[:valid]
        largest = rows.max(axis=1)
        log_sum = largest + np.log(np.exp(rows - largest[:, None]).sum(axis=1))
        loss += float((log_sum - rows[np.arange(valid), labels]).sum())
        correct += int((logits[:valid].argmax(axis=1) == labels).sum())
    return loss / n, correct / n
