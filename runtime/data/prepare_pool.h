/* prepare_pool: `gpt2gen prepare`'s work in chunks (runtime/data/prepare.c): documents' text packed into chunks of
   about PREPARE_CHUNK_BYTES, and the ring of chunk slots that worker threads encode in any order, for prepare.c to
   write out in the order they were filled. Not an interface for anyone else. */
#ifndef GPT2GEN_PREPARE_POOL_H
#define GPT2GEN_PREPARE_POOL_H
#include "runtime/data/tokenizer.h"
#include "common/err.h"
#include <pthread.h>
#include <stddef.h>

/* Text of one document, or of a part of one, in a chunk. */
typedef struct {
    size_t off, len;
    size_t tok_end;          /* the chunk's ids up to the end of this one's, once encoded */
    int    input;            /* which input it came from (for the per-input counts) */
    unsigned char val;       /* its split */
    unsigned char starts;    /* the document starts here: the end-of-text token first */
} PrepareSeg;

enum { PREPARE_SLOT_FREE, PREPARE_SLOT_FILLED, PREPARE_SLOT_DONE };

/* A piece of work: documents' text, their segments and, once encoded, their ids. */
typedef struct {
    char       *text;
    size_t      len, cap;
    PrepareSeg *segs;
    int         nseg, segcap;
    TokenVec    ids;
    int         state;     /* PREPARE_SLOT_* */
    int         failed;
    Err         err;
} PrepareChunk;

/* The ring of chunk slots and the threads that encode them. */
typedef struct {
    const Tokenizer *tok;
    PrepareChunk    *slots;
    int              nslots, nthreads, stop, started;
    long             filled, taken, written;   /* chunks handed to the workers, taken by them, written out */
    pthread_t       *threads;
    pthread_mutex_t  mu;
    pthread_cond_t   work, done;
} PreparePool;

/* s (n bytes) added to c's text */
void prepare_chunk_append(PrepareChunk *c, const char *s, size_t n);
/* a document's text (or a part of one) in c */
void prepare_chunk_add_seg(PrepareChunk *c, PrepareSeg s);
/* c's documents encoded into c->ids, each segment's end in tok_end; on an error c->failed and c->err */
void prepare_chunk_encode(const Tokenizer *tok, PrepareChunk *c);
/* threads 1: no workers, the reading thread encodes each chunk as it is filled. */
int  prepare_pool_start(PreparePool *p, const Tokenizer *tok, int threads, Err *err);
/* the workers stopped and joined, the slots freed */
void prepare_pool_stop(PreparePool *p);
#endif
