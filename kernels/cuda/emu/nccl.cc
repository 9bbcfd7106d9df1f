// The CUDA emulator's NCCL (kernels/cuda/emu/nccl.h): communicators of rank threads in one
// process. A collective is a meeting of every member: each publishes its buffers, all wait,
// each computes its own result (reductions in rank order, in double or 64-bit integers, rounded
// once), all wait again, each writes its result. Sends go to per-pair mailboxes and never
// wait; receives wait for theirs. Every wait has the timeout; a timeout or an abort fails the
// whole communicator, which its members see through ncclCommGetAsyncError.
#include "nccl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "core/half.h"

namespace {

struct shared {
    int n = 0, joined = 0, refs = 0;
    std::mutex mu;
    std::condition_variable cv;
    bool aborted = false;
    uint64_t gen = 0;
    int arrived = 0;
    std::vector<const void *> send; // the current collective's buffers, per rank
    std::map<std::pair<int, int>, std::deque<std::vector<char>>> mail; // (from, to) -> messages
};

int64_t timeout_ms() {
    const char *e = getenv("LDT_EMU_NCCL_TIMEOUT_MS");
    return e && atoll(e) > 0 ? atoll(e) : 60000;
}

std::mutex reg_mu;
std::map<uint64_t, shared *> registry; // unique ids being joined
std::atomic<uint64_t> next_id{1};
const uint64_t MAGIC = 0x6c6474656d756e63ull; // "ldtemunc"

} // namespace

struct ncclComm {
    shared *s;
    int rank;
    ncclResult_t async = ncclSuccess;
};

namespace {

// Waits until every member has arrived; false on abort or timeout (which aborts).
bool meet(ncclComm *c) {
    shared *s = c->s;
    std::unique_lock<std::mutex> lk(s->mu);
    if (s->aborted) return false;
    uint64_t g = s->gen;
    if (++s->arrived == s->n) {
        s->arrived = 0;
        s->gen++;
        s->cv.notify_all();
        return true;
    }
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms());
    while (s->gen == g && !s->aborted)
        if (s->cv.wait_until(lk, until) == std::cv_status::timeout && s->gen == g) {
            s->aborted = true;
            s->cv.notify_all();
        }
    return s->gen != g;
}

void failed(ncclComm *c) {
    if (c->async == ncclSuccess) c->async = ncclRemoteError;
}

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
    }
}

bool is_float(ncclDataType_t t) {
    return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32 || t == ncclFloat64;
}

double load_f(const void *p, ncclDataType_t t, size_t i) {
    switch (t) {
    case ncclFloat16: return ldt__f16_to_f32(((const uint16_t *)p)[i]);
    case ncclBfloat16: return ldt__bf16_to_f32(((const uint16_t *)p)[i]);
    case ncclFloat32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}
void store_f(void *p, ncclDataType_t t, size_t i, double v) {
    switch (t) {
    case ncclFloat16: ((uint16_t *)p)[i] = ldt__f32_to_f16((float)v); break;
    case ncclBfloat16: ((uint16_t *)p)[i] = ldt__f32_to_bf16((float)v); break;
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
    }
}
int64_t load_i(const void *p, ncclDataType_t t, size_t i) {
    switch (t) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclUint32: return ((const uint32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}
void store_i(void *p, ncclDataType_t t, size_t i, int64_t v) {
    switch (t) {
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)(uint32_t)v; break;
    case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
    }
}

enum kind { K_ALL_REDUCE, K_REDUCE, K_REDUCE_SCATTER, K_ALL_GATHER, K_BROADCAST, K_SEND, K_RECV };

struct op {
    kind k;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t t;
    ncclRedOp_t red;
    int root; // reduce, broadcast: the root; send, recv: the peer
    ncclComm *c;
};

// out[i] = op over ranks (in rank order) of in_r[off + i], i < count.
void reduce_into(std::vector<char> &out, const shared *s, const op &o, size_t off) {
    size_t es = type_size(o.t);
    out.resize(o.count * es);
    for (size_t i = 0; i < o.count; i++) {
        if (is_float(o.t)) {
            double a = load_f(s->send[0], o.t, off + i);
            for (int r = 1; r < s->n; r++) {
                double b = load_f(s->send[r], o.t, off + i);
                if (a != a || b != b) a = a != a ? a : b; // NaN wins, as in NCCL's max/min
                else if (o.red == ncclSum || o.red == ncclAvg) a = a + b;
                else if (o.red == ncclProd) a = a * b;
                else if (o.red == ncclMax) a = b > a ? b : a;
                else a = b < a ? b : a;
            }
            if (o.red == ncclAvg) a /= s->n;
            store_f(out.data(), o.t, i, a);
        } else {
            uint64_t a = (uint64_t)load_i(s->send[0], o.t, off + i);
            for (int r = 1; r < s->n; r++) {
                int64_t b = load_i(s->send[r], o.t, off + i);
                a = o.red == ncclSum || o.red == ncclAvg ? a + (uint64_t)b
                    : o.red == ncclProd                  ? a * (uint64_t)b
                    : o.red == ncclMax                   ? ((int64_t)a < b ? (uint64_t)b : a)
                                                         : ((int64_t)a > b ? (uint64_t)b : a);
            }
            if (o.red == ncclAvg) a = (uint64_t)((int64_t)a / s->n);
            store_i(out.data(), o.t, i, (int64_t)a);
        }
    }
}

void run_collective(const op &o) {
    ncclComm *c = o.c;
    shared *s = c->s;
    size_t es = type_size(o.t);
    std::vector<char> res;
    bool write = true;
    {
        std::lock_guard<std::mutex> lk(s->mu);
        s->send[c->rank] = o.send;
    }
    if (!meet(c)) return failed(c);
    switch (o.k) { // every member's buffers are published: compute this member's result
    case K_ALL_REDUCE: reduce_into(res, s, o, 0); break;
    case K_REDUCE:
        write = c->rank == o.root;
        if (write) reduce_into(res, s, o, 0);
        break;
    case K_REDUCE_SCATTER: reduce_into(res, s, o, (size_t)c->rank * o.count); break;
    case K_ALL_GATHER:
        res.resize(o.count * es * (size_t)s->n);
        for (int r = 0; r < s->n; r++)
            if (o.count) memcpy(res.data() + (size_t)r * o.count * es, s->send[r], o.count * es);
        break;
    case K_BROADCAST:
        res.resize(o.count * es);
        if (o.count) memcpy(res.data(), s->send[o.root], o.count * es);
        break;
    default: break;
    }
    if (!meet(c)) return failed(c); // all have read: results may land (in place too)
    if (write && !res.empty()) memcpy(o.recv, res.data(), res.size());
}

void run_send(const op &o) {
    shared *s = o.c->s;
    size_t b = o.count * type_size(o.t);
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->aborted) return failed(o.c);
    s->mail[{o.c->rank, o.root}].emplace_back((const char *)o.send, (const char *)o.send + b);
    s->cv.notify_all();
}

void run_recv(const op &o) {
    shared *s = o.c->s;
    size_t b = o.count * type_size(o.t);
    std::unique_lock<std::mutex> lk(s->mu);
    auto &q = s->mail[{o.root, o.c->rank}];
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms());
    while (q.empty() && !s->aborted)
        if (s->cv.wait_until(lk, until) == std::cv_status::timeout && q.empty()) {
            s->aborted = true;
            s->cv.notify_all();
        }
    if (q.empty()) return failed(o.c);
    if (q.front().size() != b) { // a mismatched pair: NCCL's behaviour is undefined; ours fails
        s->aborted = true;
        s->cv.notify_all();
        return failed(o.c);
    }
    if (b) memcpy(o.recv, q.front().data(), b);
    q.pop_front();
}

void run_ops(void *arg) {
    std::vector<op> &ops = *(std::vector<op> *)arg;
    for (const op &o : ops) // sends first: both sides of an exchange progress
        if (o.k == K_SEND) run_send(o);
    for (const op &o : ops) {
        if (o.k == K_SEND) continue;
        if (o.k == K_RECV) run_recv(o);
        else run_collective(o);
    }
}
void free_ops(void *arg) { delete (std::vector<op> *)arg; }

thread_local int group_depth = 0;
thread_local std::vector<op> *group_ops;
thread_local cudaStream_t group_stream;

ncclResult_t issue(const op &o, cudaStream_t s) {
    if (!o.c) return ncclInvalidArgument;
    bool root = o.c->rank == o.root;
    bool needs_send = o.k != K_RECV && (o.k != K_BROADCAST || root);
    bool needs_recv = o.k != K_SEND && (o.k != K_REDUCE || root);
    if (o.count && ((needs_send && !o.send) || (needs_recv && !o.recv))) return ncclInvalidArgument;
    if ((o.k == K_REDUCE || o.k == K_BROADCAST || o.k == K_SEND || o.k == K_RECV) &&
        (o.root < 0 || o.root >= o.c->s->n))
        return ncclInvalidArgument;
    if (group_depth > 0) {
        if (!group_ops) {
            group_ops = new std::vector<op>();
            group_stream = s;
        }
        group_ops->push_back(o);
        return ncclSuccess;
    }
    std::vector<op> *one = new std::vector<op>(1, o);
    return ldt_emu_enqueue(s, run_ops, one, free_ops) == cudaSuccess ? ncclSuccess
                                                                     : ncclUnhandledCudaError;
}

} // namespace

extern "C" const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    }
    return "unknown result code";
}

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    if (!id) return ncclInvalidArgument;
    uint64_t k = next_id++;
    memset(id, 0, sizeof *id);
    memcpy(id->internal, &MAGIC, 8);
    memcpy(id->internal + 8, &k, 8);
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    uint64_t magic, key;
    shared *s;
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
    *comm = nullptr;
    memcpy(&magic, id.internal, 8);
    memcpy(&key, id.internal + 8, 8);
    if (magic != MAGIC) return ncclInvalidArgument;
    {
        std::lock_guard<std::mutex> lk(reg_mu);
        auto it = registry.find(key);
        if (it == registry.end()) {
            s = new shared();
            s->n = nranks;
            s->send.assign((size_t)nranks, nullptr);
            registry[key] = s;
        } else {
            s = it->second;
        }
        if (s->n != nranks) return ncclInvalidUsage;
        std::lock_guard<std::mutex> sl(s->mu);
        s->refs++;
        if (++s->joined == nranks) registry.erase(key);
    }
    ncclComm *c = new ncclComm();
    c->s = s;
    c->rank = rank;
    { // every member joins before any returns, as ncclCommInitRank blocks
        std::unique_lock<std::mutex> lk(s->mu);
        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms());
        s->cv.notify_all();
        while (s->joined < s->n && !s->aborted)
            if (s->cv.wait_until(lk, until) == std::cv_status::timeout && s->joined < s->n)
                s->aborted = true;
        if (s->aborted) {
            lk.unlock();
            ncclCommDestroy(c);
            return ncclSystemError;
        }
    }
    *comm = c;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommDestroy(ncclComm_t c) {
    if (!c) return ncclInvalidArgument;
    shared *s = c->s;
    bool last;
    {
        std::lock_guard<std::mutex> lk(reg_mu); // a member still joining may look the id up
        std::lock_guard<std::mutex> sl(s->mu);
        last = --s->refs == 0;
        if (last)
            for (auto it = registry.begin(); it != registry.end(); ++it)
                if (it->second == s) {
                    registry.erase(it);
                    break;
                }
    }
    if (last) delete s;
    delete c;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommAbort(ncclComm_t c) {
    if (!c) return ncclInvalidArgument;
    {
        std::lock_guard<std::mutex> lk(c->s->mu);
        c->s->aborted = true;
        c->s->cv.notify_all();
    }
    return ncclCommDestroy(c);
}

extern "C" ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *err) {
    if (!c || !err) return ncclInvalidArgument;
    std::lock_guard<std::mutex> lk(c->s->mu);
    *err = c->async != ncclSuccess ? c->async : c->s->aborted ? ncclRemoteError : ncclSuccess;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommCount(ncclComm_t c, int *count) {
    if (!c || !count) return ncclInvalidArgument;
    *count = c->s->n;
    return ncclSuccess;
}
extern "C" ncclResult_t ncclCommUserRank(ncclComm_t c, int *rank) {
    if (!c || !rank) return ncclInvalidArgument;
    *rank = c->rank;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclGroupStart(void) {
    group_depth++;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclGroupEnd(void) {
    if (group_depth <= 0) return ncclInvalidUsage;
    if (--group_depth > 0 || !group_ops) return ncclSuccess;
    std::vector<op> *ops = group_ops;
    group_ops = nullptr;
    return ldt_emu_enqueue(group_stream, run_ops, ops, free_ops) == cudaSuccess ? ncclSuccess
                                                                               : ncclUnhandledCudaError;
}

extern "C" ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                                      ncclRedOp_t red, ncclComm_t c, cudaStream_t s) {
    return issue(op{K_ALL_REDUCE, send, recv, count, t, red, 0, c}, s);
}
extern "C" ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                                   ncclRedOp_t red, int root, ncclComm_t c, cudaStream_t s) {
    return issue(op{K_REDUCE, send, recv, count, t, red, root, c}, s);
}
extern "C" ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                                          ncclDataType_t t, ncclRedOp_t red, ncclComm_t c,
                                          cudaStream_t s) {
    return issue(op{K_REDUCE_SCATTER, send, recv, count, t, red, 0, c}, s);
}
extern "C" ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                                      ncclComm_t c, cudaStream_t s) {
    return issue(op{K_ALL_GATHER, send, recv, count, t, ncclSum, 0, c}, s);
}
extern "C" ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t,
                                      int root, ncclComm_t c, cudaStream_t s) {
    return issue(op{K_BROADCAST, send, recv, count, t, ncclSum, root, c}, s);
}
extern "C" ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer,
                                 ncclComm_t c, cudaStream_t s) {
    return issue(op{K_SEND, send, nullptr, count, t, ncclSum, peer, c}, s);
}
extern "C" ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                                 cudaStream_t s) {
    return issue(op{K_RECV, nullptr, recv, count, t, ncclSum, peer, c}, s);
}
