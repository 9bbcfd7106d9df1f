/* What the build holds (CUDA, NCCL, MPI) and how many CUDA devices the runtime sees. */
#include <stdio.h>

#include "exec/backend_cuda.h"
#include "ldt/exec.h"

#ifdef LDT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

int ldt_cuda_device_count(void) {
#ifdef LDT_HAVE_CUDA
    int n = 0;
    /* No driver or no GPU ("insufficient driver" here): any error means no device. */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
#else
    return 0;
#endif
}

int ldt__cuda_device_info(char *name, size_t n, int *sms, int *cc, double *clock_hz,
                          double *mem_Bps) {
    if (name && n) name[0] = 0;
    *sms = *cc = 0;
    *clock_hz = *mem_Bps = 0;
#if defined(LDT_HAVE_CUDA) && !defined(LDT_CUDA_EMU)
    int dev = 0, nsm = 0, clk = 0, mclk = 0, bus = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    if (name && n) snprintf(name, n, "%s", prop.name);
    *sms = nsm;
    *cc = prop.major * 10 + prop.minor;
    *clock_hz = clk * 1e3;
    *mem_Bps = mclk * 1e3 * 2.0 * (bus / 8.0);
    return 1;
#else
    return 0;
#endif
}

#ifdef LDT_HAVE_OPENBLAS
void openblas_set_num_threads(int);
#endif

void ldt_set_blas_threads(int n) {
#ifdef LDT_HAVE_OPENBLAS
    openblas_set_num_threads(n > 0 ? n : 1);
#else
    (void)n;
#endif
}

int ldt_built_with_cuda(void) {
#ifdef LDT_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int ldt_built_with_nccl(void) {
#ifdef LDT_HAVE_NCCL
    return 1;
#else
    return 0;
#endif
}

int ldt_built_with_mpi(void) {
#ifdef LDT_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

int ldt_cuda_emulated(void) {
#ifdef LDT_CUDA_EMU
    return 1;
#else
    return 0;
#endif
}
