/* ldt calibrate: measure latency and bandwidth per mesh dim on a communicator and write the
 * cost profile the planner loads (ldt redistribute --profile FILE). */
#include <string.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 7

static cli_flag *flag_table(void) {
    static cli_flag flags[NFLAGS] = {
        {"mesh", 1, "device mesh to measure: 4, 2x2, dp=2,tp=2 or [[0,2],[1,3]] (required)", NULL},
        {"backend", 1, "communicator to measure (default threads; the only one so far)", NULL},
        {"out", 1, "also write the profile (JSON) to FILE (default: print only)", NULL},
        {"quick", 0, "fewer sizes and repetitions (less precise, a fraction of a second)", NULL},
        {"json", 0, "print the profile itself, one JSON object (what --out writes)", NULL},
        CLI_COMM_TIMEOUT_FLAG,
        {"help", 0, "this help", NULL},
    };
    return flags;
}

int cmd_calibrate(int argc, char **argv) {
    cli_flag *f = flag_table();
    ldt_mesh *mesh = NULL;
    ldt_cost_model cm;
    ldt_calibrate_options opt = {0};
    const char *backend;
    int rc = 1;
    if (cli_parse("calibrate", argc, argv, f, NFLAGS)) return 2;
    if (cli_comm_timeout("calibrate", f, NFLAGS)) return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt calibrate --mesh M [--backend threads] [--out FILE] [--quick] [--json]\n\n"
               "Times real redistributions (all_gather steps at two sizes on each mesh dim, on\n"
               "groups of 2 and of every rank) and fits the cost model: per mesh dim a latency\n"
               "(seconds per ring hop) and a bandwidth, plus the overhead of one collective and\n"
               "the local copy bandwidth. Prints them (--json: the profile as JSON); --out FILE\n"
               "also writes the profile for --profile FILE of plan, redistribute, train.\n\n"
               "flags:\n");
        cli_print_flags(stdout, f, NFLAGS);
        return 0;
    }
    if (!cli_has(f, NFLAGS, "mesh")) {
        fprintf(stderr, "ldt calibrate: --mesh is required (see ldt calibrate --help)\n");
        return 2;
    }
    if (cli_has(f, NFLAGS, "out") && !*cli_get(f, NFLAGS, "out")) {
        fprintf(stderr, "ldt calibrate: --out is empty, expected a file name\n");
        return 2;
    }
    backend = cli_get(f, NFLAGS, "backend");
    if (backend && strcmp(backend, "threads") != 0) {
        fprintf(stderr, "ldt calibrate: --backend %s is not available, expected threads\n", backend);
        return 2;
    }
    opt.quick = cli_has(f, NFLAGS, "quick");
    if (ldt_mesh_parse(cli_get(f, NFLAGS, "mesh"), LDT_DEVICE_CPU, &mesh) != LDT_OK ||
        ldt_calibrate(mesh, &opt, &cm) != LDT_OK ||
        (cli_has(f, NFLAGS, "out") && ldt_cost_model_save(&cm, cli_get(f, NFLAGS, "out")) != LDT_OK)) {
        rc = cli_fail("calibrate");
        goto done;
    }
    if (cli_has(f, NFLAGS, "json")) {
        rc = ldt_cost_model_write(&cm, stdout) != LDT_OK ? cli_fail("calibrate") : 0;
        goto done;
    }
    printf("%-8s %14s %16s\n", "mesh_dim", "latency_us", "bandwidth_gbps");
    for (int d = 0; d < cm.nlinks; d++)
        printf("%-8d %14.3f %16.3f\n", d, cm.links[d].latency_s * 1e6,
               cm.links[d].bandwidth_Bps / 1e9);
    printf("overhead_us: %.3f\nlocal_bandwidth_gbps: %.3f\n", cm.overhead_s * 1e6, cm.local_bandwidth_Bps / 1e9);
    if (cli_has(f, NFLAGS, "out")) printf("wrote %s\n", cli_get(f, NFLAGS, "out"));
    rc = 0;
done:
    ldt_mesh_destroy(mesh);
    return rc;
}
