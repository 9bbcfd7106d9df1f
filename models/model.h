/* Internal: the model body shared by the builders (models/mlp.c, models/gpt.c). */
#ifndef LDT_MODELS_MODEL_H
#define LDT_MODELS_MODEL_H

#include "ldt/models.h"

#define LDT_MODEL_MAX_INPUTS 2

typedef enum { MODEL_MLP, MODEL_GPT } model_kind;

struct ldt_model {
    ldt_ctx *ctx;
    model_kind kind;
    ldt_model_config cfg;
    int nparams, cap;
    ldt_tensor **params;
    char **names;
    int ninputs;
    ldt_tensor *inputs[LDT_MODEL_MAX_INPUTS];
    const char *input_names[LDT_MODEL_MAX_INPUTS];
    ldt_tensor *positions; /* gpt: the i64 constant 0..S-1 */
    ldt_tensor *output;    /* of the last forward */
};

/* Adds a parameter called name (printf format) of the given shape; NULL on error. */
ldt_tensor *model_param(ldt_model *m, const ldt_shape *shape, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
ldt_status mlp_create(ldt_model *m);
ldt_tensor *mlp_forward(ldt_model *m);
ldt_status gpt_create(ldt_model *m);
ldt_tensor *gpt_forward(ldt_model *m);

#endif
