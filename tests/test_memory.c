/* The static memory plan: on random programs, no two values live at the same time share a
 * byte (checked pair by pair), every value fits the arena, and the arena is at least the
 * liveness bound and close to it. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "planner/memory.h"
#include "tests/test_util.h"

/* A random program: values of random sizes, each made by a kernel from up to 3 earlier
 * ones, some reduced in place later, some kept to the end. */
static void random_program(uint64_t *st, int nv, ldt__program *p, uint8_t *keep) {
    ldt__lower L = {p, NULL};
    memset(p, 0, sizeof *p);
    for (int v = 0; v < nv; v++) {
        int32_t in[3];
        int nin = v == 0 ? 0 : (int)ldt_test_range(st, 0, 3);
        ldt_shape s = {1, {ldt_test_range(st, 0, 3) == 0 ? ldt_test_range(st, 1000, 50000)
                                                          : ldt_test_range(st, 0, 300)}};
        int32_t id = ldt__lower_value(&L, &s, LDT_F32, -1);
        cr_assert_eq(id, v);
        for (int k = 0; k < nin; k++) in[k] = (int32_t)ldt_test_range(st, v > 8 ? v - 8 : 0, v - 1);
        cr_assert_eq(ldt__lower_kernel(&L, v, LDT_OP_ADD, NULL, nin, in, id, NULL, NULL), LDT_OK);
        if (v > 2 && ldt_test_range(st, 0, 5) == 0) {
            int dims[1] = {0};
            cr_assert_eq(ldt__lower_all_reduce(&L, v, (int32_t)ldt_test_range(st, 0, v - 1),
                                               LDT_REDUCE_SUM, 1, dims), LDT_OK);
        }
        keep[v] = ldt_test_range(st, 0, 20) == 0;
    }
}

Test(memory, no_two_live_values_overlap) {
    int cases = ldt_test_cases(40);
    double worst = 1;
    for (int c = 0; c < cases; c++) {
        uint64_t st = (uint64_t)c * 31337u + 5;
        int nv = (int)ldt_test_range(&st, 1, 400);
        ldt__program p;
        ldt__mem_plan m;
        uint8_t *keep = calloc((size_t)nv, 1), *outside = calloc((size_t)nv, 1);
        int64_t *first = malloc((size_t)nv * sizeof *first), *last = malloc((size_t)nv * sizeof *last);
        cr_assert(keep && outside && first && last);
        random_program(&st, nv, &p, keep);
        for (int v = 0; v < nv; v++) outside[v] = ldt_test_range(&st, 0, 10) == 0;
        cr_assert_eq(ldt__memory_plan(&p, outside, keep, &m), LDT_OK, "%s", ldt_last_error());
        /* lifetimes, computed here from the instructions */
        for (int v = 0; v < nv; v++) first[v] = last[v] = -1;
        for (int64_t i = 0; i < p.nins; i++) {
            const ldt__instr *x = &p.ins[i];
            for (int k = 0; k < x->nin; k++) last[p.ops[x->in + k]] = i;
            if (first[x->out] < 0) first[x->out] = i;
            if (last[x->out] < i) last[x->out] = i;
        }
        for (int v = 0; v < nv; v++)
            if (keep[v]) last[v] = p.nins;
        for (int a = 0; a < nv; a++) {
            int64_t sa = 4 * p.vals[a].shape.dims[0];
            if (outside[a]) {
                cr_assert_eq(m.offset[a], -1);
                continue;
            }
            cr_assert(m.offset[a] >= 0 && m.offset[a] + sa <= m.arena_bytes);
            cr_assert_eq(m.offset[a] % 64, 0, "offsets are 64-byte aligned");
            for (int b = a + 1; b < nv; b++) {
                int64_t sb = 4 * p.vals[b].shape.dims[0];
                if (outside[b] || !sa || !sb || first[a] > last[b] || first[b] > last[a]) continue;
                cr_assert(m.offset[a] + sa <= m.offset[b] || m.offset[b] + sb <= m.offset[a],
                          "case %d: v%d [%lld,%lld) and v%d [%lld,%lld) are live together and overlap",
                          c, a, (long long)m.offset[a], (long long)(m.offset[a] + sa), b,
                          (long long)m.offset[b], (long long)(m.offset[b] + sb));
            }
        }
        cr_assert_geq(m.arena_bytes, m.bound_bytes);
        if (m.bound_bytes && (double)m.arena_bytes / (double)m.bound_bytes > worst)
            worst = (double)m.arena_bytes / (double)m.bound_bytes;
        ldt__mem_plan_free(&m);
        ldt__program_free(&p);
        free(keep);
        free(outside);
        free(first);
        free(last);
    }
    cr_log_info("worst arena / liveness bound over random programs: %.3f", worst);
    cr_assert_lt(worst, 1.5, "greedy best fit stays near the bound on random programs");
}

/* A hand-made chain: a -> b -> c -> d, each read only by the next: two buffers suffice. */
Test(memory, chain_reuses_two_buffers) {
    ldt__program p;
    ldt__lower L = {&p, NULL};
    ldt__mem_plan m;
    ldt_shape s = {1, {256}};
    memset(&p, 0, sizeof p);
    for (int v = 0; v < 4; v++) {
        int32_t in = v - 1;
        cr_assert_eq(ldt__lower_value(&L, &s, LDT_F32, -1), v);
        cr_assert_eq(ldt__lower_kernel(&L, v, LDT_OP_NEG, NULL, v ? 1 : 0, &in, v, NULL, NULL), LDT_OK);
    }
    cr_assert_eq(ldt__memory_plan(&p, NULL, NULL, &m), LDT_OK);
    cr_assert_eq(m.bound_bytes, 2 * 1024);
    cr_assert_eq(m.arena_bytes, 2 * 1024);
    cr_assert_neq(m.offset[0], m.offset[1]);
    cr_assert_eq(m.offset[0], m.offset[2]);
    ldt__mem_plan_free(&m);
    ldt__program_free(&p);
}

/* Long-lived values that each overlap more than 512 placed ones (the spans are sorted by
 * radix there): a chain whose every value is kept to the end packs without a gap, so the
 * arena is the sum of the aligned sizes (small values: two radix passes; huge ones: three);
 * with half of them short-lived, no two live values share a byte. */
Test(memory, many_long_lived_values) {
    for (int mix = 0; mix < 3; mix++) {
        uint64_t st = 977u + (uint64_t)mix;
        int nv = 1500;
        ldt__program p;
        ldt__lower L = {&p, NULL};
        ldt__mem_plan m;
        uint8_t *keep = calloc((size_t)nv, 1);
        int64_t *first = malloc((size_t)nv * sizeof *first), *last = malloc((size_t)nv * sizeof *last), sum = 0;
        cr_assert(keep && first && last);
        memset(&p, 0, sizeof p);
        for (int v = 0; v < nv; v++) {
            int32_t in = v - 1;
            ldt_shape s = {1, {ldt_test_range(&st, 1, 300) * (mix == 2 ? 1000003 : 1)}};
            cr_assert_eq(ldt__lower_value(&L, &s, LDT_F32, -1), v);
            cr_assert_eq(ldt__lower_kernel(&L, v, LDT_OP_ADD, NULL, v ? 1 : 0, &in, v, NULL, NULL), LDT_OK);
            keep[v] = mix != 1 || ldt_test_range(&st, 0, 1) == 0;
            if (keep[v]) sum += (4 * s.dims[0] + 63) / 64 * 64;
        }
        cr_assert_eq(ldt__memory_plan(&p, NULL, keep, &m), LDT_OK, "%s", ldt_last_error());
        for (int v = 0; v < nv; v++) {
            first[v] = v;
            last[v] = keep[v] ? p.nins : v + 1 < nv ? v + 1 : v;
        }
        if (mix != 1) cr_assert_eq(m.arena_bytes, sum, "all live at the end: %lld, not the sum %lld",
                                   (long long)m.arena_bytes, (long long)sum);
        for (int a = 0; a < nv; a++)
            for (int b = a + 1; b < nv; b++) {
                int64_t sa = 4 * p.vals[a].shape.dims[0], sb = 4 * p.vals[b].shape.dims[0];
                if (first[a] > last[b] || first[b] > last[a]) continue;
                cr_assert(m.offset[a] + sa <= m.offset[b] || m.offset[b] + sb <= m.offset[a],
                          "mix %d: v%d and v%d are live together and overlap", mix, a, b);
            }
        ldt__mem_plan_free(&m);
        ldt__program_free(&p);
        free(keep);
        free(first);
        free(last);
    }
}
