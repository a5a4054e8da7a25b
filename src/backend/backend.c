/* backend.c — the table of backends a model can run on, chosen by name (--device), never in model code. */
#include <string.h>

#include "assay/backend.h"
#include "assay/dtype.h"
#include "assay/dummy_weights.h"

#ifndef ASSAY_WITH_CUDA
const char *assay_backend_cuda_device_name(const assay_backend *be) {
    (void)be;
    return NULL;
}
#endif

typedef struct backend_row {
    const char *name;
    assay_status (*open)(assay_backend **out, int n_threads);
    const char *missing; /* NULL: available; else why --device NAME cannot run in this build */
} backend_row;

#ifndef ASSAY_WITH_CUDA
static assay_status cuda_missing(assay_backend **out, int n_threads) {
    (void)n_threads;
    *out = NULL;
    return ASSAY_ERR_UNSUPPORTED;
}
#endif

static const backend_row backends[] = {
    {"cpu", assay_backend_cpu_open, NULL},
#ifdef ASSAY_WITH_CUDA
    {"cuda", assay_backend_cuda_open, NULL},
#else
    {"cuda", cuda_missing, "this build has no CUDA backend (nvcc was not found when it was configured)"},
#endif
};

assay_status assay_backend_check(const char *device) {
    if (!device) device = "cpu";
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i].name, device) == 0)
            return backends[i].missing ? assay_fail(ASSAY_ERR_UNSUPPORTED, "--device %s: %s", device, backends[i].missing)
                                       : ASSAY_OK;
    return assay_fail(ASSAY_ERR_ARG, "unknown device '%s' (cpu, cuda)", device);
}

assay_status assay_backend_open(assay_backend **out, const char *device, int n_threads) {
    *out = NULL;
    assay_status st = assay_backend_check(device);
    if (st) return st;
    if (!device) device = "cpu";
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i].name, device) == 0) return backends[i].open(out, n_threads);
    return ASSAY_ERR_ARG;
}

size_t assay_backend_act_size(const assay_backend *be) { return assay_type_row_bytes(be->act_type, 1); }

void assay_backend_close(assay_backend *be) {
    if (be) be->ops->close(be);
}

assay_status assay_weight_dummy_fill(const assay_weight *w, void *dst, int64_t row0, int64_t n_rows) {
    if (w->type != ASSAY_TYPE_F32 && w->type != ASSAY_TYPE_F16 && w->type != ASSAY_TYPE_BF16)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: dummy weights are f32, f16 or bf16, not %s", w->name ? w->name : "weight",
                          assay_type_name(w->type));
    for (int64_t r = 0; r < n_rows; r++) {
        uint8_t *row = (uint8_t *)dst + (size_t)r * w->row_bytes;
        uint64_t i0 = (uint64_t)((row0 + r) * w->n_in);
        for (int64_t c = 0; c < w->n_in; c++) {
            float v = assay_dummy_value(w->dummy_seed, i0 + (uint64_t)c, w->dummy_range);
            if (w->type == ASSAY_TYPE_F32) ((float *)row)[c] = v;
            else if (w->type == ASSAY_TYPE_BF16) ((uint16_t *)row)[c] = assay_f32_to_bf16(v);
            else ((uint16_t *)row)[c] = assay_f32_to_f16(v);
        }
    }
    return ASSAY_OK;
}
