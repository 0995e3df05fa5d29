/* The choice among a backend's implementations of an op (graph/impl.h). */
#include "graph/impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"

enum {
    AUTO_REPS = 3,                       /* timed runs per implementation, after a warm-up */
    KEY_TENSORS = 3,                     /* the output and the first two inputs */
    KEY_ATTRS = 9,                       /* conv or pool attributes */
    KEY_INTS = 2 + KEY_TENSORS * CT_MAX_DIMS + KEY_ATTRS,
    NOT_TIMED = -1,
};

/* What the backend learned about one node shape. */
typedef struct memo_entry {
    int64_t key[KEY_INTS];
    uint8_t failed; /* bit i: implementation i (a vendor call) failed on it */
    int8_t fastest; /* auto: the index timed fastest, or NOT_TIMED */
} memo_entry;

struct ct_impl_memo {
    memo_entry *entries;
    int n, capacity;
};

static const ct_impl *const *list_of(const ct_backend *backend, ct_op op)
{
    return backend->impls && op < CT_OP_COUNT ? backend->impls[op] : NULL;
}

int ct_impl_list(const ct_backend *backend, ct_op op, const ct_impl *const **out)
{
    const ct_impl *const *list = list_of(backend, op);
    int count = 0;
    while (list && count < CT_MAX_IMPLS && list[count])
        count++;
    *out = list;
    return count;
}

static bool impl_supports(const ct_backend *backend, const ct_impl *impl, const ct_tensor *node)
{
    if (!impl->half && !backend->widens_half && ct_node_touches_half(node))
        return false;
    return !impl->supports || impl->supports(backend, node);
}

static bool impl_usable(const ct_backend *backend, const ct_impl *impl, const ct_tensor *node)
{
    return impl_supports(backend, impl, node) && (!impl->ready || impl->ready(backend));
}

bool ct_impl_supported(const ct_backend *backend, const ct_tensor *node)
{
    if (node->op < 64 && (backend->refused_ops >> node->op & 1))
        return false;
    const ct_impl *const *list = NULL;
    int count = ct_impl_list(backend, node->op, &list);
    for (int i = 0; i < count; i++)
        if (impl_supports(backend, list[i], node))
            return true;
    return false;
}

size_t ct_impl_workspace(const ct_backend *backend, const ct_tensor *node)
{
    const ct_impl *const *list = NULL;
    int count = ct_impl_list(backend, node->op, &list);
    size_t most = 0;
    for (int i = 0; i < count; i++) {
        if (!list[i]->workspace || !impl_supports(backend, list[i], node))
            continue;
        size_t bytes = list[i]->workspace(backend, node);
        most = bytes > most ? bytes : most;
    }
    return most;
}

/* The pool a CT_FUSES_RELU_MAXPOOL2X2 kernel computes: 2x2, stride 2, no
 * padding, the floor of the relu's size. */
static bool pool_is_2x2(const ct_tensor *pool)
{
    const ct_pool2d_shape *p = &pool->attr.pool;
    return p->kernel_h == 2 && p->kernel_w == 2 && p->stride_h == 2 && p->stride_w == 2 &&
           p->pad_h == 0 && p->pad_w == 0 && p->out_h == p->in_h / 2 &&
           p->out_w == p->in_w / 2;
}

bool ct_impl_fuses(const ct_backend *backend, const ct_tensor *producer, unsigned fusion,
                   const ct_tensor *other)
{
    if (backend->unfused ||
        (fusion == CT_FUSES_RELU_MAXPOOL2X2 && (!other || !pool_is_2x2(other))))
        return false;
    const ct_impl *const *list = NULL;
    int count = ct_impl_list(backend, producer->op, &list), supporting = 0;
    for (int i = 0; i < count; i++) {
        if (!impl_supports(backend, list[i], producer))
            continue;
        if (!(list[i]->fuses & fusion) ||
            (list[i]->fuses_with && !list[i]->fuses_with(producer, fusion, other)))
            return false;
        supporting++;
    }
    return supporting > 0;
}

/* ---- memory of node shapes ------------------------------------------------------- */

/* The node's op, its output's and first two inputs' shapes, its input count
 * and its conv or pool attributes. */
static void node_key(const ct_tensor *node, int64_t key[KEY_INTS])
{
    memset(key, 0, sizeof(int64_t) * KEY_INTS);
    key[0] = node->op;
    key[1] = node->n_src | (int64_t)node->dtype << 8 |
             (int64_t)(node->n_src > 0 ? node->src[0]->dtype : 0) << 16;
    for (int s = 0; s < KEY_TENSORS; s++) {
        const ct_tensor *t = s == 0 ? node : s <= node->n_src ? node->src[s - 1] : NULL;
        for (int d = 0; t && d < t->ndim; d++)
            key[2 + s * CT_MAX_DIMS + d] = t->shape[d];
    }
    int64_t *attrs = key + 2 + KEY_TENSORS * CT_MAX_DIMS;
    const ct_pool2d_shape *p = &node->attr.pool;
    const ct_conv2d_shape *c = &node->attr.conv;
    if (node->op == CT_OP_MAXPOOL2D || node->op == CT_OP_AVGPOOL2D) {
        int64_t fields[] = {p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h,
                            p->pad_w,    p->exclude_pad};
        memcpy(attrs, fields, sizeof fields);
    } else if (node->op == CT_OP_CONV2D || node->op == CT_OP_CONV2D_BWD_DATA ||
               node->op == CT_OP_CONV2D_BWD_WEIGHT) {
        int64_t fields[KEY_ATTRS] = {c->kernel_h, c->kernel_w,   c->stride_h,
                                     c->stride_w, c->pad_h,      c->pad_w,
                                     c->dilation_h, c->dilation_w, c->groups};
        memcpy(attrs, fields, sizeof fields);
    }
}

/* The entry of the node's shape, made if new; NULL without memory. */
static memo_entry *memo_of(ct_backend *backend, const ct_tensor *node)
{
    int64_t key[KEY_INTS];
    node_key(node, key);
    struct ct_impl_memo *memo = backend->memo;
    if (!memo && !(memo = backend->memo = calloc(1, sizeof *memo))) {
        ct_set_error(CT_ERR_MEMORY, "out of host memory for kernel choices");
        return NULL;
    }
    for (int i = 0; i < memo->n; i++)
        if (memcmp(memo->entries[i].key, key, sizeof key) == 0)
            return &memo->entries[i];
    if (memo->n == memo->capacity) {
        int capacity = memo->capacity ? 2 * memo->capacity : 32;
        memo_entry *grown = realloc(memo->entries, sizeof *grown * (size_t)capacity);
        if (!grown) {
            ct_set_error(CT_ERR_MEMORY, "out of host memory for kernel choices");
            return NULL;
        }
        memo->entries = grown;
        memo->capacity = capacity;
    }
    memo_entry *entry = &memo->entries[memo->n++];
    memset(entry, 0, sizeof *entry);
    memcpy(entry->key, key, sizeof key);
    entry->fastest = NOT_TIMED;
    return entry;
}

void ct_impl_forget(ct_backend *backend)
{
    if (backend && backend->memo)
        backend->memo->n = 0;
    if (backend)
        backend->choices++;
}

void ct_impl_memo_free(ct_backend *backend)
{
    if (backend && backend->memo) {
        free(backend->memo->entries);
        free(backend->memo);
        backend->memo = NULL;
    }
}

/* ---- the choice -------------------------------------------------------------------- */

static bool kernels_are(const ct_backend *backend, const char *mode)
{
    return strcmp(backend->kernels, mode) == 0;
}

/* The implementation the setting picks without timing, or -1 for none. */
static int preferred(const ct_backend *backend, const ct_impl *const *list, int count,
                     const ct_tensor *node, unsigned failed)
{
    bool vendor = kernels_are(backend, "vendor");
    bool by_name = !vendor && !kernels_are(backend, "native") && !kernels_are(backend, "auto");
    /* pass 0: the named or a vendor implementation; 1: native; 2: any */
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < count; i++) {
            if ((failed >> i & 1) || !impl_usable(backend, list[i], node))
                continue;
            bool named = by_name && strcmp(list[i]->name, backend->kernels) == 0;
            if (pass == 2 || (pass == 1 && list[i]->kind == CT_IMPL_NATIVE) ||
                (pass == 0 && (named || (vendor && list[i]->kind == CT_IMPL_VENDOR))))
                return i;
        }
    return -1;
}

static ct_status run_one(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                         const ct_impl *impl)
{
    return backend->iface->run_node ? backend->iface->run_node(backend, exec, node, impl)
                                    : impl->run(backend, exec, node);
}

/* A vendor call failed on the node's shape: never again there. */
static ct_status note_failure(ct_backend *backend, const ct_tensor *node, int index,
                              ct_status status)
{
    const ct_impl *const *list = list_of(backend, node->op);
    backend->vendor_failures++;
    if (status != CT_ERR_UNSUPPORTED) /* "unsupported" is a shape limit, not news */
        fprintf(stderr, "cuttle: %s: %s; this %s shape runs without %s from now on\n",
                backend->name, ct_last_error(), ct_op_name(node->op), list[index]->name);
    memo_entry *entry = memo_of(backend, node);
    if (!entry)
        return CT_ERR_MEMORY;
    entry->failed |= (uint8_t)(1u << index);
    return CT_OK;
}

static int64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* AUTO_REPS runs of one implementation, timed on the backend's device clock
 * where it has one; the warm-up run before them may fail (a vendor call),
 * which *ns = -1 reports. */
static ct_status time_impl(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                           int index, int64_t *ns)
{
    const ct_impl *impl = list_of(backend, node->op)[index];
    const ct_backend_i *iface = backend->iface;
    *ns = -1;
    ct_status status = run_one(backend, exec, node, impl);
    if (status != CT_OK)
        return impl->kind == CT_IMPL_VENDOR ? note_failure(backend, node, index, status)
                                            : status;
    void *timer = NULL;
    if (iface->timer_new) {
        CT_TRY(iface->timer_new(backend, 2, false, &timer));
        iface->timer_mark(backend, timer, 0);
    }
    int64_t start = now_ns();
    for (int rep = 0; rep < AUTO_REPS && status == CT_OK; rep++)
        status = run_one(backend, exec, node, impl);
    if (timer)
        iface->timer_mark(backend, timer, 1);
    if (status == CT_OK)
        status = iface->synchronize(backend);
    *ns = now_ns() - start;
    if (status == CT_OK && timer)
        status = iface->timer_elapsed_ns(backend, timer, 1, ns);
    if (timer)
        iface->timer_free(backend, timer);
    return status;
}

/* "auto": the fastest of the implementations that can run the node, timed
 * once per shape. */
static ct_status choose_fastest(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                                int count, int *out)
{
    const ct_impl *const *list = list_of(backend, node->op);
    memo_entry *entry = memo_of(backend, node);
    if (!entry)
        return CT_ERR_MEMORY;
    int fastest = entry->fastest;
    if (fastest == NOT_TIMED || (entry->failed >> fastest & 1) ||
        !impl_usable(backend, list[fastest], node)) {
        if (backend->capturing) /* timing synchronizes, which a recording cannot */
            return ct_set_error(CT_ERR_STATE, "%s: %s on '%s' is not timed yet, so the step "
                                "cannot be recorded", backend->name, ct_op_name(node->op),
                                ct_tensor_name(node));
        int64_t best = -1;
        fastest = -1;
        for (int i = 0; i < count; i++) {
            int64_t ns = -1;
            if (!(entry->failed >> i & 1) && impl_usable(backend, list[i], node))
                CT_TRY(time_impl(backend, exec, node, i, &ns));
            if (ns >= 0 && (best < 0 || ns < best)) {
                best = ns;
                fastest = i;
            }
            entry = memo_of(backend, node); /* a failure may have grown the memo */
            if (!entry)
                return CT_ERR_MEMORY;
        }
        entry->fastest = (int8_t)fastest;
    }
    *out = fastest;
    return CT_OK;
}

static ct_status choose(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                        int *out)
{
    const ct_impl *const *list = NULL;
    int count = ct_impl_list(backend, node->op, &list);
    bool any_vendor = false;
    for (int i = 0; i < count; i++)
        any_vendor |= list[i]->kind == CT_IMPL_VENDOR;
    if (count > 1 && kernels_are(backend, "auto"))
        CT_TRY(choose_fastest(backend, exec, node, count, out));
    else
        *out = -1;
    if (*out >= 0)
        return CT_OK;
    unsigned failed = 0;
    if (any_vendor) { /* only vendor calls fail and are remembered */
        memo_entry *entry = memo_of(backend, node);
        if (!entry)
            return CT_ERR_MEMORY;
        failed = entry->failed;
    }
    *out = preferred(backend, list, count, node, failed);
    if (*out < 0)
        return ct_set_error(CT_ERR_INTERNAL, "%s: no implementation of %s can run '%s'",
                            backend->name, ct_op_name(node->op), ct_tensor_name(node));
    return CT_OK;
}

ct_status ct_impl_run(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                      const ct_impl **ran)
{
    const ct_impl *const *list = list_of(backend, node->op);
    for (;;) {
        int index = -1;
        CT_TRY(choose(backend, exec, node, &index));
        ct_status status = run_one(backend, exec, node, list[index]);
        /* while recording, a vendor call may fail because it is being
         * recorded: the step is run node by node instead, and nothing learned */
        if (status == CT_OK || list[index]->kind != CT_IMPL_VENDOR || backend->capturing) {
            backend->impl_ran[node->op] |= (uint8_t)(1u << index);
            if (ran)
                *ran = list[index];
            return status;
        }
        CT_TRY(note_failure(backend, node, index, status)); /* then the next choice */
    }
}

/* How many of nodes[0..n) the op's only implementation runs as one group
 * with nodes[0]: 1 where it has no group run or there is a choice to make. */
static int group_size(const ct_backend *backend, const ct_tensor *const *nodes, int n)
{
    const ct_impl *const *list = NULL;
    if (ct_impl_list(backend, nodes[0]->op, &list) != 1 || !list[0]->run_group ||
        !impl_usable(backend, list[0], nodes[0]))
        return 1;
    int size = 1;
    while (size < n && nodes[size]->op == nodes[0]->op && list[0]->groups(nodes[0], nodes[size]))
        size++;
    return size;
}

bool ct_impl_pairs(const ct_backend *backend, const ct_tensor *node, const ct_tensor *partner)
{
    if (backend->unfused) /* every node its own kernel */
        return false;
    const ct_impl *const *list = list_of(backend, node->op);
    for (int i = 0; list && i < CT_MAX_IMPLS && list[i]; i++)
        if (list[i]->run_pair && impl_supports(backend, list[i], node) &&
            list[i]->pairs_with(node, partner, NULL))
            return true;
    return false;
}

size_t ct_impl_pair_offset(const ct_backend *backend, const ct_tensor *node)
{
    return (ct_impl_workspace(backend, node) + 255) / 256 * 256;
}

size_t ct_impl_pair_workspace(const ct_backend *backend, const ct_tensor *node,
                              const ct_tensor *partner)
{
    return ct_impl_pair_offset(backend, node) + ct_impl_workspace(backend, partner);
}

/* nodes[0] and nodes[1] as one pair, where the plan prepared it and the
 * implementations chosen for both can (*paired false otherwise: nothing
 * ran). */
static ct_status run_pair(ct_backend *backend, const ct_exec *exec, const ct_tensor *const *nodes,
                          int n, bool *paired, const ct_impl **ran)
{
    *paired = false;
    if (n < 2 || !exec->pair_next || exec->pair_next[nodes[0]->id] != nodes[1])
        return CT_OK;
    int first = -1, second = -1;
    CT_TRY(choose(backend, exec, nodes[0], &first));
    CT_TRY(choose(backend, exec, nodes[1], &second));
    const ct_impl *impl = list_of(backend, nodes[0]->op)[first];
    const ct_impl *partner = list_of(backend, nodes[1]->op)[second];
    if (!impl->run_pair || !impl->pairs_with(nodes[0], nodes[1], partner))
        return CT_OK;
    *paired = true;
    backend->impl_ran[nodes[0]->op] |= (uint8_t)(1u << first);
    backend->impl_ran[nodes[1]->op] |= (uint8_t)(1u << second);
    if (ran)
        *ran = impl;
    return impl->run_pair(backend, exec, nodes[0], nodes[1]);
}

ct_status ct_impl_run_next(ct_backend *backend, const ct_exec *exec,
                           const ct_tensor *const *nodes, int n, int *done,
                           const ct_impl **ran)
{
    bool paired = false;
    ct_status status = run_pair(backend, exec, nodes, n, &paired, ran);
    if (paired || status != CT_OK) {
        *done = 2;
        return status;
    }
    *done = group_size(backend, nodes, n);
    if (*done == 1)
        return ct_impl_run(backend, exec, nodes[0], ran);
    const ct_impl *impl = list_of(backend, nodes[0]->op)[0];
    backend->impl_ran[nodes[0]->op] |= 1u;
    if (ran)
        *ran = impl;
    return impl->run_group(backend, exec, nodes, *done);
}

bool ct_half_layer_inputs(const ct_tensor *node)
{
    if (!ct_dtype_is_half(node->dtype))
        return false;
    bool forward = node->op == CT_OP_CONV2D || node->op == CT_OP_LINEAR;
    for (int i = 0; i < node->n_src; i++)
        if (node->src[i]->dtype != (forward && i == 2 ? CT_F32 : node->dtype))
            return false;
    return true;
}

bool ct_sgd_nodes_group(const ct_tensor *a, const ct_tensor *b)
{
    const ct_sgd_args *x = &a->attr.sgd, *y = &b->attr.sgd;
    return a->n_src == b->n_src && x->momentum == y->momentum &&
           x->dampening == y->dampening && x->weight_decay == y->weight_decay &&
           x->nesterov == y->nesterov;
}

bool ct_adam_nodes_group(const ct_tensor *a, const ct_tensor *b)
{
    const ct_adam_args *x = &a->attr.adam, *y = &b->attr.adam;
    return x->beta1 == y->beta1 && x->beta2 == y->beta2 && x->eps == y->eps &&
           x->weight_decay == y->weight_decay && x->decoupled == y->decoupled;
}

bool ct_impl_has_run(const ct_backend *backend, ct_op op, int index)
{
    return op < CT_OP_COUNT && (backend->impl_ran[op] >> index & 1);
}

/* ---- the setting ---------------------------------------------------------------------- */

/* Whether some implementation of the backend is called `name` (for
 * "vendor": is a vendor one, ready); their names go to `names` as
 * ", a, b, c," (each once). */
static bool find_impl(const ct_backend *backend, const char *name, char *names, size_t room)
{
    bool found = false;
    snprintf(names, room, ",");
    for (int op = 0; op < CT_OP_COUNT; op++) {
        const ct_impl *const *list = NULL;
        int count = ct_impl_list(backend, (ct_op)op, &list);
        for (int i = 0; i < count; i++) {
            const ct_impl *impl = list[i];
            if (strcmp(name, "vendor") == 0)
                found |= impl->kind == CT_IMPL_VENDOR && (!impl->ready || impl->ready(backend));
            else
                found |= strcmp(impl->name, name) == 0;
            char listed[64];
            snprintf(listed, sizeof listed, " %s,", impl->name);
            size_t used = strlen(names);
            if (!strstr(names, listed) && used + strlen(listed) < room)
                memcpy(names + used, listed, strlen(listed) + 1);
        }
    }
    return found;
}

static bool has_vendor_impls(const ct_backend *backend)
{
    for (int op = 0; op < CT_OP_COUNT; op++) {
        const ct_impl *const *list = NULL;
        int count = ct_impl_list(backend, (ct_op)op, &list);
        for (int i = 0; i < count; i++)
            if (list[i]->kind == CT_IMPL_VENDOR)
                return true;
    }
    return false;
}

ct_status ct_impl_set_choice(ct_backend *backend, const char *kernels)
{
    char names[256];
    bool fits = strlen(kernels) < CT_KERNELS_CAPACITY;
    bool found = find_impl(backend, fits ? kernels : "", names, sizeof names);
    if (strcmp(kernels, "vendor") == 0 && !found)
        return ct_set_error(CT_ERR_UNSUPPORTED, "kernels 'vendor' on %s: %s", backend->name,
                            has_vendor_impls(backend)
                                ? "no vendor library is loaded (`cuttle doctor` says why)"
                                : "it has no vendor libraries, only its own kernels");
    if (!found && strcmp(kernels, "native") != 0 && strcmp(kernels, "auto") != 0) {
        names[strlen(names) - 1] = '\0'; /* the last comma */
        return ct_set_error(CT_ERR_ARG,
                            "kernels '%s' on %s: use native, vendor, auto or the name of one of "
                            "its implementations:%s",
                            kernels, backend->name, names + 1);
    }
    snprintf(backend->kernels, sizeof backend->kernels, "%s", kernels);
    backend->choices++;
    if (backend->iface->rename)
        backend->iface->rename(backend);
    return CT_OK;
}
