"""tests/gpu/hf.py: gpt2gen import and export against transformers itself (on the GPU machine, where torch and
transformers are installed; it runs on the CPU there, so that both sides are exact and repeatable).

A random GPT2LMHeadModel (L=2, C=64, NH=4, maxT=64, V=50257, its weights perturbed away from the fresh init so that
every bias and LayerNorm matters) is saved by transformers (save_pretrained, safetensors), imported with
`gpt2gen import`, exported again with `gpt2gen export`, and loaded back by transformers offline:
  - the exported model loads with no missing or unexpected weights, and its weights and logits equal the
    original's exactly (fp32);
  - our CPU backend's logits for a sequence of 64 tokens (build/tests/dump_logits, over the imported checkpoint)
    equal transformers' within 1e-4;
  - transformers' sharded save (an index and several files) imports to the same bytes as the single file;
  - a bf16 save imports to the bf16 values exactly (export in bf16 and transformers' load give them back);
  - where a GPT-2 tokenizer is at hand (data/fortunes/tokenizer.bin or data/gpt2.tiktoken), transformers'
    AutoTokenizer loads the exported vocab.json and merges.txt and encodes text as `gpt2gen prepare` does.
GPT-2's relatives, as LlamaForCausalLM and Qwen3ForCausalLM (docs/model.md, "Hugging Face"): small random models
(V=50257, C=64, L=2, NH=4; GQA 4:2 untied without biases, MQA tied with biases, Qwen3 with QK-norm), their weights
perturbed likewise, saved by transformers and imported:
  - our CPU backend's logits over the imported checkpoint equal transformers' within 1e-4;
  - our greedy text (`gpt2gen sample --temperature 0`) is transformers' greedy continuation of end-of-text (argmax
    step by step), decoded with the same GPT-2 tokenizer (where one is at hand);
  - exported again, transformers loads the folder as the same class with no missing or unexpected weights, and its
    weights and logits equal the original's exactly;
  - where the default data set is there (make data), a model trained one step by gpt2gen (Llama-shaped, and
    Qwen3-shaped) is exported and transformers' logits over it equal our CPU backend's within 1e-4.
Prints ok/FAIL/skip lines and "RESULT passed failed skipped" (tests/lib.sh); exits 1 when something failed.
Run from the repository root after `make gpt2gen tests-bin`: python3 tests/gpu/hf.py
(GPT2GEN_BIN and TEST_DIR as in tests/lib.sh)."""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GPT2GEN = os.environ.get("GPT2GEN_BIN", os.path.join(ROOT, "gpt2gen"))
DUMP = os.path.join(ROOT, os.environ.get("TEST_DIR", "build/tests"), "dump_logits")
counts = [0, 0, 0]


def ok(name, detail=""):
    counts[0] += 1
    print(f"ok   {name}" + (f" ({detail})" if detail else ""), flush=True)


def fail(name, why):
    counts[1] += 1
    print(f"FAIL {name}: {why}", flush=True)


def skip(name, why):
    counts[2] += 1
    print(f"skip {name}: {why}", flush=True)


def finish():
    print(f"RESULT {counts[0]} {counts[1]} {counts[2]}", flush=True)
    sys.exit(1 if counts[1] else 0)


def run(*args):
    """Runs a command; returns its standard output, or raises with its messages."""
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        raise RuntimeError(f"{' '.join(str(a) for a in args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def check(name, fn):
    try:
        r = fn()
        ok(name, r or "")
    except Exception as e:   # one test's failure must not stop the others
        fail(name, f"{type(e).__name__}: {e}")


try:
    import torch
    import transformers
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel
except ImportError as e:
    for n in ("export_loads_and_equals", "our_logits_equal_transformers", "sharded_import", "bf16_import", "tokenizer",
              "relatives (LlamaForCausalLM, Qwen3ForCausalLM)"):
        skip(n, f"needs torch and transformers ({e})")
    finish()

for path, what in ((GPT2GEN, "gpt2gen (make gpt2gen)"), (DUMP, "dump_logits (make tests-bin)")):
    if not os.access(path, os.X_OK):
        fail("setup", f"{path} is missing: build {what}")
        finish()

torch.manual_seed(1234)
torch.set_grad_enabled(False)
work = tempfile.mkdtemp(prefix="gpt2gen-hf.")
saved, saved_sharded, saved_bf16 = (os.path.join(work, d) for d in ("saved", "sharded", "saved_bf16"))
ck, ck_sharded = os.path.join(work, "model.bin"), os.path.join(work, "sharded.bin")
exported = os.path.join(work, "exported")

config = GPT2Config(vocab_size=50257, n_positions=64, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                    attn_pdrop=0.0)
model = GPT2LMHeadModel(config).eval()
for p in model.parameters():   # away from zero biases and unit LayerNorm weights (wte is lm_head: perturbed once)
    p.add_(0.05 * torch.randn_like(p))
ids = torch.randint(0, config.vocab_size, (1, 64), generator=torch.Generator().manual_seed(5))


def save(m, folder, **kw):
    try:
        m.save_pretrained(folder, safe_serialization=True, **kw)
    except TypeError:   # transformers versions that always write safetensors and dropped the argument
        m.save_pretrained(folder, **kw)
    names = os.listdir(folder)
    assert any(n.endswith(".safetensors") for n in names), f"save_pretrained wrote no safetensors: {names}"


def tokenizer_file():
    for f in ("data/fortunes/tokenizer.bin", "data/gpt2.tiktoken"):
        if os.path.exists(os.path.join(ROOT, f)):
            return os.path.join(ROOT, f)
    return None


tok_file = tokenizer_file()
try:
    save(model, saved)
    run(GPT2GEN, "import", saved, "-o", ck)
    args = [GPT2GEN, "export", "--checkpoint", ck, "--to", exported]
    if tok_file:
        args += ["--tokenizer", tok_file]
    run(*args)
except Exception as e:
    fail("setup", f"{type(e).__name__}: {e}")
    shutil.rmtree(work, ignore_errors=True)
    finish()
want = model(ids).logits[0].float().numpy()


def export_loads_and_equals():
    m, info = GPT2LMHeadModel.from_pretrained(exported, local_files_only=True, output_loading_info=True)
    m.eval()
    missing = [k for k in info.get("missing_keys", []) if k != "lm_head.weight"]
    assert not missing and not info.get("unexpected_keys") and not info.get("mismatched_keys"), f"loading info {info}"
    assert torch.equal(m.lm_head.weight, m.transformer.wte.weight), "lm_head is not wte"
    a, b = model.state_dict(), m.state_dict()
    for k, v in a.items():
        if k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue
        assert k in b and b[k].dtype == torch.float32 and torch.equal(v, b[k]), f"{k} differs"
    got = m(ids).logits[0].numpy()
    assert np.array_equal(got, want), f"logits differ by up to {np.abs(got - want).max():.3g}"
    return f"{len(a)} tensors and the logits equal, transformers {transformers.__version__}"


def our_logits_equal_transformers():
    out = os.path.join(work, "ours.f32")
    run(DUMP, ck, out, *ids[0].tolist())
    ours = np.fromfile(out, dtype=np.float32).reshape(want.shape)
    err = np.abs(ours - want).max()
    assert err < 1e-4, f"largest difference {err:.3g} (logits up to {np.abs(want).max():.3g})"
    return f"largest difference {err:.2g} over {want.size} logits"


def sharded_import():
    save(model, saved_sharded, max_shard_size="4MB")
    names = sorted(os.listdir(saved_sharded))
    shards = [n for n in names if n.endswith(".safetensors")]
    assert "model.safetensors.index.json" in names and len(shards) > 1, f"transformers wrote {names}"
    run(GPT2GEN, "import", saved_sharded, "-o", ck_sharded)
    assert open(ck, "rb").read() == open(ck_sharded, "rb").read(), "the checkpoints differ"
    return f"{len(shards)} shards"


def bf16_import():
    mb = GPT2LMHeadModel(config).eval()
    mb.load_state_dict(model.state_dict())
    mb = mb.to(torch.bfloat16)
    save(mb, saved_bf16)
    ckb, out = os.path.join(work, "bf16.bin"), os.path.join(work, "exported_bf16")
    run(GPT2GEN, "import", saved_bf16, "-o", ckb, "--dtype", "bf16")
    run(GPT2GEN, "export", "--checkpoint", ckb, "--to", out, "--dtype", "bf16")
    # loaded in whatever dtype this transformers picks (fp32 holds every bf16 value exactly)
    m = GPT2LMHeadModel.from_pretrained(out, local_files_only=True).eval()
    a, b = mb.state_dict(), m.state_dict()
    for k, v in a.items():
        if k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue
        assert torch.equal(v.float(), b[k].float()), f"{k} differs"
    return f"{len(a)} bf16 tensors equal"


def tokenizer():
    text = ("Hello world! It's 2024: naive cafe, cafe\u0301, \u65e5\u672c\u8a9e, emoji \U0001F642, tabs\t\tand   "
            "spaces, 12345 numbers, they'll re-export it.")
    tok = AutoTokenizer.from_pretrained(exported, local_files_only=True)
    hf_ids = tok(text)["input_ids"]
    src, ds = os.path.join(work, "text.txt"), os.path.join(work, "prepared")
    open(src, "w", encoding="utf-8").write(text)
    run(GPT2GEN, "prepare", src, "-o", ds, "--ranks", tok_file, "--val-fraction", "0")
    raw = np.fromfile(os.path.join(ds, "train_000000.bin"), dtype=np.uint8)
    ours = raw[1024:].view(np.uint16).tolist()
    assert ours[0] == 50256, f"prepare's first token {ours[0]}"
    assert hf_ids == ours[1:], f"transformers {hf_ids} vs gpt2gen prepare {ours[1:]}"
    return f"{type(tok).__name__}: {len(hf_ids)} tokens agree"


check("export_loads_and_equals", export_loads_and_equals)
check("our_logits_equal_transformers", our_logits_equal_transformers)
check("sharded_import", sharded_import)
check("bf16_import", bf16_import)
if tok_file:
    check("tokenizer", tokenizer)
else:
    skip("tokenizer", "no GPT-2 tokenizer here (data/fortunes/tokenizer.bin or data/gpt2.tiktoken)")

# ---------- GPT-2's relatives: LlamaForCausalLM and Qwen3ForCausalLM ----------

def relative_classes():
    """{name: (config class, model class)} of the classes this transformers has."""
    out = {}
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
        out["llama"] = (LlamaConfig, LlamaForCausalLM)
    except ImportError:
        pass
    try:
        from transformers import Qwen3Config, Qwen3ForCausalLM
        out["qwen3"] = (Qwen3Config, Qwen3ForCausalLM)
    except ImportError:
        pass
    return out


def relative_config(cfg_cls, theta, **kw):
    """A config with RoPE's theta set the way this transformers takes it (5: rope_parameters; 4: rope_theta)."""
    if int(transformers.__version__.split(".")[0]) >= 5:
        cfg = cfg_cls(rope_parameters={"rope_type": "default", "rope_theta": theta}, **kw)
    else:
        cfg = cfg_cls(rope_theta=theta, **kw)
    got = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", getattr(cfg, "rope_theta", None))
    assert got == theta, f"{cfg_cls.__name__}: rope theta {got}, asked for {theta}"
    return cfg


SHAPE = dict(vocab_size=50257, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64, head_dim=16, bos_token_id=50256, eos_token_id=50256)
RELATIVES = [   # name, class key, theta, the config's other keys
    ("llama_gqa_untied", "llama", 500000.0, dict(num_key_value_heads=2, rms_norm_eps=1e-6, tie_word_embeddings=False,
                                                 attention_bias=False, mlp_bias=False)),
    ("llama_mqa_bias_tied", "llama", 10000.0, dict(num_key_value_heads=1, rms_norm_eps=1e-5, tie_word_embeddings=True,
                                                   attention_bias=True, mlp_bias=True)),
    ("qwen3_mqa_untied", "qwen3", 1000000.0, dict(num_key_value_heads=1, rms_norm_eps=1e-6, tie_word_embeddings=False,
                                                  attention_bias=False)),
]


def token_bytes(path):
    """Each token id's bytes, from llm.c's tokenizer file or a tiktoken ranks file (ids are ranks; 50256 is
    end-of-text)."""
    import base64
    if path.endswith(".tiktoken"):
        out = {}
        for line in open(path, "rb"):
            if line.strip():
                b64, r = line.split()
                out[int(r)] = base64.b64decode(b64)
        out[50256] = b"<|endoftext|>"
        return out
    raw = open(path, "rb").read()
    n = int(np.frombuffer(raw, np.int32, 3)[2])
    out, at = {}, 1024
    for i in range(n):
        k = raw[at]
        out[i] = raw[at + 1:at + 1 + k]
        at += 1 + k
    return out


def printable(text):
    """Text as `gpt2gen sample` prints it (runtime/data/tokenizer.h, Utf8Stream): invalid UTF-8 and control characters
    other than tab, CR and LF as U+FFFD; runs of U+FFFD counted as one, since decoders split bad bytes differently."""
    import re
    s = "".join("\ufffd" if (ord(c) < 32 and c not in "\t\r\n") or 127 <= ord(c) <= 159 else c for c in text)
    return re.sub("\ufffd+", "\ufffd", s)


def hf_greedy(m, n):
    """transformers' greedy continuation of end-of-text: the most likely token (the first of equal ones), n times."""
    ids = torch.tensor([[50256]])
    for _ in range(n):
        nxt = m(ids).logits[0, -1].argmax()
        ids = torch.cat([ids, nxt.view(1, 1)], 1)
    return ids[0, 1:].tolist()


def relative_checks(name, cls_key, theta, keys, classes):
    """The checks of one relative: import (logits, greedy text), export (loads, same weights and logits)."""
    cfg_cls, model_cls = classes[cls_key]
    folder, ckr, out = (os.path.join(work, f"{name}_{d}") for d in ("saved", "model.bin", "exported"))
    state = {}

    def setup():
        torch.manual_seed(77)
        m = model_cls(relative_config(cfg_cls, theta, **SHAPE, **keys)).eval()
        for p in m.parameters():   # away from unit norm weights and zero biases (a tied head perturbed once)
            p.add_(0.05 * torch.randn_like(p))
        save(m, folder)
        run(GPT2GEN, "import", folder, "-o", ckr)
        state["model"], state["want"] = m, m(ids).logits[0].float().numpy()

    def import_logits():
        setup()
        path = os.path.join(work, f"{name}.f32")
        run(DUMP, ckr, path, *ids[0].tolist())
        want = state["want"]
        ours = np.fromfile(path, dtype=np.float32).reshape(want.shape)
        err = np.abs(ours - want).max()
        assert err < 1e-4, f"largest difference {err:.3g} (logits up to {np.abs(want).max():.3g})"
        return f"{model_cls.__name__}: largest difference {err:.2g} over {want.size} logits"

    def import_greedy():
        assert "model" in state, "the import failed (above)"
        n = 24
        theirs = hf_greedy(state["model"], n)
        tb = token_bytes(tok_file)
        want = printable(b"".join(tb[i] for i in theirs).decode("utf-8", errors="replace"))
        p = subprocess.run([GPT2GEN, "sample", "--checkpoint", ckr, "--backend", "cpu", "--temperature", "0", "--tokens",
                            str(n), "--ignore-eot", "--tokenizer", tok_file], capture_output=True, cwd=ROOT)
        assert p.returncode == 0, f"gpt2gen sample: exit {p.returncode}: {p.stderr.decode(errors='replace').strip()}"
        got = p.stdout.decode("utf-8", errors="replace")
        got = printable(got[:-1] if got.endswith("\n") else got)   # sample ends its text with a line break
        assert got == want, f"gpt2gen {got!r} vs transformers {want!r} (ids {theirs})"
        return f"{n} tokens agree"

    def export_loads():
        assert "model" in state, "the import failed (above)"
        run(GPT2GEN, "export", "--checkpoint", ckr, "--to", out)
        from transformers import AutoModelForCausalLM
        m, info = AutoModelForCausalLM.from_pretrained(out, local_files_only=True, output_loading_info=True)
        m = m.float().eval()
        assert type(m) is model_cls, f"loaded as {type(m).__name__}, expected {model_cls.__name__}"
        missing = [k for k in info.get("missing_keys", []) if not (k == "lm_head.weight" and keys["tie_word_embeddings"])]
        assert not missing and not info.get("unexpected_keys") and not info.get("mismatched_keys"), f"loading info {info}"
        a, b = state["model"].state_dict(), m.state_dict()
        for k, v in a.items():
            assert k in b and torch.equal(v.float(), b[k].float()), f"{k} differs"
        got = m(ids).logits[0].numpy()
        want = state["want"]
        assert np.array_equal(got, want), f"logits differ by up to {np.abs(got - want).max():.3g}"
        return f"{len(a)} tensors and the logits equal"

    check(f"{name}_import_logits_equal_transformers", import_logits)
    if tok_file:
        check(f"{name}_import_greedy_text", import_greedy)
    else:
        skip(f"{name}_import_greedy_text", "no GPT-2 tokenizer here (data/fortunes/tokenizer.bin or data/gpt2.tiktoken)")
    check(f"{name}_export_loads_and_equals", export_loads)


def trained_export(name, keys):
    """A model gpt2gen trained one step (the micro config with these model keys), exported: transformers' logits
    over the folder equal our CPU backend's over the checkpoint."""
    from transformers import AutoModelForCausalLM
    cfg, rundir, out = (os.path.join(work, f"{name}_{d}") for d in ("config.lua", "run", "exported"))
    open(cfg, "w").write(f'base "{ROOT}/tests/configs/micro.lua"\nname = "{name}"\nmodel = {{ {keys} }}\n')
    run(GPT2GEN, "train", cfg, "--backend", "cpu", "-q", "--set", f"checkpoint.dir={rundir}", "--set", "train.steps=1",
        "--set", "eval.val_every=0")
    ck_t = os.path.join(rundir, "model_00000001.bin")
    run(GPT2GEN, "export", "--checkpoint", ck_t, "--to", out)
    m = AutoModelForCausalLM.from_pretrained(out, local_files_only=True).float().eval()
    T = 32   # the micro model's context
    row = ids[:, :T]
    want = m(row).logits[0].numpy()
    path = os.path.join(work, f"{name}.f32")
    run(DUMP, ck_t, path, *row[0].tolist())
    ours = np.fromfile(path, dtype=np.float32).reshape(want.shape)
    err = np.abs(ours - want).max()
    assert err < 1e-4, f"largest difference {err:.3g} (logits up to {np.abs(want).max():.3g})"
    return f"{type(m).__name__}: largest difference {err:.2g} over {want.size} logits"


classes = relative_classes()
for name, cls_key, theta, keys in RELATIVES:
    if cls_key in classes:
        relative_checks(name, cls_key, theta, keys, classes)
    else:
        skip(name, f"this transformers ({transformers.__version__}) has no {cls_key} model class")
LLAMA_KEYS = 'n_head = 4, norm = "rmsnorm", position = "rope", mlp = "swiglu", n_ffn = 160, bias = false'
if not os.path.exists(os.path.join(ROOT, "data/fortunes/train_000000.bin")):
    skip("trained_exports", "no default data set (make data)")
else:
    if "llama" in classes:
        check("trained_llama_export_logits", lambda: trained_export(
            "trained_llama", LLAMA_KEYS + ", n_kv_head = 2, tie_embeddings = false, rope_theta = 500000, norm_eps = 1e-6"))
    if "qwen3" in classes:
        check("trained_qwen3_export_logits", lambda: trained_export(
            "trained_qwen3", LLAMA_KEYS + ", n_kv_head = 1, qk_norm = true, tie_embeddings = false"))
shutil.rmtree(work, ignore_errors=True)
finish()
