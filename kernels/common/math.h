/* Scalar math of the elementwise ops, f32 and f64, as inline functions for CPU and CUDA.
 *
 * One definition for both backends, so that they round the same way.
 *   gelu (erf form)   0.5 x (1 + erf(x / sqrt 2))
 *   gelu (tanh form)  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 *   silu              x / (1 + exp(-x))
 *
 * Each is evaluated in a form that keeps its accuracy in the negative tail, where the textbook
 * form cancels (1 + erf(z) and 1 + tanh(u) are both near 1 - 1): 1 + erf(z) = erfc(-z), and
 * 0.5 (1 + tanh(u)) = sigmoid(2u), with sigmoid(t) = e^t / (1 + e^t) for t < 0 so that exp
 * never overflows. Limits are kept: f(-inf) = -0, f(+inf) = +inf, NaN stays NaN.
 *
 *   float y = ldt__gelu_erf_f32(x);       // CPU loop body or CUDA thread body alike
 */
#ifndef LDT_KERNELS_COMMON_MATH_H
#define LDT_KERNELS_COMMON_MATH_H

#include <math.h>

#include "core/half.h" /* LDT_HD */

#define LDT__SQRT1_2 0.70710678118654752440084436210484903   /* 1 / sqrt(2) */
#define LDT__SQRT_2_PI 0.79788456080286535587989211986876373 /* sqrt(2 / pi) */
#define LDT__GELU_C 0.044715

/* Plain wrappers so that kernels generated per dtype can paste the suffix (_f32 / _f64). */
LDT_HD float ldt__exp_f32(float x) { return expf(x); }
LDT_HD double ldt__exp_f64(double x) { return exp(x); }
LDT_HD float ldt__log_f32(float x) { return logf(x); }
LDT_HD double ldt__log_f64(double x) { return log(x); }
LDT_HD float ldt__sqrt_f32(float x) { return sqrtf(x); }
LDT_HD double ldt__sqrt_f64(double x) { return sqrt(x); }
LDT_HD float ldt__tanh_f32(float x) { return tanhf(x); }
LDT_HD double ldt__tanh_f64(double x) { return tanh(x); }
LDT_HD float ldt__pow_f32(float x, float y) { return powf(x, y); }
LDT_HD double ldt__pow_f64(double x, double y) { return pow(x, y); }

/* 1/sqrt(x), correctly rounded twice rather than CUDA's approximate rsqrtf, so that both
 * backends agree. rsqrt(0) = +inf, rsqrt(-1) = NaN. */
LDT_HD float ldt__rsqrt_f32(float x) { return 1.0f / sqrtf(x); }
LDT_HD double ldt__rsqrt_f64(double x) { return 1.0 / sqrt(x); }

/* max(x, 0) that keeps NaN (x < 0 is false for NaN), as torch.relu does. */
LDT_HD float ldt__relu_f32(float x) { return x < 0.0f ? 0.0f : x; }
LDT_HD double ldt__relu_f64(double x) { return x < 0.0 ? 0.0 : x; }

/* x * sigmoid(t), without overflow in exp: t >= 0 uses x / (1 + e^-t) (e^-t <= 1); t < 0
 * uses x e^t / (1 + e^t) (e^t < 1). When e^t underflows to 0 the product is -0 (x is then
 * negative), which also gives -0 instead of NaN for x = -inf. */
LDT_HD float ldt__mul_sigmoid_f32(float x, float t) {
    if (t >= 0.0f) return x / (1.0f + expf(-t));
    float e = expf(t); /* NaN t lands here and stays NaN */
    return e == 0.0f ? -0.0f : x * e / (1.0f + e);
}
LDT_HD double ldt__mul_sigmoid_f64(double x, double t) {
    if (t >= 0.0) return x / (1.0 + exp(-t));
    double e = exp(t);
    return e == 0.0 ? -0.0 : x * e / (1.0 + e);
}

LDT_HD float ldt__silu_f32(float x) { return ldt__mul_sigmoid_f32(x, x); }
LDT_HD double ldt__silu_f64(double x) { return ldt__mul_sigmoid_f64(x, x); }

/* 0.5 x erfc(-x / sqrt 2): erfc keeps full relative accuracy where 1 + erf(z) would cancel.
 * erfc underflows to 0 only for very negative x, where the result is -0 (and -inf gives -0,
 * not -inf * 0 = NaN). */
LDT_HD float ldt__gelu_erf_f32(float x) {
    float c = erfcf(-x * (float)LDT__SQRT1_2);
    return c == 0.0f ? -0.0f : 0.5f * x * c;
}
LDT_HD double ldt__gelu_erf_f64(double x) {
    double c = erfc(-x * LDT__SQRT1_2);
    return c == 0.0 ? -0.0 : 0.5 * x * c;
}

/* The erf form's derivative: Phi(x) + x phi(x), Phi(x) = 0.5 erfc(-x / sqrt 2),
 * phi(x) = exp(-x^2 / 2) / sqrt(2 pi) (the backward of gelu, attrs form 2). */
LDT_HD float ldt__gelu_erf_grad_f32(float x) {
    return 0.5f * erfcf(-x * (float)LDT__SQRT1_2) + x * expf(-0.5f * x * x) * 0.3989422804014327f;
}
LDT_HD double ldt__gelu_erf_grad_f64(double x) {
    return 0.5 * erfc(-x * LDT__SQRT1_2) + x * exp(-0.5 * x * x) * 0.3989422804014327;
}

/* 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3). */
LDT_HD float ldt__gelu_tanh_f32(float x) {
    float t = 2.0f * (float)LDT__SQRT_2_PI * (x + (float)LDT__GELU_C * x * x * x);
    return ldt__mul_sigmoid_f32(x, t);
}
LDT_HD double ldt__gelu_tanh_f64(double x) {
    double t = 2.0 * LDT__SQRT_2_PI * (x + LDT__GELU_C * x * x * x);
    return ldt__mul_sigmoid_f64(x, t);
}

#endif
