/* lazydt model builders, written against the public API only: `mlp` (residual MLP blocks
 * with an MSE loss) and `gpt` (GPT-2 style decoder with a cross-entropy loss).
 *
 *   ldt_model_config cfg = ldt_model_config_default("gpt");   // tiny sizes, f32
 *   ldt_model *m;
 *   ldt_model_create(ctx, "gpt", &cfg, &m);          // makes the params and inputs
 *   ldt_model_init(m, 42);                          // deterministic values on the stream
 *   ldt_input_bind(ldt_model_input(m, 0, NULL), tokens, nbytes);
 *   ldt_tensor *loss = ldt_model_forward(m);        // records the forward pass
 *   float l; ldt_read(loss, &l, sizeof l);
 */
#ifndef LDT_MODELS_H
#define LDT_MODELS_H

#include "ldt/export.h"
#include "ldt/planner.h"
#include "ldt/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ldt_model_config {
    int64_t layers, hidden, heads, vocab, seq, batch;
    ldt_dtype dtype; /* of params and activations; f32 by default */
    double dropout;  /* gpt: on attention weights and after attention/MLP; 0 by default */
    int train;       /* dropout active */
    int64_t positions; /* gpt: rows of the learned position table wpe (GPT-2's n_positions,
                        * >= seq); 0: seq */
} ldt_model_config;

typedef struct ldt_model ldt_model;

/* Small defaults for "mlp" or "gpt" (layers 2, hidden 64, heads 4, vocab 128, seq 16,
 * batch 4, f32, no dropout). */
LDT_API ldt_model_config ldt_model_config_default(const char *kind);
/* Checks the config (sizes >= 1, hidden % heads == 0 for gpt, float dtype) and creates the
 * model's parameters (zero) and inputs on ctx.
 * mlp inputs: "x" [batch, hidden], "target" [batch, hidden].
 * gpt inputs: "tokens" [batch, seq] i64, "targets" [batch, seq] i64 (-1 is ignored). */
LDT_API ldt_status ldt_model_create(ldt_ctx *ctx, const char *kind, const ldt_model_config *cfg,
                                    ldt_model **out);
LDT_API void ldt_model_destroy(ldt_model *m);
/* Parameters: count, the i-th tensor and its name ("h.0.attn.qkv.w" style). */
LDT_API int ldt_model_nparams(const ldt_model *m);
LDT_API ldt_tensor *ldt_model_param(const ldt_model *m, int i, const char **name);
LDT_API int ldt_model_ninputs(const ldt_model *m);
LDT_API ldt_tensor *ldt_model_input(const ldt_model *m, int i, const char **name);
/* Total parameter elements. gpt: V*H + P*H + L*(12H^2 + 13H) + 2H (P: positions, else seq). */
LDT_API int64_t ldt_model_param_count(const ldt_model *m);
LDT_API ldt_status ldt_model_param_count_of(const char *kind, const ldt_model_config *cfg,
                                            int64_t *out);
/* Fills the parameters GPT-2 style (weights N(0, 0.02), biases 0, norms 1) from the random
 * stream with this seed, by running a small trace. On a meta mesh it gives each parameter
 * that recipe instead (ldt_param_init), drawing the same stream positions. */
LDT_API ldt_status ldt_model_init(ldt_model *m, uint64_t seed);
/* Records the forward pass and returns the loss (0-dim); NULL with the error stuck on the
 * context on failure. *logits (gpt) or *out (mlp) may be requested through ldt_model_output
 * after this call, in the same trace. */
LDT_API ldt_tensor *ldt_model_forward(ldt_model *m);
LDT_API ldt_tensor *ldt_model_output(const ldt_model *m);
/* Pins a sharding scheme on the parameters and inputs (the planner derives the rest):
 * "megatron" (tensor parallel on the mesh dim named "tp", else the last unless one is named
 * "dp": a dp-only mesh is data parallel; the batch on the dim named "dp", else the first
 * non-tp dim of a 2-D+ mesh; a dim named "pp" is neither: everything whole there, the
 * pipeline's, docs/pipeline.md): mlp W1/b1 S0 and W2 S1; gpt qkv weight and bias
 * IS0:3 (q, k and v each split by heads), attention and MLP output projections S1, c_fc S0,
 * the token embedding (and tied LM head) S0 on the vocab; inputs S0 on dp. "megatron-sp":
 * the same, and the gpt's residual stream, norm outputs and dropouts split on the sequence
 * over tp (sequence parallel) where megatron keeps them whole. "none": nothing. */
LDT_API ldt_status ldt_model_pin(ldt_model *m, const char *scheme);
/* Switches dropout on (train != 0) or off for later forward passes. */
LDT_API void ldt_model_set_train(ldt_model *m, int train);
/* gpt: how layer `layer` (-1: every layer) keeps its activations for the backward
 * (docs/recompute.md): "none" keeps the attention core's weights (scores, softmax, dropout
 * traced unfused), "selective" recomputes them in the backward (the fused attention kernel:
 * the default), "full" recomputes the whole layer from its input (a recomputation segment,
 * ldt_recompute_begin). Losses and gradients are the same in every mode. Applies to later
 * forward passes. Refused: an unknown mode, a layer out of range, the mlp model. */
LDT_API ldt_status ldt_model_set_recompute(ldt_model *m, int64_t layer, const char *mode);
/* The mode of layer `layer` ("none", "selective" or "full"); NULL when m is not a gpt or the
 * layer is out of range. */
LDT_API const char *ldt_model_recompute(const ldt_model *m, int64_t layer);

/* ---- pipeline parallelism (docs/pipeline.md) -------------------------------------------
 *   ldt_pipeline_config pc = {LDT_PIPE_1F1B, 1, 4, NULL};   // 4 micro-batches, balanced split
 *   ldt_tensor *loss = ldt_model_forward_pipeline(m, &pc, tokens, targets);
 *   ldt_grad(loss, ...); ldt_optim_step(...); ldt_compile(...);   // each rank: its stages
 */
typedef struct ldt_pipeline_config {
    ldt_pipe_schedule schedule;
    int chunks;             /* model chunks per rank: V of interleaved:V; 0 or 1 otherwise */
    int micro;              /* micro-batches a step */
    const int *layer_stage; /* per layer its virtual stage (0 first, ascending, each stage at
                               least one layer); NULL: ldt_model_pipeline_split's */
} ldt_pipeline_config;
/* Splits cfg's layers into `stages` contiguous virtual stages of at least one layer each by
 * forward FLOPs (a layer 24 B S H^2 + 4 B S^2 H, the last stage also the head's 2 B S H V,
 * the embeddings free): ldt_model_pipeline_split_seconds on those figures. What
 * ldt_model_forward_pipeline uses when given no split; `ldt train` splits by modeled time
 * (ldt_model_stage_seconds). layer_stage gets cfg->layers entries. gpt only; refused with
 * fewer layers than stages. */
LDT_API ldt_status ldt_model_pipeline_split(const char *kind, const ldt_model_config *cfg, int stages,
                                            int *layer_stage);
/* Splits n layers into `stages` contiguous stages of at least one layer each, stage k holding
 * layers [c_k, c_{k+1}) and costing the sum of their layer_seconds, plus first_seconds on
 * stage 0 and last_seconds on the last stage, so that the largest stage's cost is as small
 * as it can be (exact: a dynamic program over the cut points). Ties (costs within a relative
 * 1e-12): the last stage gets the fewest layers that keep that largest cost, and the stages
 * before it are split the same way (their own largest cost as small as it can be, then the
 * fewest layers on the last of them, ...): the earlier stages the more. layer_stage gets n entries (each layer's stage); stage_seconds,
 * when not NULL, `stages` entries (each stage's cost). Refused: NULL arrays, stages < 1,
 * n < stages, n > 2^20, a negative or non-finite cost. */
LDT_API ldt_status ldt_model_pipeline_split_seconds(int64_t n, const double *layer_seconds,
                                                    double first_seconds, double last_seconds,
                                                    int stages, int *layer_stage,
                                                    double *stage_seconds);
/* What each part of a gpt's pipeline stages costs one micro-batch, forward and backward
 * (docs/pipeline.md, "The stage split"): layer_seconds[l] for layer l (m's layers entries,
 * under the layer's recomputation mode: ldt_model_set_recompute), *first_seconds for the
 * embeddings (the first stage's), *last_seconds for the final norm, the LM head and the loss
 * (the last stage's). Modeled by the planner under cost model cm: a 3-layer copy of m (its
 * sizes, batch = one micro-batch over dp, dtype, dropout) is traced on a meta mesh of the
 * stage's shape (m's mesh without its "pp" dim, cm's links of the other dims), pinned by
 * `pins` (megatron, megatron-sp or none; NULL: megatron, or megatron-sp when m was pinned
 * so), its backward recorded part by part, planned once; each part's seconds are its
 * instructions' modeled seconds in the busiest rank's program (ldt_plan_step_get at the
 * part's boundaries); a layer is the middle one of the three, once per recomputation mode in
 * use. The optimizer and the send/recv between stages are not counted. Refused: NULL
 * arguments, an mlp model. */
LDT_API ldt_status ldt_model_stage_seconds(const ldt_model *m, const char *pins,
                                           const ldt_cost_model *cm, double *layer_seconds,
                                           double *first_seconds, double *last_seconds);
/* Records a pipelined step's forward on the context's "pp" mesh dim (gpt; starts the trace's
 * pipeline, ldt_pipeline_begin): micro-batch i reads tokens[i] and targets[i] (inputs shaped
 * like the model's own, which may be micro-batch 0's). Returns the mean of the micro-batches'
 * losses: with equal micro-batches, the loss of their whole batch. The LM head reads the tied
 * table through an alias, so the first and last stages' gradients of it are summed once, at
 * the end (as Megatron's embedding all-reduce). Refused:
 * mlp, fewer layers than P x chunks virtual stages, interleaved with layers not a multiple of
 * P x chunks, a layer_stage that is not ascending from 0 to the last stage (NULL and
 * ldt_last_error says why). */
LDT_API ldt_tensor *ldt_model_forward_pipeline(ldt_model *m, const ldt_pipeline_config *pc,
                                               ldt_tensor *const *tokens, ldt_tensor *const *targets);

/* ---- model checkpoints (docs/checkpoint.md, "Model checkpoints") ---------------------
 *   ldt_model_save(m, "ckpt", 0, NULL, NULL);   // the parameters, sharded as pinned
 *   ldt_model_config_load("ckpt", &cfg);        // layers, hidden, heads, vocab, positions
 *   ldt_model_load(m2, "ckpt", 0, NULL, NULL);  // onto m2's mesh, whatever the saved one
 */
/* Saves the model's parameters into the sharded checkpoint dir (ldt_ckpt_save: atomic), each
 * on the context's mesh under its pin (Replicate where it has none), the configuration as the
 * i64 tensor "lazydt.model" [kind (1 gpt, 0 mlp), layers, hidden, heads, vocab, positions,
 * dtype (ldt_dtype's value)],
 * and n more persistent tensors of the same context (optimizer state, a training state) under
 * their own names (ldt_tensor_name), all in one save. Refused on a meta mesh. */
LDT_API ldt_status ldt_model_save(ldt_model *m, const char *dir, int n, ldt_tensor *const *extra);
/* Loads the model's parameters from dir (resharded: any saved mesh) after checking dir's
 * "lazydt.model" against the model's configuration (an error names the first field that
 * differs; seq and batch are free), then the n extra persistent tensors by their names (shape
 * and dtype must match). All or nothing: nothing is set unless every tensor loads. */
LDT_API ldt_status ldt_model_load(ldt_model *m, const char *dir, int n, ldt_tensor *const *extra);
/* The configuration dir's "lazydt.model" records: kind ("gpt" or "mlp", into kind_out when
 * not NULL), layers, hidden, heads, vocab, positions and dtype into cfg (other fields
 * untouched). */
LDT_API ldt_status ldt_model_config_load(const char *dir, ldt_model_config *cfg,
                                         const char **kind_out);

/* ---- Hugging Face GPT-2 weights (docs/checkpoint.md, "GPT-2 weights") ---------------- */
typedef struct ldt_hf_options {
    int64_t heads;  /* attention heads; 0: n_head of the config.json beside src */
    ldt_dtype dtype; /* the model dtype the weights are converted to (f32 when 0 = LDT_F32) */
} ldt_hf_options;
/* Imports GPT-2 weights (src: one .safetensors file, or a directory holding
 * model.safetensors.index.json and the shards it lists, or model.safetensors) into a lazydt
 * checkpoint at out_dir on `mesh` (sharded as the megatron pins) that the built-in gpt loads
 * (ldt_model_load). HF names (optional "transformer." prefix): wte, wpe, h.{i}.ln_1,
 * attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, ln_f; Conv1D weights [in, out] are
 * transposed to the model's [out, in]; lm_head.weight must equal wte (tied) or be absent;
 * attn.bias / attn.masked_bias mask buffers are skipped. Layers, hidden, vocab and positions
 * come from the shapes. F32, F16 and BF16 are read. Refused, naming the tensor: unknown
 * names, missing tensors, shapes that disagree, other dtypes. cfg_out (may be NULL) receives
 * the configuration. */
LDT_API ldt_status ldt_hf_import(const char *src, const char *out_dir, const ldt_mesh *mesh,
                                 const ldt_hf_options *opts, ldt_model_config *cfg_out);
/* Writes the gpt checkpoint dir as one HF GPT-2 safetensors file at out_path (via a temporary
 * file): HF names (with the prefix the import saw), Conv1D weights [in, out], tensors sorted
 * by name, in `dtype` (f32, f16 or bf16; LDT_DTYPE_COUNT: the dtype the import read, f32 for
 * a checkpoint not imported). An unmodified import of a file so laid out gives its bytes. */
LDT_API ldt_status ldt_hf_export(const char *dir, const char *out_path, ldt_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
