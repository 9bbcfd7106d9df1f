// Elementwise CUDA kernels: broadcasting binary ops and where, scalar ops, unary math, casts.
// The formulas are kernels/common's (math.h, cast.h) and kernels/cpu/elementwise.c's rules:
// halves compute in f32 and round once, integers wrap, casts round once and saturate.
#include <math.h>
#include <stdint.h>
#include <type_traits>

#include "kernels/common/cast.h"
#include "kernels/common/elementwise_plan.h"
#include "kernels/common/math.h"
#include "kernels/cuda/common.cuh"

// Broadcasting: the plan of kernels/common/elementwise_plan.h, walked per element.
// Input offsets of output element i.
__device__ __forceinline__ void bc_offsets(const ldt__bc_plan &p, int nin, int64_t i, int64_t off[3]) {
    off[0] = off[1] = off[2] = 0;
    for (int d = p.nd - 1; d >= 0; d--) {
        int64_t q = i / p.dims[d], idx = i - q * p.dims[d];
        i = q;
        for (int k = 0; k < nin; k++) off[k] += idx * p.st[k][d];
    }
}

// ---- kernels ---------------------------------------------------------------------------
enum { B_ADD, B_SUB, B_MUL, B_DIV, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE };

template <typename C> __device__ __forceinline__ uint8_t cmp_op(int op, C x, C y) {
    switch (op) {
    case B_EQ: return x == y;
    case B_NE: return x != y;
    case B_LT: return x < y;
    case B_LE: return x <= y;
    case B_GT: return x > y;
    default: return x >= y;
    }
}

// Arithmetic in the compute type: IEEE for floats; modulo 2^bits for integers (computed in
// the unsigned type), truncating division with x / -1 a wrapping negation, x / 0 flagged.
template <typename D>
__device__ __forceinline__ typename ldt__el<D>::C arith_op(int op, typename ldt__el<D>::C x,
                                                           typename ldt__el<D>::C y, int *err) {
    typedef typename ldt__el<D>::C C;
    if constexpr (std::is_floating_point<C>::value) {
        switch (op) {
        case B_ADD: return x + y;
        case B_SUB: return x - y;
        case B_MUL: return x * y;
        default: return x / y;
        }
    } else if constexpr (std::is_same<D, ldt__bool_t>::value) {
        return 0; // refused by the launcher
    } else {
        typedef typename ldt__el<D>::U U;
        switch (op) {
        case B_ADD: return (C)((U)x + (U)y);
        case B_SUB: return (C)((U)x - (U)y);
        case B_MUL: return (C)((U)x * (U)y);
        default:
            if (y == 0) {
                ldt__cuda_derr(err, LDT__CUDA_DERR_INT_DIV_ZERO);
                return 0;
            }
            if constexpr (std::is_signed<C>::value)
                if (y == (C)-1) return (C)(0 - (U)x);
            return (C)(x / y);
        }
    }
}

template <typename D>
__global__ void k_binary(int op, ldt__bc_plan p, int64_t n, const typename ldt__el<D>::S *a,
                         const typename ldt__el<D>::S *b, void *o, int *err) {
    typedef ldt__el<D> E;
    LDT__CUDA_FOR(i, n) {
        int64_t off[3];
        bc_offsets(p, 2, i, off);
        typename E::C x = E::load(a[off[0]]), y = E::load(b[off[1]]);
        if (op >= B_EQ)
            ((uint8_t *)o)[i] = cmp_op(op, x, y);
        else
            ((typename E::S *)o)[i] = E::store(arith_op<D>(op, x, y, err));
    }
}

// where(cond, a, b) moves elements: one kernel per element size serves every dtype.
template <typename T>
__global__ void k_where(ldt__bc_plan p, int64_t n, const uint8_t *cond, const T *a, const T *b, T *o) {
    LDT__CUDA_FOR(i, n) {
        int64_t off[3];
        bc_offsets(p, 3, i, off);
        o[i] = cond[off[0]] ? a[off[1]] : b[off[2]];
    }
}

enum { S_ADD, S_SUB, S_RSUB, S_MUL, S_DIV, S_RDIV, S_POW };

__device__ __forceinline__ float pow_of(float x, float y) { return ldt__pow_f32(x, y); }
__device__ __forceinline__ double pow_of(double x, double y) { return ldt__pow_f64(x, y); }

// o[i] = x[i] op s. Floats convert s to the compute type first (f32 for halves); integers
// take s as int64 (checked integral on the host), wrap, and divide in int64 before wrapping.
template <typename D>
__global__ void k_scalar(int op, int64_t n, const typename ldt__el<D>::S *xp,
                         typename ldt__el<D>::S *o, double s_, int *err) {
    typedef ldt__el<D> E;
    typedef typename E::C C;
    LDT__CUDA_FOR(i, n) {
        C x = E::load(xp[i]);
        if constexpr (std::is_floating_point<C>::value) {
            const C s = (C)s_;
            C r;
            switch (op) {
            case S_ADD: r = x + s; break;
            case S_SUB: r = x - s; break;
            case S_RSUB: r = s - x; break;
            case S_MUL: r = x * s; break;
            case S_DIV: r = x / s; break;
            case S_RDIV: r = s / x; break;
            default: r = pow_of(x, s); break;
            }
            o[i] = E::store(r);
        } else if constexpr (!std::is_same<D, ldt__bool_t>::value) {
            typedef typename E::U U;
            const int64_t sv = (int64_t)s_;
            const U s = (U)(uint64_t)sv;
            int64_t q = 0;
            switch (op) {
            case S_ADD: o[i] = (C)((U)x + s); break;
            case S_SUB: o[i] = (C)((U)x - s); break;
            case S_RSUB: o[i] = (C)(s - (U)x); break;
            case S_MUL: o[i] = (C)((U)x * s); break;
            default:
                if (op == S_DIV) {
                    q = ldt__idiv64((int64_t)x, sv); // sv != 0: checked on the host
                } else if (x == 0) {
                    ldt__cuda_derr(err, LDT__CUDA_DERR_INT_DIV_ZERO);
                } else {
                    q = ldt__idiv64(sv, (int64_t)x);
                }
                if constexpr (std::is_same<C, int32_t>::value)
                    o[i] = ldt__cast_wrap_i32(q);
                else
                    o[i] = (C)q; // i64 as is, u8 modulo 256
                break;
            }
        }
    }
}

enum { U_NEG, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_TANH, U_RELU, U_GELU, U_SILU };

// form: gelu's attrs.i[0] (0 erf, 1 tanh, 2 the erf form's derivative).
__device__ __forceinline__ float unary_of(int op, int form, float x) {
    switch (op) {
    case U_NEG: return -x;
    case U_EXP: return ldt__exp_f32(x);
    case U_LOG: return ldt__log_f32(x);
    case U_SQRT: return ldt__sqrt_f32(x);
    case U_RSQRT: return ldt__rsqrt_f32(x);
    case U_TANH: return ldt__tanh_f32(x);
    case U_RELU: return ldt__relu_f32(x);
    case U_GELU:
        return form == 1   ? ldt__gelu_tanh_f32(x)
               : form == 2 ? ldt__gelu_erf_grad_f32(x)
                           : ldt__gelu_erf_f32(x);
    default: return ldt__silu_f32(x);
    }
}
__device__ __forceinline__ double unary_of(int op, int form, double x) {
    switch (op) {
    case U_NEG: return -x;
    case U_EXP: return ldt__exp_f64(x);
    case U_LOG: return ldt__log_f64(x);
    case U_SQRT: return ldt__sqrt_f64(x);
    case U_RSQRT: return ldt__rsqrt_f64(x);
    case U_TANH: return ldt__tanh_f64(x);
    case U_RELU: return ldt__relu_f64(x);
    case U_GELU:
        return form == 1   ? ldt__gelu_tanh_f64(x)
               : form == 2 ? ldt__gelu_erf_grad_f64(x)
                           : ldt__gelu_erf_f64(x);
    default: return ldt__silu_f64(x);
    }
}

template <typename D>
__global__ void k_unary(int op, int form, int64_t n, const typename ldt__el<D>::S *xp,
                        typename ldt__el<D>::S *o) {
    typedef ldt__el<D> E;
    typedef typename E::C C;
    LDT__CUDA_FOR(i, n) {
        C x = E::load(xp[i]);
        if constexpr (std::is_floating_point<C>::value) {
            o[i] = E::store(unary_of(op, form, x));
        } else if constexpr (!std::is_same<D, ldt__bool_t>::value) {
            typedef typename E::U U;
            // integer neg wraps (-INT_MIN = INT_MIN, -u8 is 256 - x); relu of u8 is x
            if (op == U_NEG)
                o[i] = (C)(0 - (U)x);
            else
                o[i] = std::is_signed<C>::value && x < 0 ? (C)0 : x;
        }
    }
}

// Casts through one of two wide forms, as on the CPU: floats load exactly into double,
// integers and bool into int64; then one store per destination type.
__global__ void k_cast(const void *src, int from, void *dst, int to, int64_t n) {
    LDT__CUDA_FOR(i, n) {
        if (from == LDT_F32 || from == LDT_F64 || from == LDT_F16 || from == LDT_BF16) {
            double d = from == LDT_F32   ? (double)((const float *)src)[i]
                       : from == LDT_F64 ? ((const double *)src)[i]
                       : from == LDT_F16 ? (double)ldt__f16_to_f32(((const uint16_t *)src)[i])
                                         : (double)ldt__bf16_to_f32(((const uint16_t *)src)[i]);
            switch (to) {
            case LDT_F32: ((float *)dst)[i] = (float)d; break;
            case LDT_F64: ((double *)dst)[i] = d; break;
            case LDT_F16: ((uint16_t *)dst)[i] = ldt__f32_to_f16(ldt__cast_f64_to_f32_odd(d)); break;
            case LDT_BF16: ((uint16_t *)dst)[i] = ldt__f32_to_bf16(ldt__cast_f64_to_f32_odd(d)); break;
            case LDT_I32: ((int32_t *)dst)[i] = ldt__cast_sat_i32(d); break;
            case LDT_I64: ((int64_t *)dst)[i] = ldt__cast_sat_i64(d); break;
            case LDT_U8: ((uint8_t *)dst)[i] = ldt__cast_sat_u8(d); break;
            default: ((uint8_t *)dst)[i] = d != 0.0; break; // NaN -> true
            }
        } else {
            int64_t v = from == LDT_I32   ? (int64_t)((const int32_t *)src)[i]
                        : from == LDT_I64 ? ((const int64_t *)src)[i]
                        : from == LDT_U8  ? (int64_t)((const uint8_t *)src)[i]
                                          : (int64_t)(((const uint8_t *)src)[i] != 0);
            switch (to) {
            case LDT_F32: ((float *)dst)[i] = (float)v; break;
            case LDT_F64: ((double *)dst)[i] = (double)v; break;
            case LDT_F16: ((uint16_t *)dst)[i] = ldt__f32_to_f16(ldt__cast_i64_to_f32_odd(v)); break;
            case LDT_BF16: ((uint16_t *)dst)[i] = ldt__f32_to_bf16(ldt__cast_i64_to_f32_odd(v)); break;
            case LDT_I32: ((int32_t *)dst)[i] = ldt__cast_wrap_i32(v); break;
            case LDT_I64: ((int64_t *)dst)[i] = v; break;
            case LDT_U8: ((uint8_t *)dst)[i] = (uint8_t)v; break; // mod 256
            default: ((uint8_t *)dst)[i] = v != 0; break;
            }
        }
    }
}

// ---- launchers -------------------------------------------------------------------------
#define M_(t) (1u << (t))
static const unsigned ARITH = M_(LDT_F32) | M_(LDT_F64) | M_(LDT_F16) | M_(LDT_BF16) |
                              M_(LDT_I32) | M_(LDT_I64) | M_(LDT_U8);
static const unsigned CMP = ARITH | M_(LDT_BOOL);
static const unsigned FLOATS = M_(LDT_F32) | M_(LDT_F64) | M_(LDT_F16) | M_(LDT_BF16);
#undef M_

static const char *op_name(int op) { return ldt__builtin_op_name(op); }

struct launch_binary {
    template <typename D>
    static void run(int op, const ldt__bc_plan &p, int64_t n, const void *a, const void *b, void *o,
                    const ldt__cuda_env *env) {
        typedef typename ldt__el<D>::S S;
        LDT__CUDA_LAUNCH(k_binary<D>, ldt__cuda_blocks(n), LDT__CUDA_THREADS, 0, LDT__CUDA_STREAM(env))(
            op, p, n, (const S *)a, (const S *)b, o, env ? env->err : NULL);
    }
};

extern "C" ldt_status ldt__cuda_k_binary(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *op = op_name(c->op);
    static const char *const names2[] = {"a", "b"}, *const names3[] = {"cond", "a", "b"};
    int is_where = c->op == LDT_OP_WHERE, is_cmp = c->op >= LDT_OP_EQ && c->op <= LDT_OP_GE;
    int nin = is_where ? 3 : 2;
    ldt__bc_plan plan;
    int64_t n;
    LDT_CHECK(ldt__ew_check_binary(c, op));
    const ldt__operand *a = &c->in[nin - 2], *b = &c->in[nin - 1];
    if (!is_where && !(((is_cmp ? CMP : ARITH) >> a->dtype) & 1u))
        return ldt__cuda_fail_dtype(op, a->dtype, is_cmp ? CMP : ARITH);
    LDT_CHECK(ldt__bc_make(op, &c->out.shape, nin, c->in, is_where ? names3 : names2, &plan));
    LDT_CHECK(ldt_shape_numel(&c->out.shape, &n));
    if (n == 0) return LDT_OK;
    if (is_where) {
        unsigned g = ldt__cuda_blocks(n);
        cudaStream_t s = LDT__CUDA_STREAM(env);
        const uint8_t *cd = (const uint8_t *)c->in[0].data;
        switch (ldt_dtype_size(a->dtype)) {
        case 1:
            LDT__CUDA_LAUNCH(k_where, g, LDT__CUDA_THREADS, 0, s)(plan, n, cd, (const uint8_t *)a->data,
                                                    (const uint8_t *)b->data, (uint8_t *)c->out.data);
            break;
        case 2:
            LDT__CUDA_LAUNCH(k_where, g, LDT__CUDA_THREADS, 0, s)(plan, n, cd, (const uint16_t *)a->data,
                                                    (const uint16_t *)b->data, (uint16_t *)c->out.data);
            break;
        case 4:
            LDT__CUDA_LAUNCH(k_where, g, LDT__CUDA_THREADS, 0, s)(plan, n, cd, (const uint32_t *)a->data,
                                                    (const uint32_t *)b->data, (uint32_t *)c->out.data);
            break;
        default:
            LDT__CUDA_LAUNCH(k_where, g, LDT__CUDA_THREADS, 0, s)(plan, n, cd, (const uint64_t *)a->data,
                                                    (const uint64_t *)b->data, (uint64_t *)c->out.data);
            break;
        }
    } else {
        LDT__CUDA_DISPATCH(a->dtype, launch_binary, c->op - LDT_OP_ADD, plan, n, a->data, b->data,
                           c->out.data, env);
    }
    LDT__CUDA_LAUNCHED(op);
    return LDT_OK;
}

struct launch_scalar {
    template <typename D>
    static void run(int op, int64_t n, const void *x, void *o, double s, const ldt__cuda_env *env) {
        typedef typename ldt__el<D>::S S;
        LDT__CUDA_LAUNCH(k_scalar<D>, ldt__cuda_blocks(n), LDT__CUDA_THREADS, 0, LDT__CUDA_STREAM(env))(
            op, n, (const S *)x, (S *)o, s, env ? env->err : NULL);
    }
};

extern "C" ldt_status ldt__cuda_k_scalar(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *op = op_name(c->op);
    int64_t n;
    double s = 0; /* set by ldt__ew_check_scalar */
    LDT_CHECK(ldt__ew_check_scalar(c, op, &s));
    const ldt__operand *x = &c->in[0];
    unsigned mask = c->op == LDT_OP_POW_SCALAR ? FLOATS : ARITH;
    if (!((mask >> x->dtype) & 1u)) return ldt__cuda_fail_dtype(op, x->dtype, mask);
    LDT_CHECK(ldt__ew_check_scalar_value(c, op, s));
    LDT_CHECK(ldt_shape_numel(&x->shape, &n));
    if (n == 0) return LDT_OK;
    LDT__CUDA_DISPATCH(x->dtype, launch_scalar, c->op - LDT_OP_ADD_SCALAR, n, x->data, c->out.data,
                       s, env);
    LDT__CUDA_LAUNCHED(op);
    return LDT_OK;
}

struct launch_unary {
    template <typename D>
    static void run(int op, int form, int64_t n, const void *x, void *o, const ldt__cuda_env *env) {
        typedef typename ldt__el<D>::S S;
        LDT__CUDA_LAUNCH(k_unary<D>, ldt__cuda_blocks(n), LDT__CUDA_THREADS, 0, LDT__CUDA_STREAM(env))(
            op, form, n, (const S *)x, (S *)o);
    }
};

extern "C" ldt_status ldt__cuda_k_unary(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *op = op_name(c->op);
    int64_t n;
    LDT_CHECK(ldt__ew_check_unary(c, op, &n));
    const ldt__operand *x = &c->in[0];
    if (c->op == LDT_OP_CAST) {
        if (n == 0) return LDT_OK;
        if (x->dtype == c->out.dtype && x->dtype != LDT_BOOL) { // bool still maps bytes to 0/1
            if (x->data != c->out.data)
                LDT__CUDA_CALL(op, cudaMemcpyAsync(c->out.data, x->data,
                                                   (size_t)n * ldt_dtype_size(x->dtype),
                                                   cudaMemcpyDeviceToDevice, LDT__CUDA_STREAM(env)));
            return LDT_OK;
        }
        LDT__CUDA_LAUNCH(k_cast, ldt__cuda_blocks(n), LDT__CUDA_THREADS, 0, LDT__CUDA_STREAM(env))(
            x->data, (int)x->dtype, c->out.data, (int)c->out.dtype, n);
        LDT__CUDA_LAUNCHED(op);
        return LDT_OK;
    }
    int form = 0; /* gelu: 0 erf, 1 tanh, 2 the erf form's derivative */
    LDT_CHECK(ldt__ew_check_unary_math(c, op, &form));
    unsigned mask = c->op == LDT_OP_NEG || c->op == LDT_OP_RELU ? ARITH : FLOATS;
    if (!((mask >> x->dtype) & 1u)) return ldt__cuda_fail_dtype(op, x->dtype, mask);
    if (n == 0) return LDT_OK;
    LDT__CUDA_DISPATCH(x->dtype, launch_unary, c->op - LDT_OP_NEG, form, n, x->data, c->out.data,
                       env);
    LDT__CUDA_LAUNCHED(op);
    return LDT_OK;
}
