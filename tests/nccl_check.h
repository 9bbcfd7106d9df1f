/* The NCCL communicator's checks, shared by the MPI job (test_comm_nccl.c: a process per
 * GPU) and the rank threads (test_comm_nccl_threads.c: a GPU per thread): every collective on
 * device buffers against the rank-order reduction (NCCL's order differs: floats to rounding,
 * integers exactly), _v collectives, all_to_all, broadcast, barrier, a send/recv ring. */
#ifndef LDT_TESTS_NCCL_CHECK_H
#define LDT_TESTS_NCCL_CHECK_H

#include <cuda_runtime_api.h>

#include "tests/comm_check.h"

/* n elements of dt: host src -> device, the call, device -> host dst. */
static inline void *dev_copy(const void *host, size_t nb) {
    void *d = NULL;
    if (cudaMalloc(&d, nb ? nb : 1) != cudaSuccess) return NULL;
    if (host && nb) cudaMemcpy(d, host, nb, cudaMemcpyHostToDevice);
    return d;
}

static inline int close_enough(const void *got, const void *want, ldt_dtype dt, int64_t n) {
    double tol = dt == LDT_F64 ? 1e-12 : dt == LDT_F32 ? 1e-6 : 1e-2;
    for (int64_t i = 0; i < n; i++) {
        double a = get(got, dt, i), b = get(want, dt, i);
        if (!(fabs(a - b) <= tol * (1 + fabs(b)))) return 0;
    }
    return 1;
}

static inline void check_all_reduce(ldt_comm *c, const int *members) {
    static const ldt_dtype dts[] = {LDT_F32, LDT_F64, LDT_BF16, LDT_I32};
    static const ldt_reduce_op ops[] = {LDT_REDUCE_SUM, LDT_REDUCE_MAX, LDT_REDUCE_MIN, LDT_REDUCE_AVG};
    int k = ldt_comm_size(c), me = members[ldt_comm_rank(c)];
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            int64_t n = 1000;
            size_t nb = (size_t)n * ldt_dtype_size(dts[d]);
            void *host = malloc(nb), *got = malloc(nb), *ref, *dv;
            ldt_status st;
            fill(host, dts[d], me, 0, n);
            ref = reference(members, k, dts[d], ops[o], 0, n);
            dv = dev_copy(host, nb);
            st = ldt_all_reduce(c, dv, dv, n, dts[d], ops[o]);
            if (dts[d] == LDT_I32 && ops[o] == LDT_REDUCE_AVG) {
                CHECK(st == LDT_ERR_UNSUPPORTED, "integer avg is refused: %s", ldt_last_error());
            } else {
                CHECK(st == LDT_OK, "all_reduce %s op %d: %s", ldt_dtype_name(dts[d]), (int)ops[o], ldt_last_error());
                cudaMemcpy(got, dv, nb, cudaMemcpyDeviceToHost);
                CHECK(close_enough(got, ref, dts[d], n), "all_reduce %s op %d differs", ldt_dtype_name(dts[d]),
                      (int)ops[o]);
            }
            cudaFree(dv);
            free(host);
            free(got);
            free(ref);
        }
}

static inline void check_others(ldt_comm *c, const int *members) {
    int k = ldt_comm_size(c), r = ldt_comm_rank(c), me = members[r];
    int64_t counts[64], total = 0, off = 0;
    float host[512], got[512], *ref;
    void *ds, *dr;
    for (int m = 0; m < k; m++) total += counts[m] = m % 3 + 1;
    for (int m = 0; m < r; m++) off += counts[m];
    /* reduce_scatter_v */
    fill(host, LDT_F32, me, 0, total);
    ds = dev_copy(host, (size_t)total * 4);
    dr = dev_copy(NULL, (size_t)counts[r] * 4);
    OK(ldt_reduce_scatter_v(c, ds, dr, counts, LDT_F32, LDT_REDUCE_SUM));
    cudaMemcpy(got, dr, (size_t)counts[r] * 4, cudaMemcpyDeviceToHost);
    ref = reference(members, k, LDT_F32, LDT_REDUCE_SUM, off, counts[r]);
    CHECK(close_enough(got, ref, LDT_F32, counts[r]), "reduce_scatter_v");
    free(ref);
    cudaFree(ds);
    cudaFree(dr);
    /* all_gather_v */
    fill(host, LDT_F32, me, 300, counts[r]);
    ds = dev_copy(host, (size_t)counts[r] * 4);
    dr = dev_copy(NULL, (size_t)total * 4);
    OK(ldt_all_gather_v(c, ds, dr, counts, LDT_F32));
    cudaMemcpy(got, dr, (size_t)total * 4, cudaMemcpyDeviceToHost);
    {
        int64_t at = 0;
        for (int m = 0; m < k; m++)
            for (int64_t i = 0; i < counts[m]; i++, at++)
                CHECK(got[at] == (float)value(members[m], 300 + i), "all_gather_v [%d][%lld]", m, (long long)i);
    }
    cudaFree(ds);
    cudaFree(dr);
    /* all_to_all */
    for (int m = 0; m < k; m++)
        for (int i = 0; i < 2; i++) host[m * 2 + i] = (float)(1000 * me + 10 * members[m] + i);
    ds = dev_copy(NULL, (size_t)k * 8 > 36 ? (size_t)k * 8 : 36); /* room for the broadcast's 9 */
    dr = dev_copy(NULL, (size_t)k * 8 > 16 ? (size_t)k * 8 : 16); /* and the ring's 4 */
    cudaMemcpy(ds, host, (size_t)k * 8, cudaMemcpyHostToDevice);
    OK(ldt_all_to_all(c, ds, dr, 2, LDT_F32));
    cudaMemcpy(got, dr, (size_t)k * 8, cudaMemcpyDeviceToHost);
    for (int m = 0; m < k; m++)
        CHECK(got[m * 2 + 1] == (float)(1000 * members[m] + 10 * me + 1), "all_to_all [%d]", m);
    /* broadcast, barrier, a ring of sends in one group */
    fill(host, LDT_F32, me, 400, 9);
    cudaMemcpy(ds, host, 36, cudaMemcpyHostToDevice);
    OK(ldt_broadcast(c, ds, 9, LDT_F32, k - 1));
    cudaMemcpy(got, ds, 36, cudaMemcpyDeviceToHost);
    CHECK(got[8] == (float)value(members[k - 1], 408), "broadcast");
    OK(ldt_barrier(c));
    if (k > 1) {
        fill(host, LDT_F32, me, 500, 4);
        cudaMemcpy(ds, host, 16, cudaMemcpyHostToDevice);
        OK(ldt_group_start());
        OK(ldt_send(c, ds, 4, LDT_F32, (r + 1) % k));
        OK(ldt_recv(c, dr, 4, LDT_F32, (r + k - 1) % k));
        OK(ldt_group_end());
        cudaMemcpy(got, dr, 16, cudaMemcpyDeviceToHost);
        CHECK(got[3] == (float)value(members[(r + k - 1) % k], 503), "send/recv ring");
    }
    cudaFree(ds);
    cudaFree(dr);
}

#endif
