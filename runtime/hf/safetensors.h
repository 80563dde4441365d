/* safetensors: Hugging Face's tensor file (docs/model.md, "Hugging Face"), read and written.
 *
 * Layout: an 8-byte little-endian header length N; N bytes of JSON,
 *   {"__metadata__": {"format": "pt"}, "NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...}
 * padded with spaces so that the data starts at a multiple of 8; then the tensors' bytes, little-endian,
 * row-major, BEGIN and END counted from the start of the data.
 *
 * The reader trusts nothing in the file: a header longer than the file, bad JSON, a duplicate name, an unknown
 * dtype, a shape whose elements do not fill its bytes, offsets outside the data or overlapping another tensor's
 * are each one message naming the file and the tensor. The writer writes a temporary name, then renames it. */
#ifndef GPT2GEN_SAFETENSORS_H
#define GPT2GEN_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "common/files.h"

/* The number formats gpt2gen reads and writes; a tensor of another known dtype (I64, F64, BOOL, ...) is
   validated but cannot be read as floats. */
typedef enum { ST_F32 = 0, ST_F16, ST_BF16, ST_OTHER } StDtype;
enum { ST_MAX_DIMS = 8 };
#define ST_MAX_HEADER (100u << 20)   /* the safetensors library's own limit on N */

typedef struct {
    char *name;
    char dtype[12];          /* as the file spells it */
    StDtype kind;
    int elem_size;           /* bytes per element */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t count;          /* elements: the product of the shape */
    uint64_t begin, end;     /* bytes, from the start of the data */
} StTensor;

typedef struct {
    char path[4096];
    int fd;
    uint64_t data_start;     /* 8 + N */
    uint64_t data_len;       /* the file's bytes after the header */
    int n;
    StTensor *t;             /* in the header's order */
} StFile;

/* Opens path and validates its whole header against the file. */
int  st_open(StFile *f, const char *path, Err *err);
/* The tensor called name, or NULL. */
const StTensor *st_find(const StFile *f, const char *name);
/* Reads tensor t (F32, F16 or BF16) into out as t->count fp32 values; another dtype is an error naming it. */
int  st_read_f32(const StFile *f, const StTensor *t, float *out, Err *err);
void st_close(StFile *f);

/* Writing: the tensors are declared first (the header holds every one's offsets), then their data is given in
   that order, as fp32 values converted to the declared dtype (F32, F16 or BF16; 16-bit rounds to nearest even). */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
} StSpec;

typedef struct {
    AtomicFile af;
    StDtype dtype;
    int n, next;             /* tensors declared, and the next one to write */
    uint64_t *count;         /* elements of each */
    uint16_t *buf;
} StWriter;

/* Creates path's temporary file and writes the header of n tensors of dtype. */
int  st_write_begin(StWriter *w, const char *path, const StSpec *specs, int n, StDtype dtype, Err *err);
/* The next tensor's data: count must be the declared shape's element count. */
int  st_write_tensor(StWriter *w, const float *data, uint64_t count, Err *err);
/* Every tensor written: flushes and renames into place. */
int  st_write_end(StWriter *w, Err *err);
/* Removes the temporary file (after an error). */
void st_write_abort(StWriter *w);

/* "F32", "F16", "BF16" */
const char *st_dtype_name(StDtype d);
#endif
