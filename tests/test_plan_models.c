/* The planner on whole graphs: the MLP and GPT forwards equal one device under the plans it
 * picks; Megatron from pins alone; strict mode; deterministic plans; whole-graph search never
 * worse than op-by-op greedy on random DAGs. */
#include <criterion/criterion.h>

#include "ldt/models.h"
#include "planner/plan_internal.h"
#include "tests/plan_check.h"

/* A model on a context over mesh_text, params initialised, inputs bound, pins set, forward
 * recorded; *loss is its loss. */
typedef struct model_run {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_tensor *loss;
} model_run;

static int g_big; /* the Megatron GPT test's sizes: a real vocabulary, 8 heads */

static void model_open(model_run *r, const char *kind, const char *mesh_text, const char *pins,
                       int layers) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default(kind);
    memset(r, 0, sizeof *r);
    cfg.layers = layers;
    cfg.hidden = 24; /* 6 heads of 4: splits on 2, 3 and 4 ranks, hidden 24 and 96 too */
    cfg.heads = 6;
    cfg.vocab = 30;
    cfg.seq = 5;
    cfg.batch = 3; /* uneven on 2 and 4 ranks */
    if (g_big) {
        cfg.hidden = 32;
        cfg.heads = 8;
        cfg.vocab = 20000;
        cfg.seq = 16;
        cfg.batch = 4;
    }
    if (mesh_text) cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &r->mesh), LDT_OK);
    co.mesh = r->mesh;
    co.seed = 7;
    cr_assert_eq(ldt_ctx_create(&co, &r->ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(r->ctx, kind, &cfg, &r->m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_init(r->m, 11), LDT_OK, "%s", ldt_last_error());
    for (int i = 0; i < ldt_model_ninputs(r->m); i++) {
        const char *name;
        ldt_tensor *t = ldt_model_input(r->m, i, &name);
        ldt_shape s;
        ldt_dtype dt = ldt_tensor_dtype(t);
        void *d;
        ldt_tensor_shape(t, &s);
        d = pc_data(name, &s, dt, cfg.vocab);
        cr_assert_eq(ldt_input_bind(t, d, pc_nbytes(&s, dt)), LDT_OK);
        free(d);
    }
    cr_assert_eq(ldt_model_pin(r->m, pins), LDT_OK, "%s", ldt_last_error());
    r->loss = ldt_model_forward(r->m);
    cr_assert(r->loss != NULL, "%s", ldt_ctx_errmsg(r->ctx));
}

static void model_close(model_run *r) {
    ldt_model_destroy(r->m);
    ldt_ctx_destroy(r->ctx);
    ldt_mesh_destroy(r->mesh);
}

static double eager_loss(const char *kind, int layers) {
    model_run r;
    float l;
    model_open(&r, kind, NULL, "none", layers);
    cr_assert_eq(ldt_read(r.loss, &l, sizeof l), LDT_OK, "%s", ldt_ctx_errmsg(r.ctx));
    model_close(&r);
    return l;
}

static double planned_loss(model_run *r, const ldt_plan_options *po, ldt_plan **keep) {
    ldt_plan *plan;
    float l;
    void *dst = &l;
    int64_t nb = sizeof l;
    cr_assert_eq(ldt_plan_create(r->ctx, po, &plan), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_run(plan, 1, &r->loss, &dst, &nb), LDT_OK, "%s", ldt_last_error());
    if (keep) *keep = plan;
    else ldt_plan_destroy(plan);
    return l;
}

/* The collective counts below are the heuristic search's (plan_limit -1: Megatron's pattern,
 * which the pins give it); the default exact search may find a plan the cost model prices
 * lower (a reduce_scatter and a sequence-parallel tail instead of an all_reduce): it must be
 * no dearer than the heuristic's, and run to the same loss. */
static const ldt_plan_options *heuristic_opts(void) {
    static ldt_plan_options po;
    po.plan_limit = -1;
    return &po;
}

static void exact_no_dearer(model_run *r, const ldt_plan *heur, double ref) {
    ldt_plan *plan;
    double got = planned_loss(r, NULL, &plan);
    cr_assert(fabs(got - ref) <= 1e-5 * (1 + fabs(ref)), "exact plan: loss %.9g, one device %.9g", got, ref);
    cr_assert_str_eq(ldt_plan_method(plan), "exact");
    cr_assert_leq(ldt_plan_cost(plan), ldt_plan_cost(heur) * (1 + 1e-12), "exact %.9g, heuristic %.9g",
                  ldt_plan_cost(plan), ldt_plan_cost(heur));
    ldt_plan_destroy(plan);
}

static void check_model(const char *kind, const char *mesh, const char *pins) {
    double ref = eager_loss(kind, 2), got;
    model_run r;
    model_open(&r, kind, mesh, pins, 2);
    got = planned_loss(&r, NULL, NULL);
    cr_assert(fabs(got - ref) <= 1e-5 * (1 + fabs(ref)), "%s on %s pins %s: loss %.9g, one device %.9g",
              kind, mesh, pins, got, ref);
    model_close(&r);
}

Test(plan_models, mlp_forward_equals_one_device) {
    const char *meshes[] = {"2", "3", "4", "2x2"};
    for (int i = 0; i < 4; i++) {
        check_model("mlp", meshes[i], "none");
        check_model("mlp", meshes[i], "megatron");
    }
}

Test(plan_models, gpt_forward_equals_one_device) {
    const char *meshes[] = {"2", "3", "4", "2x2"};
    for (int i = 0; i < 4; i++) {
        check_model("gpt", meshes[i], "none");
        check_model("gpt", meshes[i], "megatron");
    }
}

/* Every collective of every rank's program: calls of c, and whether any touches mesh dim
 * `dim` (-1: none checked). */
static int64_t count_calls(ldt_plan *plan, ldt_collective c, int dim, int *touches) {
    int64_t n = 0, best = 0;
    const ldt_mesh *mesh = ldt__plan_mesh(plan);
    *touches = 0;
    for (int i = 0; i < ldt_mesh_nranks(mesh); i++) {
        ldt_status st;
        const ldt__program *p = ldt__plan_program(plan, ldt_mesh_rank_at(mesh, i), &st);
        cr_assert(p != NULL, "%s", ldt_last_error());
        n = 0;
        for (int64_t j = 0; j < p->nins; j++) {
            const ldt__instr *x = &p->ins[j];
            if (x->kind == LDT__I_ALL_REDUCE) {
                n += c == LDT_COLL_ALL_REDUCE || c == LDT_COLL_COUNT;
                for (int d = 0; d < x->ndims; d++) *touches |= x->dims[d] == dim;
            } else if (x->kind == LDT__I_REDIST) {
                for (int s = 0; s < ldt_redist_plan_nsteps(x->plan); s++) {
                    ldt_redist_step rs;
                    ldt_redist_plan_step(x->plan, s, &rs);
                    if (rs.collective > LDT_COLL_ALL_TO_ALL) continue;
                    n += rs.collective == c || c == LDT_COLL_COUNT;
                    for (int d = 0; d < rs.ndims; d++) *touches |= rs.dims[d] == dim;
                }
            }
        }
        if (n > best) best = n;
    }
    return best;
}

Test(plan_models, megatron_mlp_one_all_reduce_per_block) {
    for (int layers = 1; layers <= 3; layers++) {
        model_run r;
        ldt_plan *plan;
        int touches;
        double ref = eager_loss("mlp", layers), got;
        model_open(&r, "mlp", "tp=4", "megatron", layers);
        got = planned_loss(&r, heuristic_opts(), &plan);
        cr_assert(fabs(got - ref) <= 1e-5 * (1 + fabs(ref)));
        cr_assert_eq(count_calls(plan, LDT_COLL_ALL_REDUCE, -1, &touches), layers);
        cr_assert_eq(count_calls(plan, LDT_COLL_COUNT, -1, &touches), layers,
                     "exactly one collective per block, and no other");
        exact_no_dearer(&r, plan, ref);
        ldt_plan_destroy(plan);
        model_close(&r);
    }
}

Test(plan_models, megatron_mlp_on_dp_tp_has_no_dp_traffic) {
    model_run r;
    ldt_plan *plan;
    int touches;
    double ref = eager_loss("mlp", 2), got;
    model_open(&r, "mlp", "dp=2,tp=2", "megatron", 2);
    got = planned_loss(&r, heuristic_opts(), &plan);
    cr_assert(fabs(got - ref) <= 1e-5 * (1 + fabs(ref)));
    count_calls(plan, LDT_COLL_COUNT, 0, &touches);
    cr_assert_eq(touches, 0, "no collective on the dp mesh dim in the forward");
    cr_assert_eq(count_calls(plan, LDT_COLL_ALL_REDUCE, -1, &touches), 2);
    exact_no_dearer(&r, plan, ref);
    ldt_plan_destroy(plan);
    /* the exact plan moves nothing on the dp dim either */
    planned_loss(&r, NULL, &plan);
    count_calls(plan, LDT_COLL_COUNT, 0, &touches);
    cr_assert_eq(touches, 0, "no collective on the dp mesh dim in the forward (exact plan)");
    ldt_plan_destroy(plan);
    model_close(&r);
}

Test(plan_models, strict_names_the_op_tensor_and_transform) {
    model_run r;
    ldt_plan *plan = NULL;
    ldt_plan_options po = {0};
    po.strict = 1;
    model_open(&r, "mlp", "tp=4", "megatron", 1);
    cr_assert_eq(ldt_plan_create(r.ctx, &po, &plan), LDT_ERR_INVALID_USAGE);
    cr_assert_null(plan);
    cr_assert(strstr(ldt_last_error(), "strict") && strstr(ldt_last_error(), "->") &&
                  strstr(ldt_last_error(), "P"),
              "%s", ldt_last_error());
    model_close(&r);
    /* with nothing pinned and communication priced alone every op runs replicated: nothing
     * to move, strict passes (with the roofline, splitting the linears over tp=4 saves more
     * compute than the local chunk of x costs, which strict refuses like any move) */
    po.no_compute_cost = 1;
    model_open(&r, "mlp", "tp=4", "none", 1);
    cr_assert_eq(ldt_plan_create(r.ctx, &po, &plan), LDT_OK, "%s", ldt_last_error());
    ldt_plan_destroy(plan);
    model_close(&r);
}

static char *program_text(ldt_plan *plan) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    const ldt_mesh *mesh = ldt__plan_mesh(plan);
    for (int i = 0; i < ldt_mesh_nranks(mesh); i++)
        cr_assert_eq(ldt_plan_write_program(plan, ldt_mesh_rank_at(mesh, i), f), LDT_OK);
    fclose(f);
    return buf;
}

Test(plan_models, plans_are_deterministic) {
    char *first = NULL;
    for (int rep = 0; rep < 3; rep++) {
        model_run r;
        ldt_plan *plan;
        char *text;
        model_open(&r, "gpt", "dp=2,tp=2", rep == 2 ? "megatron" : "none", 2);
        cr_assert_eq(ldt_plan_create(r.ctx, NULL, &plan), LDT_OK);
        text = program_text(plan);
        if (rep == 0) first = text;
        else if (rep == 1) {
            cr_assert_str_eq(text, first, "the same graph planned twice gives the same programs");
            free(text);
        } else {
            cr_assert_str_neq(text, first, "pins change the plan");
            free(text);
        }
        ldt_plan_destroy(plan);
        model_close(&r);
    }
    free(first);
}

/* GPT with Megatron pins on tp=4 (a real vocabulary: the LM head's logits are what would be
 * costly to gather): two all_reduces per block (after the attention and the MLP output
 * projections), one where the vocab-parallel embedding's Partial meets the first layer norm,
 * the vocab-parallel cross_entropy's four of one value per row or less (the row max, the
 * [loss sum, count] pair, and the exp sums and target logits reduce-scattered over the rows),
 * and no all_gather at all: the logits stay sharded on the vocabulary. The loss equals one
 * device's. */
Test(plan_models, megatron_gpt_two_all_reduces_per_block_logits_never_gathered) {
    g_big = 1;
    for (int layers = 1; layers <= 2; layers++) {
        model_run r;
        ldt_plan *plan;
        int touches;
        double ref = eager_loss("gpt", layers), got;
        model_open(&r, "gpt", "tp=4", "megatron", layers);
        got = planned_loss(&r, heuristic_opts(), &plan);
        cr_assert(fabs(got - ref) <= 1e-5 * (1 + fabs(ref)), "loss %.9g, one device %.9g", got, ref);
        cr_assert_eq(count_calls(plan, LDT_COLL_ALL_REDUCE, -1, &touches), 2 * layers + 1 + 2);
        cr_assert_eq(count_calls(plan, LDT_COLL_REDUCE_SCATTER, -1, &touches), 2);
        cr_assert_eq(count_calls(plan, LDT_COLL_ALL_GATHER, -1, &touches), 0, "nothing is gathered");
        cr_assert_eq(count_calls(plan, LDT_COLL_COUNT, -1, &touches), 2 * layers + 5);
        exact_no_dearer(&r, plan, ref);
        ldt_plan_destroy(plan);
        model_close(&r);
    }
    g_big = 0;
}

/* Megatron pins by mesh dim names: on "dp=4" the model is data parallel (every parameter
 * replicated, inputs split on the batch); on "tp=4" tensor parallel (inputs whole); on
 * "dp=2,tp=2" both; an unnamed 2-D mesh takes tp last and dp first. */
Test(plan_models, megatron_pins_follow_the_mesh_dim_names) {
    static const struct {
        const char *mesh;
        int dp, tp; /* mesh dims, -1: none */
    } cases[] = {{"dp=4", 0, -1}, {"tp=4", -1, 0}, {"dp=2,tp=2", 0, 1}, {"tp=2,dp=2", 1, 0}, {"2x2", 0, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        model_run r;
        int sharded_on_tp = 0;
        model_open(&r, "gpt", cases[c].mesh, "megatron", 1);
        for (int i = 0; i < ldt_model_ninputs(r.m); i++) {
            ldt_placement pl[LDT_MAX_DIMS];
            int pinned;
            cr_assert_eq(ldt_tensor_pin(ldt_model_input(r.m, i, NULL), pl, LDT_MAX_DIMS, &pinned), LDT_OK);
            cr_assert(pinned);
            for (int d = 0; d < ldt_mesh_ndim(r.mesh); d++)
                cr_assert_eq(pl[d].kind, d == cases[c].dp ? LDT_PLACE_SHARD : LDT_PLACE_REPLICATE,
                             "%s: input %d mesh dim %d", cases[c].mesh, i, d);
        }
        for (int i = 0; i < ldt_model_nparams(r.m); i++) {
            ldt_placement pl[LDT_MAX_DIMS];
            int pinned;
            const char *name;
            cr_assert_eq(ldt_tensor_pin(ldt_model_param(r.m, i, &name), pl, LDT_MAX_DIMS, &pinned), LDT_OK);
            if (!pinned) continue;
            for (int d = 0; d < ldt_mesh_ndim(r.mesh); d++) {
                if (d == cases[c].tp) sharded_on_tp |= pl[d].kind != LDT_PLACE_REPLICATE;
                else cr_assert_eq(pl[d].kind, LDT_PLACE_REPLICATE, "%s: %s split on mesh dim %d (not tp)",
                                  cases[c].mesh, name, d);
            }
        }
        cr_assert_eq(sharded_on_tp, cases[c].tp >= 0, "%s: weights split on tp", cases[c].mesh);
        model_close(&r);
    }
}
