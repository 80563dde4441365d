/* prepare_pool: chunks of documents' text and the threads that encode them (see prepare_pool.h). */
#include "runtime/data/prepare_pool.h"
#include "runtime/data/prepare.h"
#include "common/files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void prepare_chunk_append(PrepareChunk *c, const char *s, size_t n) {
    if (c->len + n > c->cap) {
        while (c->cap < c->len + n) c->cap = c->cap ? c->cap * 2 : PREPARE_CHUNK_BYTES + 4096;
        c->text = realloc(c->text, c->cap);
        if (!c->text) { fprintf(stderr, "out of host memory for %zu bytes of text\n", c->cap); abort(); }
    }
    memcpy(c->text + c->len, s, n);
    c->len += n;
}

void prepare_chunk_add_seg(PrepareChunk *c, PrepareSeg s) {
    if (c->nseg == c->segcap) {
        c->segcap = c->segcap ? c->segcap * 2 : 256;
        c->segs = realloc(c->segs, (size_t)c->segcap * sizeof *c->segs);
        if (!c->segs) { fprintf(stderr, "out of host memory for %d documents\n", c->segcap); abort(); }
    }
    c->segs[c->nseg++] = s;
}

void prepare_chunk_encode(const Tokenizer *tok, PrepareChunk *c) {
    c->ids.n = 0;
    for (int i = 0; i < c->nseg && !c->failed; i++) {
        PrepareSeg *s = &c->segs[i];
        if (s->starts) tokvec_push(&c->ids, tok->eot);
        if (tokenizer_encode(tok, c->text + s->off, s->len, &c->ids, &c->err)) c->failed = 1;
        s->tok_end = c->ids.n;
    }
}

static void *worker(void *arg) {
    PreparePool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->taken == p->filled) pthread_cond_wait(&p->work, &p->mu);
        if (p->stop) break;
        PrepareChunk *c = &p->slots[p->taken++ % p->nslots];
        pthread_mutex_unlock(&p->mu);
        prepare_chunk_encode(p->tok, c);
        pthread_mutex_lock(&p->mu);
        c->state = PREPARE_SLOT_DONE;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int prepare_pool_start(PreparePool *p, const Tokenizer *tok, int threads, Err *err) {
    *p = (PreparePool){.tok = tok, .nthreads = threads > 1 ? threads : 0};
    p->nslots = p->nthreads ? 2 * p->nthreads + 2 : 1;
    p->slots = xcalloc((size_t)p->nslots, sizeof *p->slots);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = xcalloc((size_t)p->nthreads + 1, sizeof *p->threads);
    for (; p->started < p->nthreads; p->started++)
        if (pthread_create(&p->threads[p->started], NULL, worker, p))
            return err_set(err, "cannot start encoding thread %d of %d", p->started + 1, p->nthreads);
    return 0;
}

void prepare_pool_stop(PreparePool *p) {
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    for (int i = 0; i < p->nslots; i++) {
        free(p->slots[i].text); free(p->slots[i].segs); tokvec_free(&p->slots[i].ids);
    }
    free(p->slots);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
}
