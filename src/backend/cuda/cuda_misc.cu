// Error reporting and device queries shared by the assay CUDA kernels.
#include "common.cuh"

static thread_local char g_last_error[512];

int assay_cuda_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    return -1;
}

extern "C" const char *assay_cuda_last_error(void) { return g_last_error; }

extern "C" int assay_cuda_sm_count(void) {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
    return n;
}

// The driver's cuTensorMapEncodeTiled through the runtime (no -lcuda link): looked up once, nullptr if absent.
PFN_cuTensorMapEncodeTiled_v12000 assay_cuda_tensor_map_encoder() {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    if (!fn) {
        void *ptr = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)ptr;
    }
    return fn;
}
