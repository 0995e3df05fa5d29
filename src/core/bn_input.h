/*
 * An input of an add that may be a batchnorm's output, computed as the add
 * reads it (graph/fuse.c, ct_fuse_bn_add): x itself where stats is NULL,
 * else x*scale + shift per channel (core/math_shared.h's ct_bn_scale_shift)
 * from stats ([2, C]: mean, invstd), gamma and beta, rounded as the apply
 * would store it.  x has the add's dtype; the rest is f32.
 */
#ifndef CT_CORE_BN_INPUT_H
#define CT_CORE_BN_INPUT_H

typedef struct ct_bn_input {
    const void *x;
    const float *stats, *gamma, *beta;
} ct_bn_input;

/* A batchnorm whose parameter gradients the kernel that makes its dy (an
 * add or a max pool's backward) computes as it stores it (graph/fuse.c,
 * ct_fuse_bn_params): its input x (dy's dtype), statistics ([2, C]: mean, invstd) and where
 * its dparams ([2, C]: dgamma, dbeta, f32) go; x NULL: none. */
typedef struct ct_bn_params_out {
    const void *x;
    const float *stats;
    float *dparams;
} ct_bn_params_out;

#endif
