/* evalset: multiple-choice evaluation sets in llm.c's format (docs/model.md, "File formats", "Evaluation set"),
 * as llm.c's HellaSwag and MMLU files come. Little-endian: a header of 256 int32, [0] = 20240522, [1] = 1, [2] = the
 * number of examples, [3] = the longest example's bytes; then each example as a stream of uint16:
 *   65535 (the start), the example's bytes (these fields included), its index, its label (the correct completion),
 *   the number of completions K, then the context (a count and its tokens), then K completions (each a count and its
 *   tokens).
 * The reader checks every field against the file and names the example and field that is wrong; a token past the
 * model's vocabulary and a row (context + completion) longer than the model's context are checked against the model
 * (evalset_check_model), since the file does not say which model it is for. */
#ifndef GPT2GEN_EVALSET_H
#define GPT2GEN_EVALSET_H
#include <stdint.h>
#include "common/err.h"

enum { EVALSET_MAGIC = 20240522, EVALSET_VERSION = 1, EVALSET_START = 65535, EVALSET_MAX_COMPLETIONS = 64 };

typedef struct {
    int index, label, n_completions;
    int ctx_len;                 /* context tokens: tokens[ctx] .. */
    size_t ctx;                  /* offset of the context in EvalSet.tokens */
    size_t comp;                 /* offset of the first completion's tokens; completion j follows j-1 */
    int comp_len[EVALSET_MAX_COMPLETIONS];
} EvalExample;

typedef struct {
    char path[4096];
    int n;                       /* examples */
    EvalExample *ex;
    uint16_t *tokens;            /* every example's context and completion tokens, in file order */
    int longest_row;             /* the most tokens of a context and one of its completions */
    int rows;                    /* completions over all examples */
} EvalSet;

int  evalset_load(EvalSet *s, const char *path, Err *err);
/* Every token below vocab_size and every row at most max_seq_len tokens (model names the model in the message). */
int  evalset_check_model(const EvalSet *s, int vocab_size, int max_seq_len, const char *model, Err *err);
void evalset_free(EvalSet *s);
#endif
