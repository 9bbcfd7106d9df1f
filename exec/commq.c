/* A rank's communication thread and its queue (docs/replay.md): asynchronous collectives
 * run there in program order while the rank's thread computes until their waits. */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "exec/exec_internal.h"

/* ---------------------------------------------------------------------------------------
 * Asynchronous collectives: a start queues the collective for the rank's communication
 * thread; a wait blocks until that thread has finished it in this replay.
 */
static void *comm_main(void *arg) {
    rank_state *rs = arg;
    ldt__commq *q = &rs->q;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        binstr *b;
        uint64_t gen;
        while (q->head == q->tail && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
        if (q->head == q->tail && q->stop) break;
        b = q->items[q->head % q->cap];
        q->head++;
        gen = q->gen;
        pthread_mutex_unlock(&q->mu);
        {
            ldt_status st = b->afn(&b->call);
            if (st != LDT_OK) st = ldt__error_prefix(st, "communication thread of rank %d", rs->rank);
            pthread_mutex_lock(&q->mu);
            b->astatus = st;
            b->done_gen = gen;
            if (st != LDT_OK) snprintf(b->rs->err, sizeof b->rs->err, "%s", ldt_last_error());
            pthread_cond_broadcast(&q->cv);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

ldt_status ldt__w_start(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    ldt__commq *q = &b->rs->q;
    pthread_mutex_lock(&q->mu);
    q->items[q->tail % q->cap] = b;
    q->tail++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return LDT_OK;
}

ldt_status ldt__w_wait(const ldt__kcall *c) {
    binstr *b = BIN_OF(c), *coll = &b->rs->ins[b->rs->prog->ins[b->idx].pair];
    ldt__commq *q = &b->rs->q;
    ldt_status st;
    pthread_mutex_lock(&q->mu);
    while (coll->done_gen != q->gen) pthread_cond_wait(&q->cv, &q->mu);
    st = coll->astatus;
    if (st != LDT_OK) ldt__error(st, "%s", b->rs->err);
    pthread_mutex_unlock(&q->mu);
    return st;
}

ldt_status ldt__commq_start(rank_state *rs, int64_t cap) {
    ldt__commq *q = &rs->q;
    if (!(q->items = calloc((size_t)(cap ? cap : 1), sizeof *q->items)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    q->cap = cap ? cap : 1;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->gen = 0;
    if (pthread_create(&q->thread, NULL, comm_main, rs) != 0)
        LDT_FAIL(LDT_ERR_SYSTEM, "compile: cannot start the communication thread of rank %d", rs->rank);
    q->started = 1;
    return LDT_OK;
}

void ldt__commq_stop(rank_state *rs) {
    ldt__commq *q = &rs->q;
    if (!q->started) return;
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q->items);
    q->started = 0;
}
