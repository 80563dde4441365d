/* hf_export: our model checkpoint as a Hugging Face folder of its class (hf.h: GPT2LMHeadModel, LlamaForCausalLM
   or Qwen3ForCausalLM): config.json, the tokenizer's
   files where it is GPT-2's, and model.safetensors, written into a copy of the folder that then replaces it whole
   (common/dirs.h, DirStage). */
#include "runtime/hf/hf.h"
#include "common/dirs.h"
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
        if (x->tokenizer_given) return err_set(err, "%s: %s (--tokenizer)", err_show(x->tokenizer), why);
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
        snprintf(names[i], sizeof names[i], "%s%s", hf_prefix(s), t[i].name);
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

/* The files an export writes: replacing any of them needs --force, and a new export leaves out all of an old one's,
   so that the folder never mixes two exports */
static const char *const EXPORT_FILES[] = {"model.safetensors", "config.json", "vocab.json", "merges.txt",
                                           "tokenizer_config.json", NULL};

/* Whether the export may go into x->dir: none of its files there, or --force; what is not a regular file under one
   of their names is refused always */
static int may_write(const HfExport *x, Err *err) {
    char path[4400];
    for (int i = 0; EXPORT_FILES[i]; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", x->dir, EXPORT_FILES[i]) >= 4096 - ATOMIC_SUFFIX_MAX)
            return err_set(err, "%s: path too long", err_show(x->dir));
        const char *what = file_not_regular(path);
        if (what) return err_set(err, "%s: is %s, not a regular file: export replaces only regular files", err_show(path), what);
        if (!x->force && file_exists(path))
            return err_set(err, "%s exists: give --force to replace the export in %s (or export into another folder)",
                           err_show(path), err_show(x->dir));
    }
    return 0;
}

/* The export's files into the folder dir: the config, the tokenizer's files, the weights */
static int write_all(const HfExport *x, const char *dir, const GPT2Shape *s, const float *params, Tokenizer *tok,
                     int have_tok, HfReport *r, Err *err) {
    char model[4500], config[4500];   /* dir is a DirStage's stage, under 4400 bytes */
    snprintf(model, sizeof model, "%.4400s/model.safetensors", dir);
    snprintf(config, sizeof config, "%.4400s/config.json", dir);
    int rc = hf_write_config(config, s, x->dtype, err);
    if (!rc && have_tok) {
        char note[sizeof r->note - 64];
        int t = bpe_write_files(tok, dir, s->max_seq_len, note, sizeof note, err);
        if (t < 0) rc = -1;
        else if (t == 0) r->wrote_tokenizer = 1;
        else snprintf(r->note, sizeof r->note, "%s: %s", err_show(x->tokenizer), note);
    }
    if (!rc) rc = write_model(model, s, params, x->dtype, r, err);
    return rc;
}

int hf_export(const HfExport *x, HfReport *r, Err *err) {
    memset(r, 0, sizeof *r);
    GPT2Shape s;
    int bf16;
    if (checkpoint_read_header(x->checkpoint, &s, &bf16, err) || may_write(x, err)) return -1;
    char why[256];
    if (hf_family(&s, why, sizeof why) < 0)
        return err_set(err, "%s: no transformers class holds this model (%s): export writes GPT-2 as GPT2LMHeadModel, "
                       "norm = \"rmsnorm\", position = \"rope\", mlp = \"swiglu\" without logit_softcap as "
                       "LlamaForCausalLM, and that with qk_norm and bias = false as Qwen3ForCausalLM",
                       err_show(x->checkpoint), why);
    r->shape = s;
    Tokenizer tok;
    int have_tok = load_tokenizer(x, &s, &tok, r, err);
    if (have_tok < 0) return -1;
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS], np = gpt2_param_sizes(&s, sz, off);
    float *params = xmalloc(np * sizeof *params);
    int rc = checkpoint_load(x->checkpoint, NULL, params, err);
    static const int by_vocab[] = {P_WTE, P_LMHEAD};   /* their padding rows are not exported: say so when they
                                                         hold anything */
    for (int k = 0; k < 2 && !rc; k++)
        for (size_t i = (size_t)s.vocab_size * s.n_embd; i < sz[by_vocab[k]]; i++)
            r->dropped_padding += params[off[by_vocab[k]] + i] != 0;
    /* written only once everything is read, into a copy of the folder without an earlier export's files, which
       then replaces the folder in one rename: a kill or a full disk leaves the earlier export whole */
    DirStage st;
    if (!rc && !(rc = dir_stage_begin(&st, x->dir, "export", EXPORT_FILES, err))) {
        /* again under the folder's lock: an export that finished meanwhile is replaced only with --force */
        rc = may_write(x, err) || write_all(x, st.stage, &s, params, &tok, have_tok, r, err) ? -1 : 0;
        if (rc) { err_reprefix(err, st.stage, x->dir); dir_stage_abort(&st); }
        else rc = dir_stage_commit(&st, err);
    }
    if (have_tok) tokenizer_free(&tok);
    free(params);
    return rc;
}
