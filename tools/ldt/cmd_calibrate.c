/* ldt calibrate: measure every collective kind per mesh dim and the local ops on a
 * communicator, fit the cost model to them, and write the cost profile the planner loads
 * (ldt redistribute --profile FILE), with the fit's residuals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/sysmem.h"
#include "exec/calibrate_internal.h"
#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 11
/* Other processes' share of the cores above which a calibration warns that it measured a
 * busy machine (a build beside it on 2 cores: 0.4 to 0.7; this machine alone: under 0.02). */
#define BUSY_WARN 0.1

static cli_flag *flag_table(void) {
    static cli_flag flags[NFLAGS] = {
        {"mesh", 1, "device mesh to measure: 4, 2x2, dp=2,tp=2 or [[0,2],[1,3]] (required)", NULL},
        {"backend", 1, "communicator to measure: threads (the default) or mpi (under mpirun, one process a rank; rank 0 writes)", NULL},
        {"out", 1, "also write the profile (JSON) to FILE (default: print only)", NULL},
        {"save", 0, "also save it as your profile (the user cache: plans use it by default)", NULL},
        {"quick", 0, "three sizes and 3 repeats (less precise, a second or so)", NULL},
        {"median", 0, "each timing the median of its repeats in one world (what steps see on a loaded machine), not the lower quartile of runs over three rounds", NULL},
        {"reps", 1, "runs per timing below 16 MiB, over all rounds (default 9)", NULL},
        {"rounds", 1, "sweeps of every timing, each with its share of the runs (default 3; 1 with --quick or --median)", NULL},
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
    ldt_cost_sample *samples = NULL;
    const char *backend;
    char *json = NULL;
    ldt_comm *world = NULL;
    int rc = 1, n = 0, cap, lead = 1;
    int64_t reps = 0, rounds = 0;
    double rms = 0;
    ldt__host_watch hw = {0};
    if (cli_parse("calibrate", argc, argv, f, NFLAGS)) return 2;
    if (cli_comm_timeout("calibrate", f, NFLAGS)) return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt calibrate --mesh M [--backend threads|mpi] [--out FILE] [--save] [--quick] [--median] [--reps N] [--rounds N] [--json]\n\n"
               "Times every collective kind the planner issues (all_reduce, reduce_scatter,\n"
               "all_gather, all_to_all) and broadcast along each mesh dim at eight sizes from\n"
               "4 KiB to 64 MiB, and the local ops (chunk, pad, partial), as redistributions run them\n"
               "(the lower quartile of runs in three rounds), then fits the cost model by robust least squares on relative error:\n"
               "per mesh dim a latency (seconds per ring hop) and a bandwidth, per kind a bytes\n"
               "factor, a cache knee with per-kind factors past it, the overhead of one\n"
               "collective, the local op overhead and bandwidth, a bytes factor per local op\n"
               "and the local ops' own knee. Prints them with the fit's\n"
               "residuals (--json: the profile as JSON, its \"fit\" holding every timing, its\n"
               "modeled value and residual); --out FILE also writes it for --profile FILE of\n"
               "plan, redistribute, train; --save makes it your default profile. Also times\n"
               "GEMMs (FLOP/s by size), an elementwise add (memory bandwidth by size), a kernel's\n"
               "launch, and layer_norm, softmax, sum and gelu (their efficiency curves), and the\n"
               "rendezvous (what a collective in a step waits for peers sharing the cores).\n"
               "It also says how busy other processes kept the cores meanwhile (\"fit\".\"host\"),\n"
               "and warns when they took over 10%%: the figures then measure a busy machine; and\n"
               "times a round trip between two cores before and after (\"core_round_trip_ns\"),\n"
               "warning when it moved by more than 1.5x: the machine changed speed meanwhile.\n"
               "--backend mpi: under mpirun, one process a mesh rank; each times compiled\n"
               "programs on the MPI communicator, and rank 0 prints and writes its fit.\n\n"
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
    if (backend && strcmp(backend, "threads") != 0 && strcmp(backend, "mpi") != 0) {
        fprintf(stderr, "ldt calibrate: --backend %s, expected threads or mpi\n", backend);
        return 2;
    }
    if (cli_int("calibrate", f, NFLAGS, "reps", 0, 1, &reps)) return 2;
    if (cli_int("calibrate", f, NFLAGS, "rounds", 0, 1, &rounds)) return 2;
    opt.quick = cli_has(f, NFLAGS, "quick");
    opt.median = cli_has(f, NFLAGS, "median");
    opt.reps = (int)reps;
    opt.rounds = (int)rounds;
    if (backend && strcmp(backend, "mpi") == 0) { /* every process measures; rank 0 reports */
        if (ldt_mpi_world(NULL, &world) != LDT_OK) return cli_fail("calibrate");
        opt.world = world;
        if (ldt_comm_rank(world) != 0) {
            if (!freopen("/dev/null", "w", stdout)) goto done;
            lead = 0;
        }
    }
    if (ldt_mesh_parse(cli_get(f, NFLAGS, "mesh"), LDT_DEVICE_CPU, &mesh) != LDT_OK) {
        rc = cli_fail("calibrate");
        goto done;
    }
    cap = ldt_calibrate_max_samples(mesh, &opt);
    if (!(samples = calloc((size_t)(cap ? cap : 1), sizeof *samples))) {
        fprintf(stderr, "ldt calibrate: out of memory\n");
        goto done;
    }
    hw.probe = lead; /* under MPI rank 0 alone: the others' probes would share its cores */
    ldt__host_watch_start(&hw);
    if (ldt_calibrate_samples(mesh, &opt, &cm, samples, cap, &n, &rms) != LDT_OK) {
        rc = cli_fail("calibrate");
        goto done;
    }
    ldt__host_watch_stop(&hw);
    if (world) hw.known = 0; /* the other ranks' processes are the machine's "others" */
    if (lead && ldt__round_trip_shifted(hw.round_trip_ns[0], hw.round_trip_ns[1]))
        fprintf(stderr,
                "ldt calibrate: warning: a round trip between two cores took %.0f ns before the "
                "calibration and %.0f ns after it: the machine's cores changed speed meanwhile (a "
                "virtual machine's cores moved?), so its figures may mix two speeds; calibrate "
                "again\n",
                hw.round_trip_ns[0], hw.round_trip_ns[1]);
    if (hw.known && hw.others_share > BUSY_WARN)
        fprintf(stderr,
                "ldt calibrate: warning: other processes kept %.0f%% of the %d cores busy during the "
                "calibration (%.1f of %.1f core-seconds): its figures measure a busy machine; "
                "calibrate again when it is quiet\n",
                100 * hw.others_share, hw.cores, hw.others_cpu_s, hw.wall_s * hw.cores);
    if (!(json = ldt__calibration_json(&cm, samples, n, rms, &hw))) {
        fprintf(stderr, "ldt calibrate: out of memory\n");
        goto done;
    }
    if (lead && cli_has(f, NFLAGS, "out")) {
        FILE *o = fopen(cli_get(f, NFLAGS, "out"), "wb");
        if (!o || fputs(json, o) < 0 || fputc('\n', o) == EOF) {
            fprintf(stderr, "ldt calibrate: cannot write '%s'\n", cli_get(f, NFLAGS, "out"));
            if (o) fclose(o);
            goto done;
        }
        if (fclose(o) != 0) {
            fprintf(stderr, "ldt calibrate: cannot write '%s'\n", cli_get(f, NFLAGS, "out"));
            goto done;
        }
    }
    if (lead && cli_has(f, NFLAGS, "save") && ldt_cost_model_save_user(&cm) != LDT_OK) {
        rc = cli_fail("calibrate");
        goto done;
    }
    if (cli_has(f, NFLAGS, "json")) {
        printf("%s\n", json);
        rc = 0;
        goto done;
    }
    printf("%-8s %14s %16s\n", "mesh_dim", "latency_us", "bandwidth_gbps");
    for (int d = 0; d < cm.nlinks; d++)
        printf("%-8d %14.3f %16.3f\n", d, cm.links[d].latency_s * 1e6,
               cm.links[d].bandwidth_Bps / 1e9);
    printf("overhead_us: %.3f\nlocal_overhead_us: %.3f\nlocal_bandwidth_gbps: %.3f\n",
           cm.overhead_s * 1e6, cm.local_overhead_s * 1e6, cm.local_bandwidth_Bps / 1e9);
    printf("local_bytes_factor: chunk %.3f, partial %.3f, pad %.3f; local knee %.0f KiB (0: the cache knee)\n",
           1 + cm.local_bytes_extra[0], 1 + cm.local_bytes_extra[1], 1 + cm.local_bytes_extra[2],
           cm.local_cache_bytes / 1024);
    {
        double worst = 0;
        int kept = 0;
        for (int i = 0; i < n; i++)
            if (samples[i].weight > 0) {
                double r = fabs(samples[i].seconds - samples[i].modeled) / samples[i].seconds;
                kept++;
                if (r > worst) worst = r;
            }
        printf("fit: %d timings, %d kept, relative residual rms %.3f, max %.3f\n", n, kept, rms, worst);
    }
    if (hw.known)
        printf("host: %d cores; other processes used %.0f%% of them during the %.1f s calibration\n", hw.cores,
               100 * hw.others_share, hw.wall_s);
    if (hw.round_trip_ns[0] > 0 || hw.round_trip_ns[1] > 0)
        printf("host: a round trip between two cores took %.0f ns before the calibration, %.0f ns after\n",
               hw.round_trip_ns[0], hw.round_trip_ns[1]);
    if (cli_has(f, NFLAGS, "out")) printf("wrote %s\n", cli_get(f, NFLAGS, "out"));
    if (cli_has(f, NFLAGS, "save")) {
        char path[4096];
        if (ldt_cost_model_user_path(path, sizeof path) > 0) printf("saved %s\n", path);
    }
    rc = 0;
done:
    cJSON_free(json);
    free(samples);
    ldt_mesh_destroy(mesh);
    ldt_mpi_world_destroy(world);
    return rc;
}
