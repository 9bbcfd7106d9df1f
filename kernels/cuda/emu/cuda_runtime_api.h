/* The CUDA emulator: the runtime API header name some files include. */
#include "cuda_runtime.h"
