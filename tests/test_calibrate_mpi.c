/* ldt_calibrate under an MPI world (mpirun -np 2: see tests/CMakeLists.txt), a short run
 * (--quick sizes): every collective kind the planner issues is measured with the MPI
 * communicator, each sample's modeled value is the fitted profile's own price of it (the fit
 * is the profile that was written), every process gets a valid profile, and a world whose
 * size is not the mesh's is refused. A plain program: Criterion forks, an MPI process must
 * not. Exit status 0 when every check on every rank held. */
#include <mpi.h>

#include "tests/comm_check.h"

int main(void) {
    ldt_comm *world;
    ldt_mesh *mesh = NULL, *three = NULL;
    ldt_calibrate_options o = {1, 0, 0, NULL, 0};
    ldt_cost_model cm;
    ldt_cost_sample *s = NULL;
    char spec[16];
    int cap, n = 0, total = 0, seen[LDT_COLL_COUNT] = {0}, bcasts = 0;
    double rms = -1;
    if (ldt_mpi_world(NULL, &world) != LDT_OK) {
        fprintf(stderr, "mpi world: %s\n", ldt_last_error());
        return 1;
    }
    g_rank = ldt_comm_rank(world);
    g_size = ldt_comm_size(world);
    o.world = world;
    snprintf(spec, sizeof spec, "%d", g_size);
    OK(ldt_mesh_parse(spec, LDT_DEVICE_CPU, &mesh));
    cap = ldt_calibrate_max_samples(mesh, &o);
    s = calloc((size_t)cap, sizeof *s);
    OK(ldt_calibrate_samples(mesh, &o, &cm, s, cap, &n, &rms));
    CHECK(ldt_cost_model_check(&cm) == LDT_OK, "the profile: %s", ldt_last_error());
    CHECK(rms >= 0, "rms %g", rms);
    for (int i = 0; i < n; i++) {
        double want = s[i].broadcast
                          ? ldt_cost_kind_seconds(&cm, cm.links[s[i].dim], s[i].group, LDT_KIND_BROADCAST, s[i].bytes)
                          : ldt_cost_seconds(&cm, mesh, 1, &s[i].dim, s[i].collective, s[i].bytes, 0);
        bcasts += s[i].broadcast;
        if (!s[i].broadcast) seen[s[i].collective]++;
        CHECK(s[i].seconds > 0, "sample %d: %g s", i, s[i].seconds);
        CHECK(fabs(s[i].modeled - want) <= 1e-12 * fabs(want), "sample %d modeled %g, its price %g", i,
              s[i].modeled, want);
    }
    for (int c = 0; c <= LDT_COLL_ALL_TO_ALL; c++)
        CHECK(seen[c] > 0, "%s never measured", ldt_collective_name((ldt_collective)c));
    CHECK(bcasts > 0, "broadcast never measured");
    CHECK(cm.links[0].bandwidth_Bps > 0 && cm.peak_flops[0] > 0, "bandwidth %g, peak %g",
          cm.links[0].bandwidth_Bps, cm.peak_flops[0]);
    /* a mesh of another size than the world: refused, naming both */
    OK(ldt_mesh_parse(g_size == 3 ? "2" : "3", LDT_DEVICE_CPU, &three));
    CHECK(ldt_calibrate(three, &o, &cm) == LDT_ERR_INVALID_ARGUMENT &&
              strstr(ldt_last_error(), "one process per rank"),
          "a mismatched mesh: %s", ldt_last_error());
    OK(ldt_all_reduce(world, &g_fail, &total, 1, LDT_I32, LDT_REDUCE_SUM));
    if (g_rank == 0) printf("test_calibrate_mpi: %d processes, %d samples, %d failed checks\n", g_size, n, total);
    free(s);
    ldt_mesh_destroy(three);
    ldt_mesh_destroy(mesh);
    ldt_mpi_world_destroy(world);
    return total != 0;
}
