/* config_schema: the config's keys, their types, defaults and limits (gen/config.c), shared with their reader
   (gen/config_read.c) and the writer of the resolved config (gen/config_write.c). */
#ifndef GPT2GEN_CONFIG_SCHEMA_H
#define GPT2GEN_CONFIG_SCHEMA_H
#include "gen/config.h"
#include <stddef.h>

typedef enum { VAL_INT, VAL_NUM, VAL_STR, VAL_BOOL, VAL_ENUM } ValueKind;
typedef struct {
    const char *key;
    ValueKind kind;
    size_t off;          /* offset in Config */
    size_t size;         /* for strings: buffer size; for VAL_INT: sizeof the field (int or long) */
    const char *dflt;    /* default as text; NULL: required */
    const char *const *choices;   /* for VAL_ENUM: names, index = value */
    double min;          /* numbers and ints: smallest allowed */
    long long max;       /* ints: largest allowed (at most what the field's type holds) */
} Field;

typedef struct { const char *name; const Field *fields; } Section;
extern const Section SECTIONS[];   /* model, train, data, eval, checkpoint; ends at name NULL */
extern const char *const TOP_KEYS[];     /* every top-level key; ends at NULL */
extern const char *const PRECISIONS[];   /* the names of precision's values (Precision), index = value */
extern const char *const ATTENTIONS[];   /* the names of attention's values (AttentionPath), index = value */
#endif
