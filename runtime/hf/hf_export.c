/* hf_export: our model checkpoint as a Hugging Face GPT2LMHeadModel folder (hf.h): config.json, the tokenizer's
   files where it is GPT-2's, and model.safetensors last, each file written to a temporary name and renamed. */
#include "runtime/hf/hf.h"
#include "common/files.h"
#include "runtime/checkpoint.h"
#include "runtime/data/tokenizer.h"
#include "runtime/hf/bpe_files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tokenizer, loaded into tok (1), or why there is none in r->note (0); -1 with err for a --tokenizer that is
   missing or bad. Nothing is written yet. */
static int load_tokenizer(const HfExport *x, const GPT2Shape *s, Tokenizer *tok, HfReport *r, Err *err) {
    if (!x->tokenizer) { snprintf(r->note, sizeof r->note, "no tokenizer given"); return 0; }
    const char *why = file_missing_why(x->tokenizer);
    if (*why) {
        if (x->tokenizer_given) return err_set(err, "%s: %s (--tokenizer)", x->tokenizer, why);
        snprintf(r->note, sizeof r->note, "no tokenizer at %s (%s)", err_show(x->tokenizer), why);
        return 0;
    }
    Err terr = {{0}};
    if (tokenizer_load_any(tok, x->tokenizer, &terr)) {
        if (x->tokenizer_given) { *err = terr; return -1; }
        snprintf(r->note, sizeof r->note, "%.500s", terr.msg);
        return 0;
    }
    if (s->vocab_size != HF_GPT2_VOCAB) {
        snprintf(r->note, sizeof r->note, "the model's vocab_size is %d, not GPT-2's %d", s->vocab_size, HF_GPT2_VOCAB);
        tokenizer_free(tok);
        return 0;
    }
    return 1;
}

static int write_model(const char *path, const GPT2Shape *s, const float *params, StDtype dtype, HfReport *r, Err *err) {
    int n = hf_tensor_count(s);
    HfTensor *t = xmalloc((size_t)n * sizeof *t);
    StSpec *spec = xcalloc((size_t)n, sizeof *spec);
    char (*names)[112] = xmalloc((size_t)n * sizeof *names);
    hf_tensors(s, t);
    size_t most = 0;
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "transformer.%s", t[i].name);
        spec[i].name = names[i];
        spec[i].ndim = t[i].ndim;
        spec[i].shape[0] = t[i].shape[0];
        spec[i].shape[1] = t[i].shape[1];
        size_t e = hf_tensor_elems(&t[i]);
        if (e > most) most = e;
        r->params += e;
    }
    float *buf = xmalloc(most * sizeof *buf);
    StWriter w;
    int rc = st_write_begin(&w, path, spec, n, dtype, err);
    for (int i = 0; i < n && !rc; i++) {
        hf_gather(s, &t[i], params, buf);
        rc = st_write_tensor(&w, buf, hf_tensor_elems(&t[i]), err);
    }
    if (!rc) rc = st_write_end(&w, err);
    else st_write_abort(&w);
    free(buf); free(names); free(spec); free(t);
    return rc;
}

int hf_export(const HfExport *x, HfReport *r, Err *err) {
    memset(r, 0, sizeof *r);
    GPT2Shape s;
    int bf16;
    if (checkpoint_read_header(x->checkpoint, &s, &bf16, err)) return -1;
    r->shape = s;
    char model[4200], config[4200];
    if ((size_t)snprintf(model, sizeof model, "%s/model.safetensors", x->dir) >= 4096)
        return err_set(err, "%s: path too long", err_show(x->dir));
    snprintf(config, sizeof config, "%s/config.json", x->dir);
    if (file_exists(model) && !x->force)
        return err_set(err, "%s exists: give --force to replace it (or export into another folder)", model);
    Tokenizer tok;
    int have_tok = load_tokenizer(x, &s, &tok, r, err);
    if (have_tok < 0) return -1;
    size_t sz[NUM_PARAM_TENSORS], np = gpt2_param_sizes(&s, sz, NULL);
    float *params = xmalloc(np * sizeof *params);
    int rc = checkpoint_load(x->checkpoint, NULL, params, err);
    if (!rc) {   /* the vocabulary's padding rows are not exported: say so when they hold anything */
        for (size_t i = (size_t)s.vocab_size * s.n_embd; i < (size_t)s.padded_vocab_size * s.n_embd; i++)
            r->dropped_padding += params[i] != 0;
    }
    /* written only once everything is read: the config, the tokenizer's files, and the weights last */
    if (!rc) rc = mkdir_p(x->dir, err);
    if (!rc) rc = hf_write_config(config, &s, x->dtype, err);
    if (!rc && have_tok) {
        char note[sizeof r->note - 64];
        int t = bpe_write_files(&tok, x->dir, s.max_seq_len, note, sizeof note, err);
        if (t < 0) rc = -1;
        else if (t == 0) r->wrote_tokenizer = 1;
        else snprintf(r->note, sizeof r->note, "%s: %s", err_show(x->tokenizer), note);
    }
    if (!rc) rc = write_model(model, &s, params, x->dtype, r, err);
    if (have_tok) tokenizer_free(&tok);
    free(params);
    return rc;
}
