/* gpt2gen export and gpt2gen import: a model checkpoint to and from a Hugging Face folder (GPT2LMHeadModel,
   LlamaForCausalLM or Qwen3ForCausalLM)
   (runtime/hf/hf.h). Messages go to standard error; the one line saying what was written to standard output. */
#include "cli/commands.h"
#include "common/files.h"
#include "runtime/hf/hf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *EXPORT_USAGE =
    "usage: gpt2gen export --checkpoint FILE --to DIR [options]\n"
    "\n"
    "Writes a model checkpoint (gpt2gen's or llm.c's, fp32 or bf16) as a Hugging Face GPT2LMHeadModel folder, which\n"
    "transformers loads offline (GPT2LMHeadModel.from_pretrained(DIR, local_files_only=True)):\n"
    "  config.json            the model's shape (vocab_size, n_positions, n_embd, n_layer, n_head), gelu_new,\n"
    "                         layer_norm_epsilon 1e-5, tied embeddings, dropout 0\n"
    "  vocab.json, merges.txt GPT-2's tokenizer, derived from its BPE ranks, with tokenizer_config.json; only when the\n"
    "                         model's vocabulary and the tokenizer are GPT-2's (50257 tokens), else the export says\n"
    "                         it wrote no tokenizer files\n"
    "  model.safetensors      the weights, the four matmul weights of each layer transposed to Conv1D's (in, out),\n"
    "                         without the vocabulary's padding rows and without lm_head.weight (tied to wte)\n"
    "A model of RMSNorm, RoPE and SwiGLU (docs/config.md's model keys) is written as a LlamaForCausalLM, and with\n"
    "qk_norm as a Qwen3ForCausalLM (q/k/v_proj, gate/up/down_proj, the norms; lm_head.weight when untied); other\n"
    "architectures are refused, naming the keys no transformers class holds (docs/model.md, \"Hugging Face\").\n"
    "DIR is made when missing. The files are written into a copy of DIR beside it (.NAME.export-PID, hard links to\n"
    "what DIR holds besides an export's files), which then replaces DIR in one rename: DIR holds the whole earlier\n"
    "export or the whole new one, also when export is killed or the disk is full. Your other files in DIR stay.\n"
    "\n"
    "options:\n"
    "  --checkpoint FILE   the model (required)\n"
    "  --to DIR            the folder to write (required)\n"
    "  --dtype D           fp32 (default), bf16 or fp16: the number format of model.safetensors\n"
    "  --tokenizer FILE    the tokenizer: llm.c's tokenizer file or a tiktoken ranks file (default: tokenizer.bin or\n"
    "                      gpt2_tokenizer.bin beside the checkpoint, else data/fortunes/tokenizer.bin)\n"
    "  --force             replace an export in DIR; without it, any of the files above in DIR (yours or an earlier\n"
    "                      export's) is an error and nothing is written. An earlier export's files are all replaced\n"
    "                      (its tokenizer files go when the new export writes none)\n"
    "\n"
    "example:\n"
    "  gpt2gen export --checkpoint runs/tiny/model_00000300.bin --to hf/tiny\n";

static const char *IMPORT_USAGE =
    "usage: gpt2gen import DIR -o FILE [options]\n"
    "\n"
    "Reads a Hugging Face GPT-2, Llama or Qwen3 folder, by config.json's model_type (what gpt2gen export or\n"
    "transformers' save_pretrained writes: config.json and model.safetensors, or model.safetensors.index.json and\n"
    "its shards; F32, F16 or BF16 tensors) into a model checkpoint in llm.c's format (another architecture's\n"
    "header for Llama and Qwen3). The shape comes from config.json, and every tensor must have its shape. The\n"
    "vocabulary is padded to a multiple of 128 with zero rows, as llm.c does. The attention-mask buffers of older\n"
    "checkpoints (attn.bias, attn.masked_bias) are ignored, and so is lm_head.weight of a tied model when it equals\n"
    "wte (a GPT-2 whose lm_head differs cannot be imported; a Llama or Qwen3 with tie_word_embeddings false keeps\n"
    "its own head). Only safetensors: a folder holding pytorch_model.bin alone is an error. The checkpoint is\n"
    "written to a temporary name and renamed.\n"
    "\n"
    "options:\n"
    "  -o FILE, --output FILE  the checkpoint to write (required)\n"
    "  --dtype D           fp32 (default) or bf16: the checkpoint's number format (version 3 or 5)\n"
    "  --force             replace FILE when it exists; without it, an existing FILE is an error\n"
    "\n"
    "example:\n"
    "  gpt2gen import hf/gpt2 -o gpt2_124M.bin && gpt2gen sample --checkpoint gpt2_124M.bin --prompt \"Hello\"\n";

static int usage_error(const char *cmd, const char *fmt, const char *a) {
    fprintf(stderr, "gpt2gen %s: ", cmd);
    fprintf(stderr, fmt, a);
    fprintf(stderr, " (see gpt2gen %s --help)\n", cmd);
    return EXIT_USAGE;
}

/* the value of option argv[*i], moving past it; NULL (and a usage message) when there is none */
static const char *value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 == argc) { usage_error(cmd, "option '%s' needs a value", argv[*i]); return NULL; }
    return argv[++*i];
}

static double megas(size_t n) { return (double)n / 1e6; }

int cmd_export(int argc, char **argv) {
    HfExport x = {0};
    x.dtype = ST_F32;
    int help = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = NULL;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) { help = 1; continue; }
        if (!strcmp(s, "--force")) { x.force = 1; continue; }
        if (strcmp(s, "--checkpoint") && strcmp(s, "--to") && strcmp(s, "--dtype") && strcmp(s, "--tokenizer"))
            return usage_error("export", s[0] == '-' ? "unknown option '%s'" : "unexpected argument '%s'", err_show(s));
        if (!(v = value("export", argc, argv, &i))) return EXIT_USAGE;
        if (!strcmp(s, "--checkpoint")) x.checkpoint = v;
        else if (!strcmp(s, "--to")) x.dir = v;
        else if (!strcmp(s, "--tokenizer")) x.tokenizer = v, x.tokenizer_given = 1;
        else if (!strcmp(v, "fp32")) x.dtype = ST_F32;
        else if (!strcmp(v, "bf16")) x.dtype = ST_BF16;
        else if (!strcmp(v, "fp16")) x.dtype = ST_F16;
        else return usage_error("export", "--dtype: expected fp32, bf16 or fp16, got '%s'", err_show(v));
    }
    if (help) { fputs(EXPORT_USAGE, stdout); return 0; }
    if (!x.checkpoint) return usage_error("export", "missing --checkpoint FILE%s", "");
    if (!x.dir) return usage_error("export", "missing --to DIR%s", "");
    char tbuf[CONFIG_PATH_MAX];
    if (!x.tokenizer) x.tokenizer = cli_pick_tokenizer(NULL, x.checkpoint, tbuf, sizeof tbuf);
    Err err = {{0}};
    HfReport r;
    if (hf_export(&x, &r, &err)) { fprintf(stderr, "gpt2gen export: %s\n", err.msg); return EXIT_FAIL; }
    if (r.dropped_padding)
        fprintf(stderr, "gpt2gen export: note: %zu non-zero values in %s padding rows (%d..%d) were not exported\n",
                r.dropped_padding, r.shape.untied ? "wte's and lmhead's" : "wte's", r.shape.vocab_size, r.shape.padded_vocab_size - 1);
    if (!r.wrote_tokenizer) fprintf(stderr, "gpt2gen export: wrote no tokenizer files: %s\n", r.note);
    printf("wrote %s: model.safetensors (%.2fM parameters, %s), config.json%s\n", x.dir, megas(r.params),
           x.dtype == ST_F32 ? "fp32" : x.dtype == ST_BF16 ? "bf16" : "fp16",
           r.wrote_tokenizer ? ", vocab.json, merges.txt, tokenizer_config.json" : "");
    return 0;
}

int cmd_import(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    int bf16 = 0, force = 0, help = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) help = 1;
        else if (!strcmp(s, "--force")) force = 1;
        else if (!strcmp(s, "-o") || !strcmp(s, "--output")) {
            if (!(v = value("import", argc, argv, &i))) return EXIT_USAGE;
            out = v;
        } else if (!strcmp(s, "--dtype")) {
            if (!(v = value("import", argc, argv, &i))) return EXIT_USAGE;
            if (strcmp(v, "fp32") && strcmp(v, "bf16"))
                return usage_error("import", "--dtype: expected fp32 or bf16 (a checkpoint holds one of them), got '%s'", err_show(v));
            bf16 = !strcmp(v, "bf16");
        } else if (s[0] == '-' && s[1]) return usage_error("import", "unknown option '%s'", err_show(s));
        else if (dir) return usage_error("import", "unexpected argument '%s' (one folder at a time)", err_show(s));
        else dir = s;
    }
    if (help) { fputs(IMPORT_USAGE, stdout); return 0; }
    if (!dir) return usage_error("import", "missing the folder DIR%s", "");
    if (!out) return usage_error("import", "missing -o FILE%s", "");
    Err err = {{0}};
    HfReport r;
    if (hf_import(dir, out, bf16, force, &r, &err)) { fprintf(stderr, "gpt2gen import: %s\n", err.msg); return EXIT_FAIL; }
    const GPT2Shape *s = &r.shape;
    char arch[160] = "", why[256];
    int f = hf_family(s, why, sizeof why);
    if (f != HF_GPT2)   /* GPT-2's line stays as it was */
        snprintf(arch, sizeof arch, ", %s: NKV=%d F=%d%s%s", f < 0 ? "?" : hf_class_name((HfFamily)f), gpt2_kv_heads(s),
                 gpt2_ffn(s), s->no_bias ? ", no biases" : ", biases", s->untied ? ", untied lm_head" : ", tied lm_head");
    printf("wrote %s: %.2fM parameters (%s), L=%d C=%d NH=%d maxT=%d V=%d (padded to %d)%s%s\n", out, megas(r.params),
           bf16 ? "bf16" : "fp32", s->n_layer, s->n_embd, s->n_head, s->max_seq_len, s->vocab_size, s->padded_vocab_size, arch,
           !r.ignored ? "" : f == HF_GPT2 ? "; ignored the attention-mask buffers or the tied lm_head.weight"
                                          : "; ignored the rotary buffers (inv_freq) or the tied lm_head.weight");
    return 0;
}
