/* lazydt planner: redistribution plans (the cheapest list of transforms from one spec to
 * another, on one mesh or across two) and the alpha-beta cost model that prices them.
 *
 *   ldt_cost_model cm;
 *   ldt_redist_plan *plan;
 *   ldt_placement to[2] = {ldt_replicate(), ldt_shard(1)};
 *   ldt_cost_model_preset("h100-80g", &cm);        // or ldt_cost_model_load("profile.json")
 *   ldt_redist_options opt = {&cm, 1};
 *   if (ldt_redist_plan_create(&src, NULL, to, 2, &opt, &plan) != LDT_OK)  // src: S0,R
 *       puts(ldt_last_error());
 *   for (int i = 0; i < ldt_redist_plan_nsteps(plan); i++) {
 *       ldt_redist_step s;
 *       ldt_redist_plan_step(plan, i, &s);  // all_gather on mesh dim 0, then local_chunk
 *   }
 *   ldt_redist_plan_destroy(plan);
 *
 * Planning never runs anything: ldt_redistribute (exec.h) runs a plan on a communicator.
 */
#ifndef LDT_PLANNER_H
#define LDT_PLANNER_H

#include <stdio.h>

#include "ldt/core.h"
#include "ldt/export.h"
#include "ldt/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Cost model (a device profile, docs/cost-model.md): links with latency alpha (seconds per
 * hop) and bandwidth beta (bytes per second), a fixed overhead per collective call, a local
 * copy bandwidth, and the compute figures that price each op by a roofline.
 *
 * Links: either link classes (nlinks == 0): `node_link` between ranks of one node and
 * `network_link` between nodes, ranks packed `ranks_per_node` per node in mesh order (the
 * last mesh dim varies fastest; 0: one node holds every rank), so a mesh dim whose groups
 * stay inside a node uses the node link and the others the network link; or explicit links
 * per mesh dim (nlinks >= 1, the form `ldt calibrate` wrote before profiles had classes).
 *
 * With n ranks on the group and b the bytes the busiest rank sends or receives, h the hops
 * of the kind's algorithm (ring and direct: n-1, all_reduce 2(n-1); tree: ceil(log2 n),
 * all_reduce 2 ceil(log2 n)):
 *   collective (all_reduce, reduce_scatter, all_gather, all_to_all, broadcast):
 *       overhead + o_k + h alpha + (1 + x_k) (b + y_k max(0, b - C)) / beta
 *   with o_k = kind_overhead_s[k], x_k = bytes_extra[k], y_k = beyond_cache[k], C =
 *   cache_bytes (0: no knee; then the y term is off; a broadcast's C is local_cache_bytes
 *   when that is set: a plain copy on each receiving rank), all 0 unless a profile gives them
 *   (b = (n-1)/n B for a tensor of B bytes, 2 (n-1)/n B for all_reduce: the ring volumes)
 *   send_recv (cross-mesh): overhead + o_send_recv + p alpha + (1 + x_send_recv) (b +
 *   y_send_recv max(0, b - C)) / beta, p = most peers of one rank
 *   local ops (chunk, partial, pad): local overhead + ((1 + l_i) b + y_local max(0, b -
 *   C_local)) / local bandwidth, b the bytes written, l_i = local_bytes_extra[i] (each op's
 *   own), C_local = local_cache_bytes (0: C)
 * A group over several mesh dims (a merged step) is priced as one group over all its ranks
 * on its slowest link (largest alpha, smallest beta). A group of one rank costs nothing.
 *
 * Compute (ldt_cost_op_seconds): an op of `flops` FLOPs that reads and writes `bytes` takes
 *   slowdown * max(flops / (peak[dtype] * eff), bytes / (memory_bandwidth * eff)) + launch
 * where eff is the op class's efficiency curve at the op's size (FLOPs for the matmul class,
 * bytes for the others), interpolated linearly in log size between its points and flat
 * beyond them, and slowdown = max(1, ranks / cores) when `cores` > 0 (CPU threads sharing
 * cores); launch is launch_s (local_overhead_s when launch_s is 0).
 */
typedef struct ldt_link {
    double latency_s;     /* alpha: seconds per hop */
    double bandwidth_Bps; /* beta: bytes per second */
} ldt_link;

/* How a collective kind is carried out, which sets its hop count. */
typedef enum ldt_coll_algo {
    LDT_ALGO_RING,   /* n-1 hops (all_reduce: 2(n-1)) */
    LDT_ALGO_TREE,   /* ceil(log2 n) hops (all_reduce: twice that) */
    LDT_ALGO_DIRECT, /* one message to each peer: n-1 hops */
    LDT_ALGO_COUNT
} ldt_coll_algo;

/* The collective kinds a profile gives an algorithm for (JSON keys in quotes). */
typedef enum ldt_coll_kind {
    LDT_KIND_ALL_REDUCE,     /* "all_reduce" */
    LDT_KIND_REDUCE_SCATTER, /* "reduce_scatter" */
    LDT_KIND_ALL_GATHER,     /* "all_gather" */
    LDT_KIND_ALL_TO_ALL,     /* "all_to_all" */
    LDT_KIND_SEND_RECV,      /* "send_recv" */
    LDT_KIND_BROADCAST,      /* "broadcast" */
    LDT_KIND_COUNT
} ldt_coll_kind;

/* Compute precisions with a peak of their own (JSON keys "f32", "bf16", "f64"). f16 is
 * priced as bf16; integer and bool ops as f32. */
typedef enum ldt_precision { LDT_PREC_F32, LDT_PREC_BF16, LDT_PREC_F64, LDT_PREC_COUNT } ldt_precision;

/* Op classes with an efficiency curve of their own (JSON keys in quotes). */
typedef enum ldt_op_class {
    LDT_OPCLASS_MATMUL,      /* "matmul": matmul, linear, attention */
    LDT_OPCLASS_ELEMENTWISE, /* "elementwise": and copies, casts, indexing */
    LDT_OPCLASS_NORM,        /* "norm": layer_norm, rms_norm */
    LDT_OPCLASS_SOFTMAX,     /* "softmax": softmax, log_softmax, cross_entropy */
    LDT_OPCLASS_REDUCE,      /* "reduce": sum, mean, amax, ... */
    LDT_OPCLASS_TRANSCENDENTAL, /* "transcendental": gelu, tanh (a libm function per
                                   element); a profile without its curve prices them by
                                   the elementwise curve */
    LDT_OPCLASS_COUNT
} ldt_op_class;

#define LDT_EFF_MAX_POINTS 8
/* The local ops (local_chunk, local_partial, local_pad: ldt_collective's, in that order). */
#define LDT_LOCAL_OP_COUNT 3

/* Achieved fraction of peak as a function of size: npoints (0..8) points with increasing
 * size; 0 points: efficiency 1 at every size. */
typedef struct ldt_eff_curve {
    int npoints;
    double size[LDT_EFF_MAX_POINTS]; /* FLOPs (matmul class) or bytes (others), > 0 */
    double eff[LDT_EFF_MAX_POINTS];  /* in (0, 1] */
} ldt_eff_curve;

typedef struct ldt_cost_model {
    char name[32]; /* "cpu-threads", "h100-80g", "calibrated", a file's "name", ... */
    /* explicit links (nlinks >= 1): aligned to the inner end of the mesh: links[nlinks-1]
     * prices the innermost (last) mesh dim, links[nlinks-2] the one outside it, ...; mesh
     * dims further out than the list reach use links[0]. nlinks == 0: the link classes. */
    int nlinks; /* 0..LDT_MAX_DIMS */
    ldt_link links[LDT_MAX_DIMS];
    ldt_link node_link;    /* link classes: between ranks of one node */
    ldt_link network_link; /* between nodes (unused when ranks_per_node is 0) */
    int ranks_per_node;    /* 0: one node holds every rank */
    ldt_coll_algo algo[LDT_KIND_COUNT];
    double overhead_s;          /* fixed cost of one collective call */
    double local_bandwidth_Bps; /* local copies (chunk, pad) */
    double local_overhead_s;    /* fixed cost of one local op or kernel (a launch) */
    /* Per collective kind, what its implementation adds to the link's time per byte: the
     * byte term is (1 + bytes_extra[k]) b / beta (0: the link's bandwidth; an all_to_all
     * that packs and unpacks strided pieces moves each byte through memory more often). */
    double bytes_extra[LDT_KIND_COUNT];
    /* Per collective kind, what its call's fixed cost adds to overhead_s (0 unless a profile
     * gives it; may be negative, overhead_s + it >= 0): on rank threads a send/recv goes
     * through a mailbox and took 70 to 90 us at 1 to 16 KiB where the other kinds took 10
     * to 20, and a broadcast about 10. `ldt calibrate` fits send_recv's and broadcast's. */
    double kind_overhead_s[LDT_KIND_COUNT];
    /* The cache knee: the bytes a rank moves past cache_bytes (0: no knee) go at memory's
     * pace, beyond_cache[k] more per byte: (b + beyond_cache[k] max(0, b - cache_bytes))
     * in place of b above (a broadcast's knee: local_cache_bytes when set);
     * beyond_cache[LDT_KIND_COUNT] is the local ops'. */
    double cache_bytes;
    double beyond_cache[LDT_KIND_COUNT + 1];
    /* The local ops, each its own: local_bytes_extra[i] (i = c - LDT_COLL_LOCAL_CHUNK: chunk,
     * partial, pad) is what op i adds per byte to the local bandwidth's time, and
     * local_cache_bytes their own knee (0: cache_bytes), a broadcast's too. A local op's seconds are
     * local_overhead_s + ((1 + local_bytes_extra[i]) b + beyond_cache[LDT_KIND_COUNT]
     * max(0, b - C)) / local_bandwidth_Bps, C the local knee: a chunk copies its bytes
     * (read and written) where a pad or partial mostly zero-fills them (written only), and
     * on rank threads sharing a 2-core machine's caches the copies slowed about 2x from 2 to
     * 4 MiB a rank, far past the collectives' knee. */
    double local_bytes_extra[LDT_LOCAL_OP_COUNT];
    double local_cache_bytes;
    /* compute */
    double peak_flops[LDT_PREC_COUNT]; /* FLOP/s of one rank, per precision */
    double memory_bandwidth_Bps;       /* one rank's kernels reading and writing memory */
    ldt_eff_curve eff[LDT_OPCLASS_COUNT];
    int cores; /* CPU cores the ranks share (0: each rank has its own device) */
    double launch_s; /* a kernel's launch (an instruction's dispatch in a replay); 0: the
                        local_overhead_s, as profiles without "launch_s" price it */
    /* The rendezvous: what a meeting of peers inside a step (a collective) waits, beyond its
     * own price, for peers that share the cores (ranks > cores > 0):
     * (rendezvous_s + rendezvous_share * compute) (ranks / cores - 1), compute the step's
     * modeled kernel seconds since the previous meeting (the longer the ranks run apart, the
     * further apart they arrive). 0: none (the shipped profiles); `ldt calibrate` fits both. */
    double rendezvous_s;
    double rendezvous_share;
} ldt_cost_model;

/* The shipped profiles, embedded in the library (the same JSON as the repository's
 * profiles/NAME.json): "cpu-threads", "a100-80g", "h100-80g"; and the legacy presets
 * "uniform" (every dim one NVLink-class link: PyTorch's 87.7 GB/s, 0.6 us a hop, 6.6 us a
 * call) and "nvlink-ib" (that on the innermost mesh dim; 0.22x the bandwidth and 2.7 us a
 * hop on the outer dims), whose compute is the old flat 50 GFLOP/s. */
LDT_API ldt_status ldt_cost_model_preset(const char *name, ldt_cost_model *out);
/* The names ldt_cost_model_preset knows, in order; NULL past the end. */
LDT_API const char *ldt_cost_model_preset_name(int i);
/* A JSON profile (docs/cost-model.md):
 * {"format":"lazydt-cost-profile","version":2,"name":..,"overhead_s":..,
 *  "local_bandwidth_gbps":..,"local_overhead_s":..,
 *  "links":[{"latency_s":..,"bandwidth_gbps":..},...]            (explicit links), or
 *  "ranks_per_node":..,"node_link":{..},"network_link":{..}      (link classes),
 *  "algorithms":{"all_reduce":"ring"|"tree"|"direct",...},
 *  "compute":{"peak_tflops":{"f32":..,"bf16":..,"f64":..},"memory_bandwidth_gbps":..,
 *             "cores":..,"launch_s":..,"rendezvous_s":..,"rendezvous_share":..,
 *             "efficiency":{"matmul":[[size,eff],...],...}},
 *  "bytes_factor":{kind:factor,...}, "kind_overhead_s":{kind:seconds,...},
 *  "cache":{"bytes":..,"beyond":{kind|"local":..}}}
 * (launch_s, rendezvous_s, rendezvous_share, bytes_factor, kind_overhead_s and cache optional)
 * Version 1 files (no classes, algorithms or compute, as `ldt calibrate` wrote them) load:
 * ring algorithms, and the compute of before profiles: 50 GFLOP/s at every precision,
 * memory at the local bandwidth, efficiency 1. */
LDT_API ldt_status ldt_cost_model_load(const char *path, ldt_cost_model *out);
LDT_API ldt_status ldt_cost_model_parse(const char *json, ldt_cost_model *out);
LDT_API ldt_status ldt_cost_model_save(const ldt_cost_model *m, const char *path);
/* The same JSON written to a stream (`ldt calibrate --json` prints it). */
LDT_API ldt_status ldt_cost_model_write(const ldt_cost_model *m, FILE *f);
/* The JSON text into buf (cap bytes, NUL-terminated when cap > 0); returns the length it
 * needed (snprintf rules), or -1 when m is not a valid model or memory ran out. */
LDT_API int ldt_cost_model_format(const ldt_cost_model *m, char *buf, size_t cap);
/* Positive finite bandwidths and peaks, non-negative finite latencies and overheads, 0..8
 * links (0: a valid node link, and a network link when ranks_per_node > 0), known
 * algorithms, efficiency curves of 0..8 points with increasing sizes > 0 and efficiencies
 * in (0, 1], cores >= 0. */
LDT_API ldt_status ldt_cost_model_check(const ldt_cost_model *m);
/* The link that prices mesh dim `dim` of a mesh with `mesh_ndim` dims, from the explicit
 * links; for link classes (which need the mesh's sizes: ldt_cost_model_mesh_link), the node
 * link. */
LDT_API ldt_link ldt_cost_model_link(const ldt_cost_model *m, int mesh_ndim, int dim);
/* The link that prices mesh dim `dim` of `mesh`: explicit links as ldt_cost_model_link;
 * link classes by node packing: the dim's groups stay inside a node when the product of the
 * sizes of dims dim..last divides ranks_per_node (or ranks_per_node is 0, or the mesh has no
 * more ranks than a node). */
LDT_API ldt_link ldt_cost_model_mesh_link(const ldt_cost_model *m, const ldt_mesh *mesh, int dim);
/* The same model with one explicit link per mesh dim (nlinks = mesh_ndim), for overrides;
 * link classes resolve to the node link (ldt_cost_model_for_mesh resolves by packing). */
LDT_API ldt_status ldt_cost_model_expand(const ldt_cost_model *m, int mesh_ndim,
                                         ldt_cost_model *out);
/* The same model with one explicit link per dim of `mesh`, each ldt_cost_model_mesh_link's. */
LDT_API ldt_status ldt_cost_model_for_mesh(const ldt_cost_model *m, const ldt_mesh *mesh,
                                           ldt_cost_model *out);
/* 1 when every mesh dim of a mesh_ndim-dim mesh gets the same link (link classes: when the
 * two classes are equal or ranks_per_node is 0). */
LDT_API int ldt_cost_model_is_uniform(const ldt_cost_model *m, int mesh_ndim);
/* "all_reduce", ..., "broadcast"; "ring", "tree", "direct"; "f32", "bf16", "f64"; "matmul",
 * "elementwise", "norm", "softmax", "reduce", "transcendental"; "invalid" when out of range. */
LDT_API const char *ldt_coll_kind_name(ldt_coll_kind k);
LDT_API const char *ldt_coll_algo_name(ldt_coll_algo a);
LDT_API const char *ldt_precision_name(ldt_precision p);
LDT_API const char *ldt_op_class_name(ldt_op_class c);
/* The efficiency of op class c at `size` (FLOPs or bytes, see ldt_eff_curve). */
LDT_API double ldt_cost_efficiency(const ldt_cost_model *m, ldt_op_class c, double size);
/* Seconds for one kernel of class c at precision dt (ldt_dtype) doing `flops` FLOPs over
 * `bytes` bytes read and written, on one rank of a mesh of `nranks` ranks (the roofline
 * above; nranks only matters when cores > 0). */
LDT_API double ldt_cost_op_seconds(const ldt_cost_model *m, ldt_op_class c, int dt, double flops,
                                   double bytes, int nranks);

/* Precedence of the profile a command plans with (docs/cost-model.md): `flag` (a preset
 * name or a JSON file; NULL: none), then the environment variable LDT_PROFILE (the same),
 * then the user's saved profile (ldt_cost_model_user_path) when it exists, then the shipped
 * "cpu-threads" for CPU meshes and "h100-80g" for meta and CUDA meshes (mesh NULL: CPU).
 * Nothing is measured. *source (may be NULL) gets "flag", "env", "saved" or "default". */
LDT_API ldt_status ldt_cost_model_default(const char *flag, const ldt_mesh *mesh,
                                          ldt_cost_model *out, const char **source);
/* The user's saved profile path: $XDG_CACHE_HOME/lazydt/profile.json, or
 * $HOME/.cache/lazydt/profile.json; returns the length it needed (snprintf rules), or -1
 * when neither variable is set. */
LDT_API int ldt_cost_model_user_path(char *buf, size_t cap);
/* Saves m as the user's profile (creating the directories), atomically: a temporary file
 * in the same directory, fsync, rename over the old one. */
LDT_API ldt_status ldt_cost_model_save_user(const ldt_cost_model *m);

/* ---------------------------------------------------------------------------------------
 * Redistribution plans.
 */
#define LDT_COLLECTIVE_MAP(X)              \
    X(ALL_REDUCE, "all_reduce")            \
    X(REDUCE_SCATTER, "reduce_scatter")    \
    X(ALL_GATHER, "all_gather")            \
    X(ALL_TO_ALL, "all_to_all")            \
    X(LOCAL_CHUNK, "local_chunk")          \
    X(LOCAL_PARTIAL, "local_partial")      \
    X(LOCAL_PAD, "local_pad")              \
    X(SEND_RECV, "send_recv")

typedef enum ldt_collective {
#define LDT__COLL_ENUM(sfx, name) LDT_COLL_##sfx,
    LDT_COLLECTIVE_MAP(LDT__COLL_ENUM)
#undef LDT__COLL_ENUM
    LDT_COLL_COUNT
} ldt_collective;

/* "all_gather", ...; "invalid" otherwise. */
LDT_API const char *ldt_collective_name(ldt_collective c);
/* Seconds the model gives one collective over the group spanning `dims` of `mesh` (ndims of
 * them) when the busiest rank moves `bytes` (sent or received; for local ops, written).
 * send_recv is priced on the mesh's slowest link with `peers` hops; others ignore peers. */
LDT_API double ldt_cost_seconds(const ldt_cost_model *m, const ldt_mesh *mesh, int ndims,
                                const int *dims, ldt_collective c, int64_t bytes, int peers);
/* Seconds for one collective of kind k over n ranks on link l when the busiest rank moves
 * `bytes` (send_recv: n-1 is the peer count): overhead + hops(algorithm, n) alpha + b / beta;
 * 0 for n <= 1. */
LDT_API double ldt_cost_kind_seconds(const ldt_cost_model *m, ldt_link l, int64_t n,
                                     ldt_coll_kind k, int64_t bytes);

/* One timing for the fit below: a collective (or local op) over a group of `group` ranks
 * along mesh dim `dim` (its link), moving `bytes` as ldt_cost_seconds takes them, measured at
 * `seconds`. The fit fills `modeled` (the fitted model's seconds) and `weight` (the robust
 * weight it ended with: 1 a fully trusted point, 0 one rejected as an outlier). */
typedef struct ldt_cost_sample {
    ldt_collective collective; /* ignored when broadcast is 1 */
    int broadcast; /* 1: a broadcast (ldt_broadcast, which no redistribution step issues)
                      along mesh dim `dim`, `bytes` the buffer's: the kind's bytes factor and
                      knee factor are fitted from these; 0: the collective's */
    int dim;       /* mesh dim (link) of a collective; ignored for local ops */
    int64_t group; /* ranks in the group; ignored for local ops */
    int64_t bytes;
    double seconds;
    double modeled; /* out */
    double weight;  /* out */
} ldt_cost_sample;

/* Fits m's constants to n timings by least squares on relative error, made robust by
 * iterative reweighting (Huber, then Tukey's bisquare on the residuals' median absolute
 * deviation) and kept non-negative: collectives give overhead_s and, per link (mesh dim
 * 0..m->nlinks-1), latency_s and bandwidth_Bps under ldt_cost_seconds's formula (overhead +
 * hops * latency + the bytes term, hops 2(n-1) for all_reduce and n-1 otherwise), with per
 * link and kind a seconds per byte and per byte past the cache knee, factored into each
 * link's bandwidth (the geometric mean of its planner kinds' rates: all_reduce,
 * reduce_scatter, all_gather, all_to_all; send/recv and broadcast only when the link timed
 * nothing else), the kinds' bytes_extra (some below 0: a kind faster than the mean) and
 * beyond_cache, and all_reduce's, send/recv's and broadcast's kind_overhead_s (one each,
 * over every link); local ops give local_overhead_s, local_bandwidth_Bps (1 / the geometric mean of
 * the timed ops' seconds per byte), each op's local_bytes_extra against it, and their own
 * knee: local_cache_bytes and the local beyond_cache, the candidate (512 KiB, 1, 2, 4 or
 * 8 MiB, two sizes past it and three below) of least bounded loss over the sizes from
 * 256 KiB, taken only when it cuts the line's by a third (else 0 and 0); the local ops are
 * fitted first, and a broadcast's past-knee bytes count from their knee when they have one.
 * The collectives' knee (cache_bytes) is the candidate (none,
 * 512 KiB, 1, 2 or 4 MiB) whose fit has the least bounded loss, mean of min(e^2, 1) over the
 * collective samples, a knee replacing no knee when it cuts the loss by 2% and a smaller
 * knee only when it cuts the loss by a third, and only with five or more distinct sizes
 * among them. With a knee, the collectives' fit has two stages (the
 * local ops' is one joint fit): the overhead, latencies and
 * slopes below the knee from the samples at or below the smallest knee tried, then the
 * past-knee slopes from every sample with those fixed (so the bandwidths do not depend on
 * which knee wins); then a slope below the knee that its timings leave loose (its standard
 * error large against 0.15 in log: mostly the overhead, as a threaded all_reduce's) is
 * shrunk toward its slope past twice the knee over the kinds' pooled knee ratio, and the
 * past-knee slopes are fitted again (so one loose slope does not move every factor). Broadcast samples (broadcast 1) fit broadcast's bytes and knee factors,
 * with the hops of the profile's broadcast algorithm. Constants no sample constrains keep
 * m's values. Noiseless timings give the parameters back exactly (to rounding). Each
 * sample's modeled and weight are set; *rms (may be NULL) gets the root mean square of the
 * relative residuals (measured - modeled) / measured over the samples the fit kept. */
LDT_API ldt_status ldt_cost_model_fit(ldt_cost_sample *s, int n, ldt_cost_model *m, double *rms);

/* One step: a collective (or local op) over the group spanning mesh dims `dims`, moving
 * those dims from `from` to `to`. send_recv steps (cross-mesh) span no dims and carry the
 * whole placement lists of both sides in from/to (nfrom, nto entries). */
typedef struct ldt_redist_step {
    ldt_collective collective;
    int mesh;                 /* 0: the source mesh, 1: the target mesh (cross-mesh plans) */
    int ndims;                /* 1, several when merged onto a flattened group, 0: send_recv */
    int dims[LDT_MAX_DIMS];
    int nfrom, nto;           /* == ndims, except for send_recv */
    ldt_placement from[LDT_MAX_DIMS];
    ldt_placement to[LDT_MAX_DIMS];
    ldt_reduce_op op;         /* all_reduce / reduce_scatter: the reduction */
    int64_t bytes_sent;       /* per rank, the maximum over ranks */
    int64_t bytes_recv;
    double seconds;           /* modeled */
} ldt_redist_step;

typedef enum ldt_redist_search {
    LDT_REDIST_DIJKSTRA, /* shortest path over placement states (the default) */
    LDT_REDIST_NAIVE     /* reduce and gather everything to Replicate, then chunk */
} ldt_redist_search;

typedef struct ldt_redist_options {
    const ldt_cost_model *cost; /* NULL: ldt_cost_model_default(NULL, mesh) */
    int merge;                  /* merge same-collective steps onto flattened groups */
    ldt_redist_search search;
} ldt_redist_options;

typedef struct ldt_redist_plan ldt_redist_plan;

/* Plans src -> `to` (nto placements) on `to_mesh`, or on src's mesh when to_mesh is NULL or
 * equal to it. The plan borrows both meshes. opts NULL: the default profile, merging on,
 * Dijkstra. Across meshes: Partial dims of src are reduced on the source mesh, one
 * send_recv step moves the intersections of source and target regions, and Partial dims of
 * the target are made locally on the target mesh. Errors: placement lists that do not fit
 * the mesh, shard dims out of range, P(op) -> P(other op) on a mesh dim, sizes that
 * overflow, shapes or dtypes that differ (never: src and target share them). */
LDT_API ldt_status ldt_redist_plan_create(const ldt_spec *src, const ldt_mesh *to_mesh,
                                          const ldt_placement *to, int nto,
                                          const ldt_redist_options *opts, ldt_redist_plan **out);
LDT_API void ldt_redist_plan_destroy(ldt_redist_plan *p);
LDT_API int ldt_redist_plan_nsteps(const ldt_redist_plan *p);
LDT_API ldt_status ldt_redist_plan_step(const ldt_redist_plan *p, int i, ldt_redist_step *out);
/* Sum over steps of max(bytes_sent, bytes_recv): the busiest rank's traffic. */
LDT_API int64_t ldt_redist_plan_bytes(const ldt_redist_plan *p);
LDT_API double ldt_redist_plan_seconds(const ldt_redist_plan *p);
LDT_API const ldt_spec *ldt_redist_plan_source(const ldt_redist_plan *p);
LDT_API const ldt_spec *ldt_redist_plan_target(const ldt_redist_plan *p);
/* 1 for a plan across two meshes. */
LDT_API int ldt_redist_plan_is_cross_mesh(const ldt_redist_plan *p);
/* "all_gather [0] S0->R 144B/144B 2.1us"; returns the length it needed (snprintf rules). */
LDT_API int ldt_redist_step_format(const ldt_redist_step *s, char *buf, size_t cap);


/* ---------------------------------------------------------------------------------------
 * Custom ops' strategies (veScale's plug-in ops): for one mesh dim, the placements the output
 * may have with the placements each input must then have. The planner combines them over the
 * mesh dims and always allows all-Replicate. The op's CPU kernel (ldt_custom_op_register)
 * runs on each rank's local shards, so an option is right only when the kernel on local
 * shards gives the local shard of the output (elementwise ops: every shard follows).
 */
typedef struct ldt_strategy_builder ldt_strategy_builder;
typedef void (*ldt_custom_strategy_fn)(int nin, const ldt_shape *in_shapes,
                                       const ldt_shape *out_shape, void *user,
                                       ldt_strategy_builder *b);
/* Adds one option: the output's placement and each of the nin inputs'. */
LDT_API void ldt_strategy_add(ldt_strategy_builder *b, ldt_placement out, const ldt_placement *in);
/* Sets custom op `id`'s strategy function on ctx (fn NULL: only all-Replicate). */
LDT_API ldt_status ldt_custom_op_set_strategy(ldt_ctx *ctx, int id, ldt_custom_strategy_fn fn,
                                              void *user);

/* ---------------------------------------------------------------------------------------
 * Whole-graph planning: one strategy per node of a context's current trace, chosen for the
 * whole graph under the cost model, then lowered to one program per rank (docs/planner.md).
 *
 *   ldt_plan *plan;
 *   ldt_plan_options po = {0};                     // uniform cost model, whole-graph search
 *   if (ldt_plan_create(ctx, &po, &plan) != LDT_OK) puts(ldt_last_error());
 *   ldt_plan_write_json(plan, stdout);
 *   ldt_plan_run(plan, 1, &loss, &buf, &nbytes);   // exec.h: runs it on a threaded mesh
 *   ldt_plan_destroy(plan);
 *
 * A plan borrows the context and its current trace: it is valid until the trace ends.
 */
typedef struct ldt_plan ldt_plan;

typedef enum ldt_plan_search {
    LDT_PLAN_GLOBAL, /* whole graph: exact (variable elimination) within the work limit,
                        else the heuristic, never worse than LDT_PLAN_GREEDY (both priced, the
                        cheaper kept) */
    LDT_PLAN_GREEDY  /* op by op, each op following its inputs, as PyTorch dispatch does */
} ldt_plan_search;

typedef struct ldt_plan_options {
    const ldt_cost_model *cost; /* NULL: ldt_cost_model_default(NULL, mesh) */
    ldt_plan_search search;
    /* Any redistribution the user did not ask for (with ldt_redistribute_to) is an error
     * naming the op, the tensor and the transform (veScale's disable-redistribute). */
    int strict;
    /* The search weighs each op's compute too (a roofline estimate of its share of the work
     * on one rank), so it prefers splitting work to replicating it; 1 leaves it out and
     * prices communication only. */
    int no_compute_cost;
    /* Work limit of the exact search (docs/planner.md): table entries its variable
     * elimination may make, a count, never a time, so every rank and run plans alike. Past
     * it the heuristic search plans and ldt_plan_method says "heuristic", with ldt_plan_gap
     * bounding how far from the optimum it may be. 0: the default (LDT_PLAN_LIMIT_DEFAULT,
     * under which the elimination, its work counted by a dry run before any table, may make
     * 20 times as many entries and keep 4 times as many; the relaxation and the branch and
     * bound keep the limit); negative: no exact search. */
    int64_t plan_limit;
    /* 1: the exact search makes every elimination itself; 0 (default): an elimination that
     * repeats one made before on equal tables (repeated layers) reuses its table and counts no
     * work (ldt_plan_tied says whether that happened; the plan is the same optimum). */
    int no_tying;
    /* The memory weight, seconds per byte (>= 0; 0: off): each persistent tensor's strategy
     * (parameters, optimizer states) costs this times the bytes of the shard a rank keeps
     * resident, so the search trades step time for memory (docs/planner.md, "Memory
     * budget"). ldt_plan_create_budget finds the weight a budget needs. The plan's costs
     * (ldt_plan_cost) stay seconds: the term is the search's only. */
    double memory_weight;
} ldt_plan_options;

#define LDT_PLAN_LIMIT_DEFAULT 5000000

typedef struct ldt_plan_totals {
    int64_t collectives;         /* per rank, the maximum over ranks */
    int64_t comm_bytes_per_rank; /* sent or received by the busiest rank */
    int64_t redistributions;     /* edges that move data */
    double modeled_seconds;      /* redistributions and collectives, by the cost model */
    double plan_seconds;         /* wall time of the strategy search */
} ldt_plan_totals;

/* Plans the current trace of ctx on its mesh. Pins (ldt_pin) are honoured. */
LDT_API ldt_status ldt_plan_create(ldt_ctx *ctx, const ldt_plan_options *opts, ldt_plan **out);
LDT_API void ldt_plan_destroy(ldt_plan *p);
LDT_API ldt_status ldt_plan_totals_get(ldt_plan *p, ldt_plan_totals *out);
/* Calls of collective c in rank's program (all of the program's collectives when c is
 * LDT_COLL_COUNT); rank -1: the maximum over ranks. */
LDT_API ldt_status ldt_plan_count(ldt_plan *p, ldt_collective c, int rank, int64_t *out);
/* The chosen placements of t's value (one per mesh dim). */
LDT_API ldt_status ldt_plan_placements(const ldt_plan *p, const ldt_tensor *t, ldt_placement *out,
                                       int cap);
/* The modeled cost of the chosen strategies' redistributions (what the search minimises,
 * priced with the real redistribution plans). */
LDT_API double ldt_plan_cost(const ldt_plan *p);
/* The same for the op-by-op greedy choice on this graph (computed by every plan). */
LDT_API double ldt_plan_greedy_cost(const ldt_plan *p);
/* Wall time of ldt_plan_create (strategies, search, pricing; not lowering). */
LDT_API double ldt_plan_seconds(const ldt_plan *p);
/* How the strategies were chosen: "exact" (proven optimal under the cost model),
 * "exact-tied" (reserved: optimal among plans whose repeated layers share strategies; not
 * reported today, tying keeps the untied optimum and says "exact"), "heuristic" (the exact
 * search ran past its work limit, or the greedy search was asked for); with
 * ldt_plan_create_fixed, "exact" is optimal among the plans that keep the fixed choices; NULL
 * p: "". */
LDT_API const char *ldt_plan_method(const ldt_plan *p);
/* The proven relative gap (cost - lower bound) / cost: 0 when exact (or the cost is 0), at
 * most 1 otherwise; under a memory_weight, of the search's penalized objective (ldt_plan_price). */
LDT_API double ldt_plan_gap(const ldt_plan *p);
/* 1 when the exact search decided the plan and reused a table made for an equal, earlier
 * layer (tying: a reduction of its work, the optimum unchanged; docs/planner.md), else 0. */
LDT_API int ldt_plan_tied(const ldt_plan *p);

/* ---------------------------------------------------------------------------------------
 * A per-rank memory budget as a constraint of the search (docs/planner.md, "Memory budget").
 */
/* The peak memory per rank of plan, in bytes: what a budget bounds (the caller's figure, e.g.
 * parameters, gradients and optimizer states at their shards plus ldt_plan_arena_bytes). */
typedef ldt_status (*ldt_plan_peak_fn)(ldt_plan *plan, void *user, int64_t *peak);

typedef struct ldt_plan_budget {
    int64_t budget;        /* bytes per rank, > 0 */
    ldt_plan_peak_fn peak; /* the figure the budget bounds (required) */
    void *user;            /* passed to peak */
    int max_plans;         /* plans the search may make, 2 to 64 (0: LDT_PLAN_BUDGET_PLANS) */
} ldt_plan_budget;

#define LDT_PLAN_BUDGET_PLANS 10

typedef struct ldt_plan_budget_info {
    int fits;             /* the plan returned is within the budget */
    double memory_weight; /* the weight it was planned with (0: the budget did not bind) */
    int plans;            /* plans made (each a whole search) */
    int64_t peak;         /* the returned plan's peak */
    int64_t peak_free;    /* the plan without a memory weight: its peak */
    double cost_free;     /* ... and its cost (ldt_plan_cost) */
    double seconds;       /* wall time of the whole search (every plan, its peak measured) */
} ldt_plan_budget_info;

/* Plans the trace under a memory budget: the plan without a memory weight if its peak fits,
 * else the least-cost fitting plan of those made with memory weights found by a deterministic
 * search (up by 16 from cost / peak of the unweighted plan, at most to 16^5 times that, then
 * bisection in log scale; a count of plans, never a time, so every rank plans alike). When none fits, the plan of the least peak with info->fits 0 (the
 * caller refuses it, naming its parts). opts->memory_weight is ignored. Errors: a NULL
 * argument or peak function, budget <= 0, max_plans out of range, and ldt_plan_create's and
 * the peak function's. */
LDT_API ldt_status ldt_plan_create_budget(ldt_ctx *ctx, const ldt_plan_options *opts,
                                         const ldt_plan_budget *budget, ldt_plan **out,
                                         ldt_plan_budget_info *info);

/* ---------------------------------------------------------------------------------------
 * Strategy probes: check a plan against an independent search. Node i is ldt_trace_node(ctx,
 * i) of the planned trace; strategy s of a node is an index below ldt_plan_strategy_count, in
 * the planner's fixed enumeration order (0: all-Replicate, or a pinned leaf's pin). A refused
 * probe (node or strategy out of range, a choice array of the wrong length, an assignment
 * whose moves have no redistribution) returns an error with a message and changes nothing;
 * the plan stays usable.
 */
/* The number of strategies node `node` can take (1 for a bypassed node). */
LDT_API ldt_status ldt_plan_strategy_count(const ldt_plan *p, int64_t node, int *out);
/* The placements of strategy s of node: its output (k = -1) or what it needs input k to be;
 * cap >= the mesh's dims. */
LDT_API ldt_status ldt_plan_strategy_placements(const ldt_plan *p, int64_t node, int s, int k,
                                                ldt_placement *out, int cap);
/* A printable strategy: "out S(0),R <- in R,S(1) | S(0),R" (cap bytes, NUL-terminated). */
LDT_API ldt_status ldt_plan_strategy_describe(const ldt_plan *p, int64_t node, int s, char *buf,
                                              size_t cap);
/* The seconds strategy s of node costs of its own (its compute and the collectives its
 * lowering issues; 0 for leaves), as the search weighs them. */
LDT_API ldt_status ldt_plan_strategy_seconds(const ldt_plan *p, int64_t node, int s, double *out);
/* The price of moving input k of node from what its producer's strategy `from_s` gives to
 * what node's strategy s needs (0 when they are equal): the plan's one price. */
LDT_API ldt_status ldt_plan_move_seconds(ldt_plan *p, int64_t node, int k, int from_s, int s,
                                         double *out);
/* The chosen strategy of every node into out[0..n), n = ldt_trace_nodes. */
LDT_API ldt_status ldt_plan_choice(const ldt_plan *p, int32_t *out, int64_t n);
/* The cost of a full assignment choice[0..n) under the planner's prices: each non-leaf node's
 * own seconds plus, per value, each distinct placement list its consumers need that differs
 * from what it is (one move per list): what ldt_plan_cost reports for the chosen one (under a
 * memory_weight, plus each persistent tensor's memory term: the search's objective). */
LDT_API ldt_status ldt_plan_price(ldt_plan *p, const int32_t *choice, int64_t n, double *out);
/* Plans ctx with fixed[i] >= 0 forcing node i's strategy and -1 leaving it to the search
 * (n = ldt_trace_nodes); refused like ldt_plan_create, and when a fixed index is out of range
 * or the fixed strategies need a move that no redistribution makes. */
LDT_API ldt_status ldt_plan_create_fixed(ldt_ctx *ctx, const ldt_plan_options *opts,
                                         const int32_t *fixed, int64_t n, ldt_plan **out);
/* Parameter memory under the chosen placements (works on a meta mesh): the parameters' global
 * elements and bytes, and the most bytes any rank holds of them (its shards). Gradients take
 * as much again; Adam's two f32 states per element take 8 bytes an element of a shard. */
typedef struct ldt_plan_memory {
    int64_t params;                   /* elements */
    int64_t param_bytes;              /* global */
    int64_t per_rank_param_bytes_max; /* the largest rank's shards */
    int64_t per_rank_param_elems_max;
} ldt_plan_memory;
/* The plan's parameter memory, as described above. */
LDT_API ldt_status ldt_plan_memory_get(const ldt_plan *p, ldt_plan_memory *out);
/* The static memory plan's arena of rank's program: the bytes that its transient values
 * (inputs, activations; in a training step the gradients too) need at once, parameter shards
 * not included (what ldt_compile allocates per rank; `memory_per_rank.activations_peak`). */
LDT_API ldt_status ldt_plan_arena_bytes(ldt_plan *p, int rank, int64_t *out);
/* Classes of ranks whose programs are alike (the same local shapes, so the same figures): one
 * rank per class in ranks[] and the class's size in counts[], at most cap of each; *n is the
 * number of classes (call with cap 0 to learn it). Per-rank maxima need only these ranks, and
 * sums over ranks weigh each by its count: a mesh of millions of ranks has a few dozen. */
LDT_API ldt_status ldt_plan_rank_classes(ldt_plan *p, int *ranks, int64_t *counts, int cap, int *n);
/* What one step of the plan costs its busiest rank, from the lowered programs (one per class
 * of ranks, as the totals; each figure the maximum over ranks). */
#define LDT_PLAN_DIM_SETS (1 << LDT_MAX_DIMS)
typedef struct ldt_plan_step {
    /* the modeled time of a rank's program: each kernel by the profile's roofline, each
     * collective and redistribution by the cost model, all in series (no overlap) */
    double modeled_step_seconds;
    /* the bytes of arena values (not parameters or optimizer states) that the forward (the
     * trace up to the boundary node) writes and a later instruction reads: what the step
     * keeps for its backward; 0 without a boundary */
    int64_t saved_bytes;
    /* per-rank traffic (bytes_per_rank summed) by the set of mesh dims a collective spans
     * (bit d: mesh dim d) and collective (LDT_COLL_ALL_REDUCE ... LDT_COLL_SEND_RECV) */
    int64_t comm_bytes[LDT_PLAN_DIM_SETS][LDT_COLL_COUNT];
    /* modeled_step_seconds split, on the same rank's program (the one whose serial time is
     * the largest): its kernels (compute_seconds) and its collectives and redistributions
     * (comm_seconds), the two summing to modeled_step_seconds; and the parts of each in the
     * forward (instructions of trace nodes before the boundary; 0 without one). */
    double compute_seconds, comm_seconds;
    double forward_compute_seconds, forward_comm_seconds;
    /* compute_seconds by op class (ldt_op_class; instructions that are no kernel, such as
     * loads and fills, count as elementwise), and the forward's part of each */
    double class_seconds[LDT_OPCLASS_COUNT], forward_class_seconds[LDT_OPCLASS_COUNT];
} ldt_plan_step;
/* The figures above for plan p; boundary (may be NULL) is the last node of the forward (the
 * loss of a training step) that saved_bytes is measured at. */
LDT_API ldt_status ldt_plan_step_get(ldt_plan *p, const ldt_tensor *boundary, ldt_plan_step *out);

/* The JSON of `ldt plan --json`: {"nodes":[...],"totals":{...}}. */
LDT_API ldt_status ldt_plan_write_json(ldt_plan *p, FILE *f);
/* Graphviz: nodes coloured by placement, redistribution edges labelled with collectives, a
 * title and a legend. */
LDT_API ldt_status ldt_plan_write_dot(ldt_plan *p, FILE *f);
/* The same under a title (the graph's label; NULL: "plan on mesh M: N nodes"). Nodes show
 * op, name, placements, global and local shape (the first rank's; "(uneven)" when ranks
 * differ); a legend cluster names each colour's placement lists and the red edges. */
LDT_API ldt_status ldt_plan_write_dot_titled(ldt_plan *p, const char *title, FILE *f);
/* The program of one rank, one instruction per line. */
LDT_API ldt_status ldt_plan_write_program(ldt_plan *p, int rank, FILE *f);

/* ---------------------------------------------------------------------------------------
 * User graph passes and bypass (docs/planner.md), veScale's dispatch patches for a whole
 * graph at once: functions that run at every ldt_plan_create on a context (so every compile
 * and eager run), in registration order.
 *
 *   static ldt_status seq_parallel_ln(ldt_ctx *ctx, ldt_plan *plan, void *user) {
 *       for (int64_t i = 0; i < ldt_trace_nodes(ctx); i++) {       // trace.h walks the graph
 *           ldt_tensor *t = ldt_trace_node(ctx, i);
 *           if (strcmp(ldt_tensor_op(t), "layer_norm") == 0) ldt_pin(t, seq, 1);
 *       }
 *       return LDT_OK;
 *   }
 *   ldt_pass_register(ctx, LDT_PASS_PRE_PLAN, "seq-parallel-ln", seq_parallel_ln, NULL);
 *
 * Pre-plan passes (plan is NULL) see the traced graph and may annotate it: ldt_pin on any node
 * and ldt_bypass on op results; they must not record ops (an error). Post-plan passes see the
 * chosen strategies (ldt_plan_placements, ldt_plan_input_placements) and may change a node's
 * with ldt_plan_set_placements; after each post-plan pass the plan is validated again (moves
 * repriced, strict mode re-checked). A pass returns LDT_OK or an error (with ldt_set_error for
 * its message); any error, or an invalid change, fails ldt_plan_create with a message that
 * starts "pass '<name>'". Passes should be pure functions of the graph and `user`: the plan
 * cache keys on which passes are registered (ldt_passes_hash), not on what they decide.
 */
typedef enum ldt_pass_stage {
    LDT_PASS_PRE_PLAN,  /* before the strategy search: pin, bypass */
    LDT_PASS_POST_PLAN, /* after it: inspect, change chosen strategies */
    LDT_PASS_STAGE_COUNT
} ldt_pass_stage;

typedef ldt_status (*ldt_pass_fn)(ldt_ctx *ctx, ldt_plan *plan, void *user);

/* Registers fn under a unique name (1..63 characters) to run at `stage` of every plan of ctx;
 * user is handed back, borrowed. */
LDT_API ldt_status ldt_pass_register(ldt_ctx *ctx, ldt_pass_stage stage, const char *name,
                                     ldt_pass_fn fn, void *user);
/* Passes registered on ctx (all stages). */
LDT_API int ldt_pass_count(const ldt_ctx *ctx);
/* Bypass (veScale's bypass-for-sharding-prop): the op that produced t (a result of the current
 * trace) gets the fixed output placements out (one per mesh dim); the search does not choose its
 * strategy: it takes the first of the op's strategies (enumeration order) with that output,
 * and its inputs are redistributed to what that strategy needs. No such strategy (S on a
 * normalised dim, P(max) out of a matmul, ...) fails ldt_plan_create naming the node. */
LDT_API ldt_status ldt_bypass(ldt_tensor *t, const ldt_placement *out, int n);
/* The placements t's chosen strategy needs its input k to have (where the planner moves data
 * when the producer chose otherwise). */
LDT_API ldt_status ldt_plan_input_placements(const ldt_plan *p, const ldt_tensor *t, int k,
                                             ldt_placement *out, int cap);
/* Post-plan passes: gives node t (an op result or a leaf of the planned trace) the strategy
 * whose output is out (n placements, one per mesh dim) and, when in is not NULL, whose inputs
 * are in[k*n .. k*n+n) for each input k; among several, the one whose inputs need the fewest
 * moves from what their producers chose. Consumers' moves follow. No such strategy: an error
 * naming the node, op and placements, and the change is not made. */
LDT_API ldt_status ldt_plan_set_placements(ldt_plan *p, ldt_tensor *t, const ldt_placement *out,
                                           const ldt_placement *in, int n);
/* Hash of ctx's registered passes (stage, name, function, user pointer, in order) and the
 * current trace's bypass marks: part of the plan cache's key. 0 when there are none. */
LDT_API uint64_t ldt_passes_hash(const ldt_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
