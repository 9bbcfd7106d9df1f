/* dtype table (size, name, float-ness) and f16/bf16 <-> f32 conversion. */
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"

typedef struct {
    const char *name;
    size_t size;
    int is_float;
} dtype_info;

static const dtype_info k_dtypes[] = {
#define LDT__DTYPE_ROW(sfx, name, size, fl) {name, size, fl},
    LDT_DTYPE_MAP(LDT__DTYPE_ROW)
#undef LDT__DTYPE_ROW
};
_Static_assert(sizeof k_dtypes / sizeof k_dtypes[0] == LDT_DTYPE_COUNT,
               "one dtype_info row per ldt_dtype");

static int valid(ldt_dtype t) { return (int)t >= 0 && t < LDT_DTYPE_COUNT; }

size_t ldt_dtype_size(ldt_dtype t) { return ldt__dtype_size(t); }
const char *ldt_dtype_name(ldt_dtype t) { return valid(t) ? k_dtypes[t].name : "invalid"; }
int ldt_dtype_is_float(ldt_dtype t) { return ldt__dtype_is_float(t); }

ldt_status ldt_dtype_parse(const char *text, ldt_dtype *out) {
    static const struct {
        const char *alias;
        ldt_dtype t;
    } aliases[] = {{"float32", LDT_F32}, {"float", LDT_F32},     {"float64", LDT_F64},
                   {"double", LDT_F64},  {"float16", LDT_F16},   {"half", LDT_F16},
                   {"bfloat16", LDT_BF16}, {"int32", LDT_I32},   {"int64", LDT_I64},
                   {"uint8", LDT_U8}};
    if (!text || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "dtype: text and out must not be NULL");
    for (int i = 0; i < LDT_DTYPE_COUNT; i++)
        if (strcmp(text, k_dtypes[i].name) == 0) {
            *out = (ldt_dtype)i;
            return LDT_OK;
        }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(text, aliases[i].alias) == 0) {
            *out = aliases[i].t;
            return LDT_OK;
        }
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
             "dtype: unknown dtype '%s', expected one of f32 f64 f16 bf16 i32 i64 u8 bool", text);
}

uint16_t ldt_f32_to_f16(float f) { return ldt__f32_to_f16(f); }
float ldt_f16_to_f32(uint16_t h) { return ldt__f16_to_f32(h); }
uint16_t ldt_f32_to_bf16(float f) { return ldt__f32_to_bf16(f); }
float ldt_bf16_to_f32(uint16_t h) { return ldt__bf16_to_f32(h); }
