/* What the build holds (CUDA, NCCL, MPI) and how many CUDA devices the runtime sees. */
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
