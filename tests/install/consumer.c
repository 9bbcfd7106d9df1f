/* A tiny program using the installed lazydt: a layout, and an all_reduce on 2 rank threads. */
#include <stdio.h>

#include "ldt/ldt.h"

static ldt_status step(ldt_comm *world, void *arg) {
    int32_t x = ldt_comm_rank(world) + 1;
    (void)arg;
    if (ldt_all_reduce(world, &x, &x, 1, LDT_I32, LDT_REDUCE_SUM) != LDT_OK) return LDT_ERR_INTERNAL;
    return x == 3 ? LDT_OK : LDT_ERR_INTERNAL;
}

int main(void) {
    ldt_mesh *mesh;
    ldt_shape shape;
    ldt_placement pl[2];
    ldt_spec spec;
    ldt_region reg;
    int n;
    if (ldt_mesh_parse("2x3", LDT_DEVICE_CPU, &mesh) || ldt_shape_parse("7,5", &shape) ||
        ldt_placements_parse("S0,S1", shape.ndim, pl, 2, &n) ||
        ldt_spec_init(&spec, mesh, &shape, pl, n, LDT_F32) || ldt_layout(&spec, 5, &reg)) {
        fprintf(stderr, "consumer: %s\n", ldt_last_error());
        return 1;
    }
    /* rank 5 = coord [1,2]: rows [4,7), cols [4,5) */
    if (reg.local_shape.dims[0] != 3 || reg.local_shape.dims[1] != 1 || reg.offset[0] != 4 ||
        reg.offset[1] != 4) {
        fprintf(stderr, "consumer: wrong layout\n");
        return 1;
    }
    ldt_mesh_destroy(mesh);
    if (ldt_threads_launch(2, NULL, step, NULL) != LDT_OK) {
        fprintf(stderr, "consumer: %s\n", ldt_last_error());
        return 1;
    }
    printf("consumer ok\n");
    return 0;
}
