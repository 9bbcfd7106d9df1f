/* Internal: the model body shared by the builders (models/mlp.c, models/gpt.c). */
#ifndef LDT_MODELS_MODEL_H
#define LDT_MODELS_MODEL_H

#include "ldt/models.h"

#define LDT_MODEL_MAX_INPUTS 2

typedef enum { MODEL_MLP, MODEL_GPT } model_kind;

/* A gpt layer's recomputation (docs/recompute.md): NONE keeps the attention core's weights
 * (traced unfused: scores, mask, softmax, dropout, attention over v); SELECTIVE recomputes
 * them in the backward (the fused sdpa kernel, whose backward recomputes the weights from q,
 * k and v); FULL records the whole layer as a recomputation segment (ldt_recompute_begin). */
typedef enum { MODEL_RC_NONE, MODEL_RC_SELECTIVE, MODEL_RC_FULL } model_rc;

/* A parameter's initial value (ldt_model_init): GPT-2's rule, fixed when it is created
 * rather than guessed from its name. */
typedef enum { MODEL_INIT_NORMAL, MODEL_INIT_ZERO, MODEL_INIT_ONE } model_init;

struct ldt_model {
    ldt_ctx *ctx; /* borrowed: owns the params, inputs and constants below */
    model_kind kind;
    ldt_model_config cfg;
    int nparams, cap;
    ldt_tensor **params;
    char **names;
    model_init *init;
    int ninputs;
    ldt_tensor *inputs[LDT_MODEL_MAX_INPUTS];
    const char *input_names[LDT_MODEL_MAX_INPUTS];
    ldt_tensor *positions; /* gpt: the i64 constant 0..S-1 [S] */
    ldt_tensor *output;    /* of the last forward; valid in its trace only */
    int sp;                /* gpt under "megatron-sp": activations whole on tp split on seq */
    /* gpt: per layer, how its activations are kept for the backward (MODEL_RC_*); NULL: all
     * MODEL_RC_SELECTIVE (ldt_model_set_recompute) */
    unsigned char *recompute;
    ldt_tensor *causal_mask; /* gpt, MODEL_RC_NONE layers: the bool constant [S, S], j <= i */
    ldt_tensor *neg_inf;     /* and the f64 constant -inf (0-dim); both made once */
    /* gpt in a pipelined forward (models/pipeline.c): per layer its virtual stage, the last
     * stage, the micro-batch being recorded and the head's alias of the tied table; NULL
     * pp_stage outside one */
    const int *pp_stage;
    int pp_last, pp_micro;
    ldt_tensor *pp_head;
    /* gpt, when not NULL (ldt_model_stage_seconds): the forward gives the residual stream
     * entering layer l (entry l) and the head (entry layers) a node of its own, an alias
     * (no instruction), outside any recomputation segment, and records it here */
    ldt_tensor **marks;
};

/* Adds a parameter called name (printf format) of the given shape and initial value; NULL
 * on error (the context's error, or out of memory). */
ldt_tensor *ldt__model_param(ldt_model *m, model_init init, const ldt_shape *shape,
                             const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* The status to return after ldt__model_param or ldt_input gave NULL. */
ldt_status ldt__model_fail(const ldt_model *m);

ldt_status ldt__mlp_create(ldt_model *m);
ldt_tensor *ldt__mlp_forward(ldt_model *m);
ldt_status ldt__gpt_create(ldt_model *m);
ldt_tensor *ldt__gpt_forward(ldt_model *m);

#endif
