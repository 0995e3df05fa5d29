/*
 * CT_HD marks a function that nvcc compiles for the host and the device
 * alike; to a C compiler (and the emulated device's C++) it is nothing.
 */
#ifndef CT_CORE_HD_H
#define CT_CORE_HD_H

#ifdef __CUDACC__
#define CT_HD __host__ __device__
#else
#define CT_HD
#endif

#endif
