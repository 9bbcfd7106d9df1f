/* Row math of the neural-network kernels, f32 and f64, as inline functions for CPU and CUDA.
 *
 * One definition for both backends, so that they round the same way:
 *   softmax        y_j = exp(x_j - m) / s,        m = max_j x_j, s = sum_j exp(x_j - m)
 *   log_softmax    y_j = (x_j - m) - log(s)
 *   cross-entropy  loss = log(s) - (x_t - m)     (= logsumexp(x) - x_t, without cancelling
 *                                                 two huge numbers)
 *   norm stats     mean and 1/sqrt(var + eps), two passes: var = mean((x - mean)^2)
 *   dropout        x * (1 / (1 - p)), 0 where dropped; p = 1 drops all (scale 0, no division)
 *
 * Subtracting the row max keeps exp <= 1, so logits of 1000 stay finite. exp is taken in the
 * row's type (expf for f32); sums, means and variances accumulate in double, so a row of f32
 * is not limited by f32 summation. NaN propagates as in torch: a NaN anywhere in a row makes
 * the whole row NaN, and a row of only -inf gives NaN (-inf - -inf).
 *
 *   float row[n];                      // CPU loop over rows, or one CUDA thread per row
 *   ldt__softmax_row_f32(row, n);      // in place
 */
#ifndef LDT_KERNELS_COMMON_NN_MATH_H
#define LDT_KERNELS_COMMON_NN_MATH_H

#include <math.h>
#include <stdint.h>

#include "core/half.h" /* LDT_HD, ldt__f32_bits, the half conversions */

/* The largest element of a row, NaN if any is NaN, -inf for an empty row. */
LDT_HD float ldt__row_max_f32(const float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        if (x[j] > m || isnan(x[j])) {
            m = x[j];
            if (isnan(m)) break;
        }
    return m;
}
LDT_HD double ldt__row_max_f64(const double *x, int64_t n) {
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        if (x[j] > m || isnan(x[j])) {
            m = x[j];
            if (isnan(m)) break;
        }
    return m;
}

/* softmax of a row, in place: exp in the row's type, the sum in double, one division each. */
LDT_HD void ldt__softmax_row_f32(float *x, int64_t n) {
    float m = ldt__row_max_f32(x, n);
    double s = 0.0;
    for (int64_t j = 0; j < n; j++) {
        x[j] = expf(x[j] - m);
        s += x[j];
    }
    for (int64_t j = 0; j < n; j++) x[j] = (float)((double)x[j] / s);
}
LDT_HD void ldt__softmax_row_f64(double *x, int64_t n) {
    double m = ldt__row_max_f64(x, n), s = 0.0;
    for (int64_t j = 0; j < n; j++) {
        x[j] = exp(x[j] - m);
        s += x[j];
    }
    for (int64_t j = 0; j < n; j++) x[j] /= s;
}

/* log(sum_j exp(x_j - m)) for the row max m: what log_softmax and cross-entropy subtract. */
LDT_HD double ldt__log_sum_exp_shifted_f32(const float *x, int64_t n, float m) {
    double s = 0.0;
    for (int64_t j = 0; j < n; j++) s += expf(x[j] - m);
    return log(s);
}
LDT_HD double ldt__log_sum_exp_shifted_f64(const double *x, int64_t n, double m) {
    double s = 0.0;
    for (int64_t j = 0; j < n; j++) s += exp(x[j] - m);
    return log(s);
}

/* log_softmax of a row, in place: (x - m) - log(s), formed in double and rounded once. */
LDT_HD void ldt__log_softmax_row_f32(float *x, int64_t n) {
    float m = ldt__row_max_f32(x, n);
    double l = ldt__log_sum_exp_shifted_f32(x, n, m);
    for (int64_t j = 0; j < n; j++) x[j] = (float)(((double)x[j] - (double)m) - l);
}
LDT_HD void ldt__log_softmax_row_f64(double *x, int64_t n) {
    double m = ldt__row_max_f64(x, n);
    double l = ldt__log_sum_exp_shifted_f64(x, n, m);
    for (int64_t j = 0; j < n; j++) x[j] = (x[j] - m) - l;
}

/* The cross-entropy of a row of n logits against class t (0 <= t < n): -log_softmax(x)_t. */
LDT_HD double ldt__cross_entropy_row_f32(const float *x, int64_t n, int64_t t) {
    float m = ldt__row_max_f32(x, n);
    return ldt__log_sum_exp_shifted_f32(x, n, m) - ((double)x[t] - (double)m);
}
LDT_HD double ldt__cross_entropy_row_f64(const double *x, int64_t n, int64_t t) {
    double m = ldt__row_max_f64(x, n);
    return ldt__log_sum_exp_shifted_f64(x, n, m) - (x[t] - m);
}

/* The norms' sums are taken in LDT__NORM_LANES lanes: lane l adds the terms of j = l, l + L,
 * l + 2L, ... in that order, and the lanes are then joined pairwise (w = L/2, ..., 1: s[l] +=
 * s[l + w] for l < w). A CUDA block takes a row in exactly that order, a thread a lane
 * (kernels/cuda/nn.cu), so the CPU and the GPU give the same bits, and the GPU reads the row
 * coalesced instead of one thread walking it alone. */
#define LDT__NORM_LANES 32
LDT_HD double ldt__norm_lanes_join(double *s) {
    for (int w = LDT__NORM_LANES / 2; w > 0; w >>= 1)
        for (int l = 0; l < w; l++) s[l] = s[l] + s[l + w];
    return s[0];
}

/* Mean (0 when !center: rms_norm) and 1/sqrt(var + eps) of a row of m > 0 values, in double
 * and in two passes, each summed in lanes (above): the second sums squares around the mean,
 * so a row far from 0 (1e4 + small noise) keeps its variance where E[x^2] - E[x]^2 would
 * cancel it away. For rms_norm the "variance" is mean(x^2). LDT__NORM_LANE_SUM: the lanes'
 * partial sums of x (sum) or of (x - mu)^2 (!sum), joined. */
#define LDT__NORM_LANE_SUM(x, m, sum, mu, out)                                                 \
    do {                                                                                       \
        double s_[LDT__NORM_LANES];                                                            \
        for (int l_ = 0; l_ < LDT__NORM_LANES; l_++) s_[l_] = 0.0;                             \
        for (int64_t j_ = 0; j_ < (m); j_++) {                                                 \
            double d_ = (double)(x)[j_] - (mu);                                                \
            s_[j_ % LDT__NORM_LANES] += (sum) ? (double)(x)[j_] : d_ * d_;                     \
        }                                                                                      \
        (out) = ldt__norm_lanes_join(s_);                                                      \
    } while (0)
LDT_HD void ldt__norm_stats_f32(const float *x, int64_t m, int center, double eps, double *mean,
                                double *rstd) {
    double mu = 0.0, v;
    if (center) {
        LDT__NORM_LANE_SUM(x, m, 1, 0.0, mu);
        mu /= (double)m;
    }
    LDT__NORM_LANE_SUM(x, m, 0, mu, v);
    *mean = mu;
    *rstd = 1.0 / sqrt(v / (double)m + eps);
}
LDT_HD void ldt__norm_stats_f64(const double *x, int64_t m, int center, double eps, double *mean,
                                double *rstd) {
    double mu = 0.0, v;
    if (center) {
        LDT__NORM_LANE_SUM(x, m, 1, 0.0, mu);
        mu /= (double)m;
    }
    LDT__NORM_LANE_SUM(x, m, 0, mu, v);
    *mean = mu;
    *rstd = 1.0 / sqrt(v / (double)m + eps);
}

/* The factor kept elements are multiplied by: 1 / (1 - p), or 0 for p >= 1 (all dropped). */
LDT_HD double ldt__dropout_scale(double p) { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }

/* double -> f16/bf16 rounded once: round to odd into f32 first (truncate, then set the last
 * bit if anything was cut off). f32 keeps 13+ more bits than either half type, so the second
 * rounding sees an exact tie only where the double was one, and the result equals rounding the
 * double directly, which (float) and then the half conversion would not always give. */
LDT_HD float ldt__f64_to_f32_round_odd(double d) {
    float f = (float)d;
    if (isnan(d) || isinf(f) || (double)f == d) return f;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f); /* rounded away: step back */
    return ldt__bits_f32(ldt__f32_bits(f) | 1u);
}
LDT_HD uint16_t ldt__f64_to_f16_once(double d) {
    return ldt__f32_to_f16(ldt__f64_to_f32_round_odd(d));
}
LDT_HD uint16_t ldt__f64_to_bf16_once(double d) {
    return ldt__f32_to_bf16(ldt__f64_to_f32_round_odd(d));
}

#endif
