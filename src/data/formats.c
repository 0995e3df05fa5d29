/*
 * ct_dataset_load: the list of every dataset format it can name.
 *
 * Why a list here, and not in dataset.c: the readers (idx.c, cifar.c,
 * folder.c) build datasets through dataset.h, so if dataset.c named the
 * readers too, the two would depend on each other.  Instead dataset.h
 * declares the descriptor type (ct_dataset_format: a name and a load
 * function) and the lookup (ct_dataset_load_from), each reader exports its
 * own descriptors in its own header, and this file, above them all, is the
 * only one that knows every format.  Every dependency points down:
 *
 *     formats.c -> idx.c, cifar.c, folder.c (+ image.c) -> dataset.c
 *     formats.c -> dataset.c (the lookup)
 *
 * Why an explicit list and not self-registration (a constructor per reader
 * adding itself to a global table): libcuttle.a is also a static archive,
 * and the linker takes from it only the objects that something references,
 * so a reader that nothing names would silently vanish from
 * ct_dataset_load.  Here ct_dataset_load names every descriptor, and
 * linking it pulls every reader in.
 *
 * To add a format: export a const ct_dataset_format from its reader, declare
 * it in the reader's header, and add it below.  The order is the order in
 * which "unknown dataset" lists the names.
 */
#include "data/cifar.h"
#include "data/dataset.h"
#include "data/folder.h"
#include "data/idx.h"

static const ct_dataset_format *const formats[] = {
    &ct_idx_fashion_mnist_format,
    &ct_idx_mnist_format,
    &ct_cifar10_format,
    &ct_cifar100_format,
    &ct_folder_format,
};

ct_status ct_dataset_load(const char *name, const char *dir, const char *split,
                          ct_dataset **out)
{
    return ct_dataset_load_from(formats, sizeof formats / sizeof formats[0], name, dir, split,
                                out);
}
