/* Device profiles: the JSON format (round trip, version 1 files, refusals), the shipped
 * profiles (the repository's files are the embedded ones), node packing, the roofline and
 * the precedence of --profile, LDT_PROFILE, the saved profile and the shipped default. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ldt/planner.h"

static void expect_error(ldt_status got, ldt_status want, const char *needle) {
    cr_expect_eq(got, want, "status %s, expected %s (%s)", ldt_status_name(got),
                 ldt_status_name(want), ldt_last_error());
    cr_expect(strstr(ldt_last_error(), needle) != NULL, "message '%s' lacks '%s'",
              ldt_last_error(), needle);
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b) + 1e-300; }

static void expect_same_model(const ldt_cost_model *a, const ldt_cost_model *b) {
    cr_expect_str_eq(a->name, b->name);
    cr_expect_eq(a->nlinks, b->nlinks);
    for (int i = 0; i < a->nlinks; i++) {
        cr_expect(close_to(a->links[i].latency_s, b->links[i].latency_s));
        cr_expect(close_to(a->links[i].bandwidth_Bps, b->links[i].bandwidth_Bps));
    }
    cr_expect_eq(a->ranks_per_node, b->ranks_per_node);
    cr_expect(close_to(a->node_link.bandwidth_Bps, b->node_link.bandwidth_Bps));
    cr_expect(close_to(a->node_link.latency_s, b->node_link.latency_s));
    cr_expect(close_to(a->network_link.bandwidth_Bps, b->network_link.bandwidth_Bps));
    cr_expect(close_to(a->network_link.latency_s, b->network_link.latency_s));
    for (int k = 0; k < LDT_KIND_COUNT; k++) cr_expect_eq(a->algo[k], b->algo[k]);
    cr_expect(close_to(a->overhead_s, b->overhead_s));
    cr_expect(close_to(a->local_bandwidth_Bps, b->local_bandwidth_Bps));
    cr_expect(close_to(a->local_overhead_s, b->local_overhead_s));
    for (int p = 0; p < LDT_PREC_COUNT; p++) cr_expect(close_to(a->peak_flops[p], b->peak_flops[p]));
    cr_expect(close_to(a->memory_bandwidth_Bps, b->memory_bandwidth_Bps));
    cr_expect_eq(a->cores, b->cores);
    for (int c = 0; c < LDT_OPCLASS_COUNT; c++) {
        cr_expect_eq(a->eff[c].npoints, b->eff[c].npoints, "%s", ldt_op_class_name((ldt_op_class)c));
        for (int i = 0; i < a->eff[c].npoints; i++) {
            cr_expect(close_to(a->eff[c].size[i], b->eff[c].size[i]));
            cr_expect(close_to(a->eff[c].eff[i], b->eff[c].eff[i]));
        }
    }
}

Test(profile, shipped_round_trip_and_repository_files) {
    const char *names[] = {"cpu-threads", "a100-80g", "h100-80g", "uniform", "nvlink-ib"};
    int n = 0;
    while (ldt_cost_model_preset_name(n)) n++;
    cr_expect_eq(n, 5);
    for (int i = 0; i < 5; i++) {
        ldt_cost_model m, back, file;
        char path[] = "/tmp/ldt_prof_XXXXXX", text[8192], text2[8192], repo[512];
        int fd = mkstemp(path), len;
        cr_assert(fd >= 0);
        close(fd);
        cr_assert_eq(ldt_cost_model_preset(names[i], &m), LDT_OK, "%s", ldt_last_error());
        cr_expect_str_eq(m.name, names[i]);
        cr_assert_eq(ldt_cost_model_save(&m, path), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_cost_model_load(path, &back), LDT_OK, "%s", ldt_last_error());
        expect_same_model(&m, &back);
        len = ldt_cost_model_format(&m, text, sizeof text);
        cr_assert(len > 0 && (size_t)len < sizeof text);
        cr_assert_eq(ldt_cost_model_parse(text, &back), LDT_OK, "%s", ldt_last_error());
        cr_expect_eq(ldt_cost_model_format(&back, text2, sizeof text2), len);
        cr_expect_str_eq(text, text2); /* printing what was read prints the same text */
        remove(path);
        if (i < 3) { /* the repository's file is what the library embeds */
            snprintf(repo, sizeof repo, "%s/profiles/%s.json", LDT_SOURCE_DIR, names[i]);
            cr_assert_eq(ldt_cost_model_load(repo, &file), LDT_OK, "%s", ldt_last_error());
            expect_same_model(&m, &file);
        }
    }
}

Test(profile, shipped_figures) {
    ldt_cost_model h, a, c;
    cr_assert_eq(ldt_cost_model_preset("h100-80g", &h), LDT_OK);
    cr_assert_eq(ldt_cost_model_preset("a100-80g", &a), LDT_OK);
    cr_assert_eq(ldt_cost_model_preset("cpu-threads", &c), LDT_OK);
    /* the public specs docs/cost-model.md names */
    cr_expect_eq(h.ranks_per_node, 8);
    cr_expect(close_to(h.peak_flops[LDT_PREC_BF16], 989e12));
    cr_expect(close_to(h.peak_flops[LDT_PREC_F32], 67e12));
    cr_expect(close_to(h.memory_bandwidth_Bps, 3350e9));
    cr_expect(close_to(h.node_link.bandwidth_Bps, 450e9));  /* NVLink4: 900 GB/s both ways */
    cr_expect(close_to(h.network_link.bandwidth_Bps, 50e9)); /* one 400 Gb/s NDR port a GPU */
    cr_expect(close_to(a.peak_flops[LDT_PREC_BF16], 312e12));
    cr_expect(close_to(a.peak_flops[LDT_PREC_F32], 19.5e12));
    /* NVLink3's 300 GB/s line rate a direction, as NCCL reaches it (docs/cost-model.md) */
    cr_expect(close_to(a.node_link.bandwidth_Bps, 230e9));
    cr_expect(close_to(a.network_link.bandwidth_Bps, 25e9));
    cr_expect_eq(c.cores, 2);
    cr_expect_eq(c.ranks_per_node, 0);
}

Test(profile, version1_file_loads_with_the_old_compute) {
    ldt_cost_model m;
    const char *v1 = "{\"format\":\"lazydt-cost-profile\",\"version\":1,\"name\":\"calibrated\","
                     "\"overhead_s\":2e-5,\"local_bandwidth_gbps\":3,\"local_overhead_s\":0,"
                     "\"links\":[{\"latency_s\":1e-5,\"bandwidth_gbps\":0.5},"
                     "{\"latency_s\":2e-6,\"bandwidth_gbps\":2}]}";
    cr_assert_eq(ldt_cost_model_parse(v1, &m), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(m.nlinks, 2);
    cr_expect(close_to(m.links[0].bandwidth_Bps, 0.5e9));
    cr_expect(close_to(m.links[1].latency_s, 2e-6));
    for (int p = 0; p < LDT_PREC_COUNT; p++) cr_expect_eq(m.peak_flops[p], 50e9);
    cr_expect(close_to(m.memory_bandwidth_Bps, 3e9));
    cr_expect_eq(m.algo[LDT_KIND_ALL_REDUCE], LDT_ALGO_RING);
    cr_expect_eq(m.cores, 0);
    /* efficiency 1 everywhere: a 1 GFLOP f32 matmul takes 1/50 s */
    cr_expect(close_to(ldt_cost_op_seconds(&m, LDT_OPCLASS_MATMUL, LDT_F32, 1e9, 8, 4), 0.02));
}

#define BASE "{\"format\":\"lazydt-cost-profile\",\"version\":2,\"name\":\"t\",\"overhead_s\":1e-5," \
             "\"local_bandwidth_gbps\":10,\"local_overhead_s\":1e-6,"
#define NODE "\"node_link\":{\"latency_s\":1e-6,\"bandwidth_gbps\":100},"
#define PEAK "\"peak_tflops\":{\"f32\":1,\"bf16\":2,\"f64\":0.5}"

Test(profile, refusals_name_the_field) {
    ldt_cost_model m;
    expect_error(ldt_cost_model_parse(BASE "\"ranks_per_node\":8," NODE
                                      "\"network_link\":{\"latency_s\":1e-6,\"bandwidth_gbps\":-4}}", &m),
                 LDT_ERR_INVALID_ARGUMENT, "network link bandwidth -4e+09 B/s, expected a finite value > 0");
    expect_error(ldt_cost_model_parse(BASE "\"ranks_per_node\":8," NODE "\"x\":0}", &m),
                 LDT_ERR_CORRUPT, "\"network_link\" must be a {\"latency_s\",\"bandwidth_gbps\"} object");
    expect_error(ldt_cost_model_parse(BASE "\"x\":0}", &m), LDT_ERR_CORRUPT,
                 "needs \"links\" (one per mesh dim) or \"node_link\" (link classes)");
    expect_error(ldt_cost_model_parse(BASE "\"ranks_per_node\":-2," NODE "\"x\":0}", &m),
                 LDT_ERR_CORRUPT, "\"ranks_per_node\" must be a whole number >= 0");
    expect_error(ldt_cost_model_parse(BASE NODE "\"algorithms\":{\"all_reduce\":\"hypercube\"}}", &m),
                 LDT_ERR_CORRUPT, "algorithm of \"all_reduce\" must be \"ring\", \"tree\" or \"direct\"");
    expect_error(ldt_cost_model_parse(BASE NODE "\"algorithms\":{\"gossip\":\"ring\"}}", &m),
                 LDT_ERR_CORRUPT, "unknown collective kind \"gossip\"");
    expect_error(ldt_cost_model_parse(BASE NODE "\"compute\":{\"memory_bandwidth_gbps\":1}}", &m),
                 LDT_ERR_CORRUPT, "compute needs \"peak_tflops\"");
    expect_error(ldt_cost_model_parse(BASE NODE "\"compute\":{\"peak_tflops\":{\"f32\":1,\"bf16\":2},"
                                      "\"memory_bandwidth_gbps\":1}}", &m),
                 LDT_ERR_CORRUPT, "compute.peak_tflops needs a number \"f64\"");
    expect_error(ldt_cost_model_parse(BASE NODE "\"compute\":{" PEAK ",\"memory_bandwidth_gbps\":0}}", &m),
                 LDT_ERR_INVALID_ARGUMENT, "memory bandwidth 0 B/s, expected a finite value > 0");
    expect_error(ldt_cost_model_parse(BASE NODE "\"compute\":{\"peak_tflops\":{\"f32\":-1,\"bf16\":2,"
                                      "\"f64\":1},\"memory_bandwidth_gbps\":1}}", &m),
                 LDT_ERR_INVALID_ARGUMENT, "f32 peak -1e+12 FLOP/s, expected a finite value > 0");
    expect_error(ldt_cost_model_parse(BASE NODE "\"compute\":{" PEAK ",\"memory_bandwidth_gbps\":1,"
                                      "\"cores\":-1}}", &m),
                 LDT_ERR_CORRUPT, "compute.cores is -1, expected a whole number >= 0");
    expect_error(ldt_cost_model_parse(BASE NODE "\"compute\":{" PEAK ",\"memory_bandwidth_gbps\":1,"
                                      "\"efficiency\":{\"matmul\":[[1e6,0.5],[1e7,1.5]]}}}", &m),
                 LDT_ERR_INVALID_ARGUMENT, "matmul efficiency point 1 is 1.5, expected a value in (0, 1]");
    expect_error(ldt_cost_model_parse(BASE NODE "\"compute\":{" PEAK ",\"memory_bandwidth_gbps\":1,"
                                      "\"efficiency\":{\"norm\":[[1e6,0.5],[1e5,0.6]]}}}", &m),
                 LDT_ERR_INVALID_ARGUMENT, "norm efficiency point 1 has size 100000, expected finite "
                 "sizes > 0 in increasing order");
    expect_error(ldt_cost_model_parse(BASE NODE "\"compute\":{" PEAK ",\"memory_bandwidth_gbps\":1,"
                                      "\"efficiency\":{\"conv\":[]}}}", &m),
                 LDT_ERR_CORRUPT, "unknown op class \"conv\" in compute.efficiency");
    expect_error(ldt_cost_model_parse(BASE NODE "\"compute\":{" PEAK ",\"memory_bandwidth_gbps\":1,"
                                      "\"efficiency\":{\"softmax\":[[1e6]]}}}", &m),
                 LDT_ERR_CORRUPT, "compute.efficiency.softmax[0] must be a [size, efficiency] pair");
    expect_error(ldt_cost_model_parse("{\"format\":\"lazydt-cost-profile\",\"version\":3}", &m), LDT_ERR_CORRUPT,
                 "\"version\" must be 1 or 2");
    expect_error(ldt_cost_model_preset("dragonfly", &m), LDT_ERR_INVALID_ARGUMENT,
                 "unknown preset 'dragonfly', expected a100-80g, cpu-threads, h100-80g, uniform or nvlink-ib");
    cr_assert_eq(ldt_cost_model_preset("h100-80g", &m), LDT_OK);
    m.algo[LDT_KIND_BROADCAST] = (ldt_coll_algo)7;
    expect_error(ldt_cost_model_check(&m), LDT_ERR_INVALID_ARGUMENT,
                 "broadcast algorithm 7, expected ring, tree or direct");
    /* the bytes terms and the launch (docs/cost-model.md, "Collectives") */
    expect_error(ldt_cost_model_parse(BASE NODE "\"bytes_factor\":3}", &m), LDT_ERR_CORRUPT,
                 "\"bytes_factor\" must be an object of kind: factor");
    expect_error(ldt_cost_model_parse(BASE NODE "\"bytes_factor\":{\"gossip\":2}}", &m), LDT_ERR_CORRUPT,
                 "unknown collective kind \"gossip\" in \"bytes_factor\"");
    expect_error(ldt_cost_model_parse(BASE NODE "\"bytes_factor\":{\"all_to_all\":0}}", &m), LDT_ERR_CORRUPT,
                 "bytes_factor.all_to_all must be a number > 0");
    expect_error(ldt_cost_model_parse(BASE NODE "\"cache\":[]}", &m), LDT_ERR_CORRUPT,
                 "\"cache\" must be an object");
    expect_error(ldt_cost_model_parse(BASE NODE "\"cache\":{\"beyond\":{}}}", &m), LDT_ERR_CORRUPT,
                 "cache needs a number \"bytes\"");
    expect_error(ldt_cost_model_parse(BASE NODE "\"cache\":{\"bytes\":-1}}", &m), LDT_ERR_CORRUPT,
                 "cache.bytes is -1, expected >= 0");
    expect_error(ldt_cost_model_parse(BASE NODE "\"cache\":{\"bytes\":1,\"beyond\":2}}", &m), LDT_ERR_CORRUPT,
                 "cache.beyond must be an object of kind: factor");
    expect_error(ldt_cost_model_parse(BASE NODE "\"cache\":{\"bytes\":1,\"beyond\":{\"disk\":2}}}", &m),
                 LDT_ERR_CORRUPT, "unknown kind \"disk\" in cache.beyond");
    expect_error(ldt_cost_model_parse(BASE NODE "\"cache\":{\"bytes\":1,\"beyond\":{\"local\":-2}}}", &m),
                 LDT_ERR_CORRUPT, "cache.beyond.local must be a number >= 0");
    expect_error(ldt_cost_model_parse(BASE NODE "\"compute\":{" PEAK ",\"memory_bandwidth_gbps\":1,"
                                      "\"launch_s\":-1}}", &m),
                 LDT_ERR_CORRUPT, "compute.launch_s is -1, expected >= 0");
    cr_assert_eq(ldt_cost_model_preset("cpu-threads", &m), LDT_OK);
    m.bytes_extra[LDT_KIND_ALL_GATHER] = -1;
    expect_error(ldt_cost_model_check(&m), LDT_ERR_INVALID_ARGUMENT,
                 "all_gather bytes factor 0, expected a finite value > 0");
    m.bytes_extra[LDT_KIND_ALL_GATHER] = 0;
    m.beyond_cache[LDT_KIND_COUNT] = -0.5;
    expect_error(ldt_cost_model_check(&m), LDT_ERR_INVALID_ARGUMENT,
                 "local beyond-cache factor -0.5, expected a finite value >= 0");
    m.beyond_cache[LDT_KIND_COUNT] = 0;
    m.cache_bytes = NAN;
    expect_error(ldt_cost_model_check(&m), LDT_ERR_INVALID_ARGUMENT, "cache_bytes nan, expected a finite value >= 0");
    m.cache_bytes = 0;
    m.launch_s = -1e-6;
    expect_error(ldt_cost_model_check(&m), LDT_ERR_INVALID_ARGUMENT, "launch -1e-06 s, expected a finite value >= 0");
    /* a valid minimal one: classes without a network, no compute (the old compute) */
    cr_expect_eq(ldt_cost_model_parse(BASE NODE "\"x\":0}", &m), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(m.nlinks, 0);
}

/* DGX packing by hand: dp=2,tp=8 on 8-per-node puts each tp group (8 consecutive ranks) in
 * one node and each dp pair (ranks r and r+8) across two. */
/* The bytes factor, the cache knee and the launch: read, written back the same, and priced
 * by hand: an all_gather of 3 MB on 4 ranks (3 hops) with factor 2, knee 1 MB and 1.5 past it
 * costs overhead + 3 alpha + 2 (3e6 + 1.5 * 2e6) / beta; a local chunk of 3 MB with 4 past
 * the knee (3e6 + 4 * 2e6) / local bandwidth + local overhead; a kernel's launch 3 us, and
 * gelu priced by the elementwise curve when the profile has no transcendental one. */
Test(profile, bytes_terms_and_launch_by_hand) {
    ldt_cost_model m, back;
    ldt_link l = {1e-6, 100e9};
    char text[8192];
    int64_t dims[1] = {4};
    ldt_mesh *mesh;
    cr_assert_eq(ldt_cost_model_parse(BASE NODE "\"bytes_factor\":{\"all_gather\":2},"
                                      "\"cache\":{\"bytes\":1e6,\"beyond\":{\"all_gather\":1.5,\"local\":4}},"
                                      "\"compute\":{" PEAK ",\"memory_bandwidth_gbps\":1,\"launch_s\":3e-6,"
                                      "\"efficiency\":{\"elementwise\":[[1e3,0.5]]}}}", &m), LDT_OK, "%s", ldt_last_error());
    cr_expect(close_to(ldt_cost_kind_seconds(&m, l, 4, LDT_KIND_ALL_GATHER, 3000000),
                       1e-5 + 3e-6 + 2 * (3e6 + 1.5 * 2e6) / 100e9));
    cr_expect(close_to(ldt_cost_kind_seconds(&m, l, 4, LDT_KIND_ALL_REDUCE, 3000000),
                       1e-5 + 6e-6 + 3e6 / 100e9), "kinds without factors keep the link's price");
    cr_assert_eq(ldt_mesh_create(1, dims, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK);
    cr_expect(close_to(ldt_cost_seconds(&m, mesh, 1, (int[]){0}, LDT_COLL_LOCAL_CHUNK, 3000000, 0),
                       1e-6 + (3e6 + 4 * 2e6) / 10e9));
    ldt_mesh_destroy(mesh);
    cr_expect(close_to(ldt_cost_op_seconds(&m, LDT_OPCLASS_TRANSCENDENTAL, LDT_F32, 1e3, 4e3, 4),
                       4e3 / (1e9 * 0.5) + 3e-6));
    cr_assert_gt(ldt_cost_model_format(&m, text, sizeof text), 0);
    cr_assert_eq(ldt_cost_model_parse(text, &back), LDT_OK, "%s", ldt_last_error());
    expect_same_model(&back, &m);
    cr_expect(close_to(back.bytes_extra[LDT_KIND_ALL_GATHER], 1));
    cr_expect(close_to(back.cache_bytes, 1e6));
    cr_expect(close_to(back.beyond_cache[LDT_KIND_ALL_GATHER], 1.5));
    cr_expect(close_to(back.beyond_cache[LDT_KIND_COUNT], 4));
    cr_expect(close_to(back.launch_s, 3e-6));
}

Test(profile, node_packing_picks_the_link) {
    ldt_cost_model h, e;
    ldt_mesh *m, *m44, *m33, *m24;
    int d0 = 0, d1 = 1;
    cr_assert_eq(ldt_cost_model_preset("h100-80g", &h), LDT_OK);
    cr_assert_eq(ldt_mesh_parse("dp=2,tp=8", LDT_DEVICE_META, &m), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(ldt_cost_model_mesh_link(&h, m, 1).bandwidth_Bps, h.node_link.bandwidth_Bps);
    cr_expect_eq(ldt_cost_model_mesh_link(&h, m, 0).bandwidth_Bps, h.network_link.bandwidth_Bps);
    cr_expect_eq(ldt_cost_model_mesh_link(&h, m, 0).latency_s, h.network_link.latency_s);
    /* all_gather of 1 MiB per rank over dp (2 ranks, one hop of the network) */
    cr_expect(close_to(ldt_cost_seconds(&h, m, 1, &d0, LDT_COLL_ALL_GATHER, 1 << 20, 0),
                       6.6e-6 + 5e-6 + (double)(1 << 20) / 50e9));
    /* over tp: 7 NVLink hops */
    cr_expect(close_to(ldt_cost_seconds(&h, m, 1, &d1, LDT_COLL_ALL_GATHER, 1 << 20, 0),
                       6.6e-6 + 7 * 1e-6 + (double)(1 << 20) / 450e9));
    cr_assert_eq(ldt_cost_model_for_mesh(&h, m, &e), LDT_OK);
    cr_expect_eq(e.nlinks, 2);
    cr_expect_eq(e.links[0].bandwidth_Bps, 50e9);
    cr_expect_eq(e.links[1].bandwidth_Bps, 450e9);
    cr_expect(!ldt_cost_model_is_uniform(&e, 2));
    /* 4x4: the inner 4 share a node (4 divides 8), the outer dim spans 4 nodes' worth */
    cr_assert_eq(ldt_mesh_parse("4x4", LDT_DEVICE_META, &m44), LDT_OK);
    cr_expect_eq(ldt_cost_model_mesh_link(&h, m44, 1).bandwidth_Bps, 450e9);
    cr_expect_eq(ldt_cost_model_mesh_link(&h, m44, 0).bandwidth_Bps, 50e9);
    /* 3x3: groups of 3 consecutive ranks straddle the node boundary at rank 8 */
    cr_assert_eq(ldt_mesh_parse("3x3", LDT_DEVICE_META, &m33), LDT_OK);
    cr_expect_eq(ldt_cost_model_mesh_link(&h, m33, 1).bandwidth_Bps, 50e9);
    /* 2x4: 8 ranks, one node */
    cr_assert_eq(ldt_mesh_parse("2x4", LDT_DEVICE_META, &m24), LDT_OK);
    cr_expect_eq(ldt_cost_model_mesh_link(&h, m24, 0).bandwidth_Bps, 450e9);
    ldt_mesh_destroy(m);
    ldt_mesh_destroy(m44);
    ldt_mesh_destroy(m33);
    ldt_mesh_destroy(m24);
}

Test(profile, algorithms_set_the_hops) {
    ldt_cost_model h;
    ldt_link l = {2e-6, 100e9};
    cr_assert_eq(ldt_cost_model_preset("h100-80g", &h), LDT_OK);
    h.overhead_s = 1e-5;
    h.algo[LDT_KIND_ALL_REDUCE] = LDT_ALGO_TREE;
    /* tree all_reduce on 8 ranks: 2 * log2(8) = 6 hops */
    cr_expect(close_to(ldt_cost_kind_seconds(&h, l, 8, LDT_KIND_ALL_REDUCE, 1000000),
                       1e-5 + 6 * 2e-6 + 1e6 / 100e9));
    h.algo[LDT_KIND_ALL_REDUCE] = LDT_ALGO_RING; /* 2 (n-1) = 14 */
    cr_expect(close_to(ldt_cost_kind_seconds(&h, l, 8, LDT_KIND_ALL_REDUCE, 1000000),
                       1e-5 + 14 * 2e-6 + 1e6 / 100e9));
    h.algo[LDT_KIND_BROADCAST] = LDT_ALGO_TREE; /* ceil(log2 5) = 3 */
    cr_expect(close_to(ldt_cost_kind_seconds(&h, l, 5, LDT_KIND_BROADCAST, 1000),
                       1e-5 + 3 * 2e-6 + 1e3 / 100e9));
    cr_expect_eq(ldt_cost_kind_seconds(&h, l, 1, LDT_KIND_ALL_GATHER, 1000), 0);
}

/* The roofline by hand: a 4096^3 bf16 matmul on an H100 is compute-bound at the matmul
 * efficiency interpolated between (1e11, 0.75) and (1e12, 0.8) in log size. */
Test(profile, roofline_matmul_by_hand) {
    ldt_cost_model h, c, t;
    double n = 4096, flops = 2 * n * n * n, bytes = 3 * n * n * 2;
    double eff = 0.75 + 0.05 * log10(flops / 1e11);
    double want = flops / (989e12 * eff) + 2e-6;
    cr_assert_eq(ldt_cost_model_preset("h100-80g", &h), LDT_OK);
    cr_expect(close_to(ldt_cost_efficiency(&h, LDT_OPCLASS_MATMUL, flops), eff));
    cr_expect(fabs(ldt_cost_op_seconds(&h, LDT_OPCLASS_MATMUL, LDT_BF16, flops, bytes, 8) - want) < 1e-12,
              "%g vs %g", ldt_cost_op_seconds(&h, LDT_OPCLASS_MATMUL, LDT_BF16, flops, bytes, 8), want);
    /* f16 takes the bf16 peak; f32 its own (67 TFLOP/s) */
    cr_expect_eq(ldt_cost_op_seconds(&h, LDT_OPCLASS_MATMUL, LDT_F16, flops, bytes, 8),
                 ldt_cost_op_seconds(&h, LDT_OPCLASS_MATMUL, LDT_BF16, flops, bytes, 8));
    cr_expect(close_to(ldt_cost_op_seconds(&h, LDT_OPCLASS_MATMUL, LDT_F32, flops, 2 * bytes, 8),
                       flops / (67e12 * eff) + 2e-6));
    /* an elementwise add of 2 x 64 MiB into 64 MiB f32 is memory-bound: 0.9 past 1e8 B */
    cr_expect(close_to(ldt_cost_op_seconds(&h, LDT_OPCLASS_ELEMENTWISE, LDT_F32, 16777216.0,
                                           3 * 67108864.0, 8),
                       3 * 67108864.0 / (3350e9 * 0.9) + 2e-6));
    /* cores shared: 4 rank threads on cpu-threads' 2 cores run at half speed */
    cr_assert_eq(ldt_cost_model_preset("cpu-threads", &c), LDT_OK);
    cr_expect(close_to(ldt_cost_op_seconds(&c, LDT_OPCLASS_MATMUL, LDT_F32, 1e9, 1e6, 4) - 1e-6,
                       2 * (ldt_cost_op_seconds(&c, LDT_OPCLASS_MATMUL, LDT_F32, 1e9, 1e6, 2) - 1e-6)));
    /* a curve by hand: (1e3, 0.2), (1e5, 0.6): 0.4 at 1e4, flat outside */
    t = h;
    t.eff[LDT_OPCLASS_NORM].npoints = 2;
    t.eff[LDT_OPCLASS_NORM].size[0] = 1e3;
    t.eff[LDT_OPCLASS_NORM].eff[0] = 0.2;
    t.eff[LDT_OPCLASS_NORM].size[1] = 1e5;
    t.eff[LDT_OPCLASS_NORM].eff[1] = 0.6;
    cr_assert_eq(ldt_cost_model_check(&t), LDT_OK, "%s", ldt_last_error());
    cr_expect(close_to(ldt_cost_efficiency(&t, LDT_OPCLASS_NORM, 1e4), 0.4));
    cr_expect_eq(ldt_cost_efficiency(&t, LDT_OPCLASS_NORM, 10), 0.2);
    cr_expect_eq(ldt_cost_efficiency(&t, LDT_OPCLASS_NORM, 1e9), 0.6);
}

static char g_dir[64];

static void temp_home(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ldt_home_XXXXXX");
    cr_assert(mkdtemp(g_dir) != NULL);
    setenv("XDG_CACHE_HOME", g_dir, 1);
    unsetenv("LDT_PROFILE");
}

Test(profile, precedence_flag_env_saved_default) {
    ldt_mesh *cpu, *meta;
    ldt_cost_model m, a;
    const char *src = NULL;
    char path[256], want[256], file[256];
    temp_home();
    cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_CPU, &cpu), LDT_OK);
    cr_assert_eq(ldt_mesh_parse("2x8", LDT_DEVICE_META, &meta), LDT_OK);
    /* nothing set: the shipped default by device */
    cr_assert_eq(ldt_cost_model_default(NULL, cpu, &m, &src), LDT_OK, "%s", ldt_last_error());
    cr_expect_str_eq(m.name, "cpu-threads");
    cr_expect_str_eq(src, "default");
    cr_assert_eq(ldt_cost_model_default(NULL, meta, &m, &src), LDT_OK);
    cr_expect_str_eq(m.name, "h100-80g");
    /* a saved profile wins over the default, for every device */
    cr_assert_eq(ldt_cost_model_preset("a100-80g", &a), LDT_OK);
    snprintf(a.name, sizeof a.name, "mine");
    cr_assert_eq(ldt_cost_model_save_user(&a), LDT_OK, "%s", ldt_last_error());
    cr_expect_gt(ldt_cost_model_user_path(path, sizeof path), 0);
    snprintf(want, sizeof want, "%s/lazydt/profile.json", g_dir);
    cr_expect_str_eq(path, want);
    cr_assert_eq(ldt_cost_model_default(NULL, meta, &m, &src), LDT_OK, "%s", ldt_last_error());
    cr_expect_str_eq(m.name, "mine");
    cr_expect_str_eq(src, "saved");
    cr_assert_eq(ldt_cost_model_default(NULL, cpu, &m, &src), LDT_OK);
    cr_expect_str_eq(m.name, "mine");
    { /* written atomically: only profile.json is left in the directory */
        char d[128];
        int n = 0;
        struct dirent *de;
        DIR *dir;
        snprintf(d, sizeof d, "%s/lazydt", g_dir);
        cr_assert((dir = opendir(d)) != NULL);
        while ((de = readdir(dir)))
            if (de->d_name[0] != '.') {
                n++;
                cr_expect_str_eq(de->d_name, "profile.json");
            }
        closedir(dir);
        cr_expect_eq(n, 1);
    }
    /* LDT_PROFILE wins over the saved profile */
    setenv("LDT_PROFILE", "uniform", 1);
    cr_assert_eq(ldt_cost_model_default(NULL, meta, &m, &src), LDT_OK);
    cr_expect_str_eq(m.name, "uniform");
    cr_expect_str_eq(src, "env");
    /* the flag wins over everything: a name, or a file */
    cr_assert_eq(ldt_cost_model_default("h100-80g", cpu, &m, &src), LDT_OK);
    cr_expect_str_eq(m.name, "h100-80g");
    cr_expect_str_eq(src, "flag");
    snprintf(file, sizeof file, "%s/x.json", g_dir);
    snprintf(a.name, sizeof a.name, "from-file");
    cr_assert_eq(ldt_cost_model_save(&a, file), LDT_OK);
    cr_assert_eq(ldt_cost_model_default(file, cpu, &m, &src), LDT_OK, "%s", ldt_last_error());
    cr_expect_str_eq(m.name, "from-file");
    /* refusals name where the bad name came from */
    expect_error(ldt_cost_model_default("b200", cpu, &m, &src), LDT_ERR_INVALID_ARGUMENT,
                 "--profile: 'b200' is neither a profile name (a100-80g, cpu-threads, h100-80g, "
                 "uniform, nvlink-ib) nor a profile file");
    setenv("LDT_PROFILE", "/nonexistent/p.json", 1);
    expect_error(ldt_cost_model_default(NULL, cpu, &m, &src), LDT_ERR_INVALID_ARGUMENT,
                 "LDT_PROFILE: '/nonexistent/p.json' is neither");
    /* a broken saved profile is an error, not a silent fallback */
    unsetenv("LDT_PROFILE");
    {
        FILE *f = fopen(path, "w");
        cr_assert(f);
        fputs("{\"format\":\"lazydt-cost-profile\"}", f);
        fclose(f);
    }
    expect_error(ldt_cost_model_default(NULL, cpu, &m, &src), LDT_ERR_CORRUPT, "saved profile");
    /* HOME when XDG_CACHE_HOME is unset */
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/someone", 1);
    ldt_cost_model_user_path(path, sizeof path);
    cr_expect_str_eq(path, "/home/someone/.cache/lazydt/profile.json");
    ldt_mesh_destroy(cpu);
    ldt_mesh_destroy(meta);
}
