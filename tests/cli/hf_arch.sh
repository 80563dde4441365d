#!/bin/sh
# gpt2gen export and import of GPT-2's relatives (docs/model.md, "Hugging Face"): a Llama-shaped model (GQA 4:2, no
# biases, untied, rope_theta and norm_eps away from the defaults), one with biases and a tied head, and a
# Qwen3-shaped one (qk_norm, MQA), each trained one step on the CPU, are exported as LlamaForCausalLM or
# Qwen3ForCausalLM: config.json has the fields transformers writes for the class, with our model's numbers; the
# safetensors file holds our weights under transformers' names (q, k and v cut from our fused qkv, gate_proj our fcgw,
# up_proj our fcw), checked by a mapping written here in numpy from the checkpoint's bytes; a numpy forward of the
# class, over the exported tensors and config.json alone (transformers' documented Llama and Qwen3), gives the logits
# our CPU backend gives; import gives back the same checkpoint, byte for byte, and the same greedy text; a sharded
# folder with a tied lm_head and the old rotary buffers imports too. Models no class holds are refused at export, and
# folders our model cannot run at import, each with one message naming what. Needs python3 with numpy and
# safetensors for the file checks (tests/cli/hf.sh says how CI treats their absence).
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
DUMP=$TEST_DIR/dump_logits
mk() {   # NAME MODEL-KEYS: a config of the micro model with those architecture keys
    printf 'base "%s/tests/configs/micro.lua"\nname = "%s"\nmodel = { n_head = 4, %s }\n' "$ROOT" "$1" "$2" > "$WORK/$1.lua"
}
LL='norm = "rmsnorm", position = "rope", mlp = "swiglu", n_ffn = 160'
mk llama "$LL, n_kv_head = 2, bias = false, tie_embeddings = false, rope_theta = 500000, norm_eps = 1e-6"
mk llamab "$LL, n_kv_head = 1, bias = true, tie_embeddings = true"
mk qwen3 "$LL, n_kv_head = 1, qk_norm = true, bias = false, tie_embeddings = false, norm_eps = 1e-6"
mk nano 'norm = "rmsnorm", position = "rope", mlp = "relu2", qk_norm = true, bias = false, tie_embeddings = false, logit_softcap = 15'
mk lnrope 'position = "rope", mlp = "swiglu", n_ffn = 160'
mk qwenbias "$LL, qk_norm = true"
mk gpt2untied 'tie_embeddings = false'
for m in llama llamab qwen3 nano lnrope qwenbias gpt2untied; do
    "$GPT2GEN" train "$WORK/$m.lua" --backend cpu -q --set checkpoint.dir="$WORK/run-$m" --set train.steps=1 \
        --set eval.val_every=0 > "$WORK/train.log" 2>&1 || { fail "setup_$m" "$(tail -5 "$WORK/train.log")"; finish; }
done
ck() { echo "$WORK/run-$1/model_00000001.bin"; }

PY_OK=1
python3 -c "import numpy, safetensors" 2>/dev/null || PY_OK=0
if [ $PY_OK -eq 0 ]; then
    if [ -n "$CI" ]; then fail python_safetensors "python3 cannot import numpy and safetensors (tools/install_deps.sh installs them)"
    else skip python_safetensors "python3 cannot import numpy and safetensors: the checks of the files' contents skip"; fi
fi

cat > "$WORK/check.py" <<'PY'
"""The reference side: our checkpoint read with numpy, transformers' names written out here, a numpy Llama/Qwen3."""
import json, os, struct, sys
import numpy as np


def read_checkpoint(path):
    raw = np.fromfile(path, dtype=np.uint8)
    h = raw[:1024].view(np.int32)
    assert h[0] == 20240326 and h[1] in (1003, 1005), f"{path}: header {h[:2]}, expected another architecture's"
    maxT, V, L, NH, C, Vp = (int(x) for x in h[2:8])
    a = dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp, norm=int(h[9]), position=int(h[10]), mlp=int(h[11]), NKV=int(h[12]),
             F=int(h[13]), qk_norm=int(h[14]), bias=int(h[15]), tied=int(h[16]))
    a["eps"], a["theta"], a["cap"] = (float(x) for x in raw[80:104].view(np.float64))
    p = raw[1024:].view(np.float32) if h[1] == 1003 else (raw[1024:].view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    HS, F, b = C // NH, a["F"], a["bias"]
    QKV = (NH + 2 * a["NKV"]) * HS
    shapes = [("wte", (Vp, C)), ("ln1w", (L, C)), ("qkvw", (L, QKV, C)), ("qkvb", (L, QKV) if b else None),
              ("attprojw", (L, C, C)), ("attprojb", (L, C) if b else None), ("ln2w", (L, C)), ("fcw", (L, F, C)),
              ("fcb", (L, F) if b else None), ("fcprojw", (L, C, F)), ("fcprojb", (L, C) if b else None), ("lnfw", (C,)),
              ("qnormw", (L, HS) if a["qk_norm"] else None), ("knormw", (L, HS) if a["qk_norm"] else None),
              ("fcgw", (L, F, C)), ("fcgb", (L, F) if b else None), ("lmhead", None if a["tied"] else (Vp, C))]
    assert a["norm"] == 1 and a["position"] == 1 and a["mlp"] == 2, "not RMSNorm, RoPE and SwiGLU"
    w, off = {}, 0
    for name, shape in shapes:
        if shape:
            n = int(np.prod(shape))
            w[name] = p[off:off + n].reshape(shape)
            off += n
    assert off == p.size, f"{path}: {p.size} parameters, the layout needs {off}"
    return a, w


def hf_names(a, w):
    """Our tensors under transformers' names: nn.Linear keeps (out, in) as we do; q, k, v are rows of our qkv."""
    V, HS = a["V"], a["C"] // a["NH"]
    q, k = a["NH"] * HS, a["NKV"] * HS
    t = {"model.embed_tokens.weight": w["wte"][:V], "model.norm.weight": w["lnfw"]}
    if not a["tied"]:
        t["lm_head.weight"] = w["lmhead"][:V]
    for i in range(a["L"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"], t[p + "post_attention_layernorm.weight"] = w["ln1w"][i], w["ln2w"][i]
        for kind, sl in (("q", slice(0, q)), ("k", slice(q, q + k)), ("v", slice(q + k, q + 2 * k))):
            t[p + f"self_attn.{kind}_proj.weight"] = w["qkvw"][i][sl]
            if a["bias"]:
                t[p + f"self_attn.{kind}_proj.bias"] = w["qkvb"][i][sl]
        t[p + "self_attn.o_proj.weight"] = w["attprojw"][i]
        t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"] = w["fcgw"][i], w["fcw"][i]
        t[p + "mlp.down_proj.weight"] = w["fcprojw"][i]
        if a["bias"]:
            t[p + "self_attn.o_proj.bias"], t[p + "mlp.down_proj.bias"] = w["attprojb"][i], w["fcprojb"][i]
            t[p + "mlp.gate_proj.bias"], t[p + "mlp.up_proj.bias"] = w["fcgb"][i], w["fcb"][i]
        if a["qk_norm"]:
            t[p + "self_attn.q_norm.weight"], t[p + "self_attn.k_norm.weight"] = w["qnormw"][i], w["knormw"][i]
    return t


def cmd_tensors(ck, st):
    from safetensors.numpy import load_file
    a, w = read_checkpoint(ck)
    want, got = hf_names(a, w), load_file(st)
    assert set(got) == set(want), f"extra {sorted(set(got) - set(want))[:4]}, missing {sorted(set(want) - set(got))[:4]}"
    for k, v in want.items():
        assert got[k].dtype == np.float32 and got[k].shape == v.shape and np.array_equal(got[k], v), f"{k} differs"
    print(f"{len(want)} tensors equal")


def cmd_config(folder, ck):
    a, _ = read_checkpoint(ck)
    c = json.load(open(os.path.join(folder, "config.json")))
    qwen3 = bool(a["qk_norm"])
    want = {"architectures": ["Qwen3ForCausalLM" if qwen3 else "LlamaForCausalLM"], "model_type": "qwen3" if qwen3 else "llama",
            "vocab_size": a["V"], "hidden_size": a["C"], "intermediate_size": a["F"], "num_hidden_layers": a["L"],
            "num_attention_heads": a["NH"], "num_key_value_heads": a["NKV"], "head_dim": a["C"] // a["NH"],
            "max_position_embeddings": a["maxT"], "hidden_act": "silu", "rope_theta": a["theta"],
            "rope_parameters": {"rope_theta": a["theta"], "rope_type": "default"}, "tie_word_embeddings": bool(a["tied"]),
            "attention_bias": bool(a["bias"]), "bos_token_id": 50256, "eos_token_id": 50256, "torch_dtype": "float32"}
    if qwen3:
        want.update(use_sliding_window=False, layer_types=["full_attention"] * a["L"])
    else:
        want["mlp_bias"] = bool(a["bias"])
    bad = {k: (c.get(k), v) for k, v in want.items() if c.get(k) != v}
    assert not bad, f"config.json differs (got, want): {bad}"
    assert np.float32(c["rms_norm_eps"]) == np.float32(a["eps"]), f"rms_norm_eps {c['rms_norm_eps']} vs {a['eps']}"
    text = open(os.path.join(folder, "config.json")).read()
    assert "e-07" not in text and "99999" not in text, "a number is not written in its shortest form"
    print(f"{len(want) + 1} fields agree")


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope(x, theta):
    """transformers' Llama: inv_freq = theta^(-2i/D), angle p * inv_freq for both halves, x cos + rotate_half(x) sin."""
    T, D = x.shape[-2], x.shape[-1]
    ang = np.arange(T)[:, None] * theta ** (-np.arange(0, D, 2) / D)[None, :]
    ang = np.concatenate([ang, ang], -1)
    rot = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], -1)
    return x * np.cos(ang) + rot * np.sin(ang)


def forward(t, c, ids):
    """LlamaForCausalLM's (and with q_norm, k_norm Qwen3ForCausalLM's) forward, float64, from config.json alone."""
    g = lambda k: t[k].astype(np.float64)
    b = lambda k: t[k].astype(np.float64) if k in t else 0.0
    NH, NKV, D, eps, T = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["rms_norm_eps"], len(ids)
    theta = c["rope_parameters"]["rope_theta"]
    x = g("model.embed_tokens.weight")[ids]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, g(p + "input_layernorm.weight"), eps)
        proj = lambda n, heads: (h @ g(p + f"self_attn.{n}_proj.weight").T + b(p + f"self_attn.{n}_proj.bias")).reshape(T, heads, D).transpose(1, 0, 2)
        q, k, v = proj("q", NH), proj("k", NKV), proj("v", NKV)
        if p + "self_attn.q_norm.weight" in t:
            q, k = rms(q, g(p + "self_attn.q_norm.weight"), eps), rms(k, g(p + "self_attn.k_norm.weight"), eps)
        q, k = rope(q, theta), rope(k, theta)
        k, v = np.repeat(k, NH // NKV, axis=0), np.repeat(v, NH // NKV, axis=0)   # repeat_kv: kv head j serves j*G..
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        y = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(T, NH * D)
        x = x + y @ g(p + "self_attn.o_proj.weight").T + b(p + "self_attn.o_proj.bias")
        h = rms(x, g(p + "post_attention_layernorm.weight"), eps)
        gate = h @ g(p + "mlp.gate_proj.weight").T + b(p + "mlp.gate_proj.bias")
        up = h @ g(p + "mlp.up_proj.weight").T + b(p + "mlp.up_proj.bias")
        x = x + (gate / (1 + np.exp(-gate)) * up) @ g(p + "mlp.down_proj.weight").T + b(p + "mlp.down_proj.bias")
    x = rms(x, g("model.norm.weight"), eps)
    head = "model.embed_tokens.weight" if c["tie_word_embeddings"] else "lm_head.weight"
    return x @ g(head).T


def cmd_forward(folder, logits_path, *ids):
    from safetensors.numpy import load_file
    c = json.load(open(os.path.join(folder, "config.json")))
    ids = [int(i) for i in ids]
    ref = forward(load_file(os.path.join(folder, "model.safetensors")), c, ids)
    ours = np.fromfile(logits_path, dtype=np.float32).reshape(len(ids), c["vocab_size"])
    err = np.abs(ours - ref).max()
    assert err < 1e-4, f"largest difference {err:.3g} (logits up to {np.abs(ref).max():.3g})"
    print(f"largest difference {err:.2g}")


def save(path, tensors):
    from safetensors.numpy import save_file
    save_file(tensors, path, metadata={"format": "pt"})


def cmd_shard(folder, out):
    """As transformers shards a tied model: two files and an index, lm_head.weight (equal to embed_tokens) and the
    rotary inv_freq buffers older versions saved."""
    from safetensors.numpy import load_file
    t = load_file(os.path.join(folder, "model.safetensors"))
    c = json.load(open(os.path.join(folder, "config.json")))
    os.makedirs(out, exist_ok=True)
    a = {k: v for k, v in t.items() if ".layers.0." in k or "embed" in k}
    b = {k: v for k, v in t.items() if k not in a}
    a["model.layers.0.self_attn.rotary_emb.inv_freq"] = np.ones(c["head_dim"] // 2, dtype=np.float32)
    b["lm_head.weight"] = t["model.embed_tokens.weight"]
    save(os.path.join(out, "model-00001-of-00002.safetensors"), a)
    save(os.path.join(out, "model-00002-of-00002.safetensors"), b)
    wm = {k: "model-00001-of-00002.safetensors" for k in a}
    wm.update({k: "model-00002-of-00002.safetensors" for k in b})
    json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, open(os.path.join(out, "model.safetensors.index.json"), "w"))
    json.dump(c, open(os.path.join(out, "config.json"), "w"))


def cmd_variant(folder, out, mode):
    """The folder with its config.json or tensors changed into what our model cannot run."""
    from safetensors.numpy import load_file
    t = load_file(os.path.join(folder, "model.safetensors"))
    c = json.load(open(os.path.join(folder, "config.json")))
    os.makedirs(out, exist_ok=True)
    if mode == "act":
        c["hidden_act"] = "gelu"
    elif mode == "scaling":
        c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0}
    elif mode == "mixed_bias":
        c["attention_bias"] = True
    elif mode == "head_dim":
        c["head_dim"] = 2 * c["head_dim"]
    elif mode == "sliding":
        c["use_sliding_window"] = True
    elif mode == "qwen_bias":
        c["attention_bias"] = True
    elif mode == "no_lm_head":
        del t["lm_head.weight"]
    elif mode == "lm_head_differs":
        t["lm_head.weight"] = t["model.embed_tokens.weight"] + 1
    elif mode == "missing_k":
        del t["model.layers.1.self_attn.k_proj.weight"]
    elif mode == "extra_bias":
        t["model.layers.0.self_attn.q_proj.bias"] = np.zeros(t["model.layers.0.self_attn.q_proj.weight"].shape[0], np.float32)
    elif mode == "kv_heads":
        c["num_key_value_heads"] = 3
    save(os.path.join(out, "model.safetensors"), t)
    json.dump(c, open(os.path.join(out, "config.json"), "w"))


if __name__ == "__main__":
    try:
        globals()["cmd_" + sys.argv[1]](*sys.argv[2:])
    except AssertionError as e:
        print(f"FAILED: {e}")
        sys.exit(1)
PY
py() { python3 "$WORK/check.py" "$@"; }
TOKS="50256 464 2068 7586 21831 18045 625 262 16931 3290 13 198 40 1101 257 1332"
greedy() { "$GPT2GEN" sample --checkpoint "$1" --backend cpu --temperature 0 --tokens 12 --prompt "The" 2>/dev/null; }

for m in llama llamab qwen3; do
    HF=$WORK/hf-$m
    out=$("$GPT2GEN" export --checkpoint "$(ck $m)" --to "$HF" --tokenizer data/fortunes/tokenizer.bin 2> "$WORK/err"); rc=$?
    cls=LlamaForCausalLM; [ $m = qwen3 ] && cls=Qwen3ForCausalLM
    if [ $rc -eq 0 ] && [ ! -s "$WORK/err" ] && [ -s "$HF/model.safetensors" ] && [ -s "$HF/vocab.json" ] &&
       grep -q "\"$cls\"" "$HF/config.json"; then ok "${m}_export_as_$cls"
    else fail "${m}_export_as_$cls" "rc=$rc $out $(cat "$WORK/err")"; fi
    if [ $PY_OK -eq 1 ]; then
        r=$(py config "$HF" "$(ck $m)" 2>&1) && ok "${m}_config_json" "$r" || fail "${m}_config_json" "$r"
        r=$(py tensors "$(ck $m)" "$HF/model.safetensors" 2>&1) && ok "${m}_tensor_names_and_values" "$r" || fail "${m}_tensor_names_and_values" "$r"
        if "$DUMP" "$(ck $m)" "$WORK/logits.f32" $TOKS 2> "$WORK/err" && r=$(py forward "$HF" "$WORK/logits.f32" $TOKS 2>&1)
        then ok "${m}_logits_equal_numpy_$cls" "$r"; else fail "${m}_logits_equal_numpy_$cls" "$(cat "$WORK/err") $r"; fi
    fi
    "$GPT2GEN" import "$HF" -o "$WORK/back-$m.bin" > "$WORK/out" 2> "$WORK/err"; rc=$?
    if [ $rc -eq 0 ] && cmp -s "$(ck $m)" "$WORK/back-$m.bin" && grep -q "$cls" "$WORK/out"; then ok "${m}_import_same_bytes"
    else fail "${m}_import_same_bytes" "rc=$rc $(cat "$WORK/out" "$WORK/err")"; fi
    a=$(greedy "$(ck $m)"); b=$(greedy "$WORK/back-$m.bin")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "${m}_import_same_greedy_text"; else fail "${m}_import_same_greedy_text" "'$a' vs '$b'"; fi
done

# bf16: exported and imported as bf16, the checkpoint's bf16 rounding of itself
"$GPT2GEN" export --checkpoint "$(ck llama)" --to "$WORK/hfb" --dtype bf16 > /dev/null 2>&1 &&
    "$GPT2GEN" import "$WORK/hfb" -o "$WORK/b1.bin" --dtype bf16 > /dev/null 2>&1 &&
    "$GPT2GEN" export --checkpoint "$WORK/b1.bin" --to "$WORK/hfb2" --dtype bf16 > /dev/null 2>&1 &&
    "$GPT2GEN" import "$WORK/hfb2" -o "$WORK/b2.bin" --dtype bf16 > /dev/null 2>&1 &&
    [ "$(od -An -t d4 -j 4 -N 4 "$WORK/b1.bin" | tr -d ' ')" = 1005 ] && cmp -s "$WORK/b1.bin" "$WORK/b2.bin" &&
    grep -q '"torch_dtype": "bfloat16"' "$WORK/hfb/config.json" && ok llama_bf16_round_trip || fail llama_bf16_round_trip "$(ls -la "$WORK"/b*.bin 2>&1)"

expect() {   # NAME PATTERN -- command...: exit 1, one line on stderr matching, nothing written
    name=$1 pat=$2; shift 3
    rm -rf "$WORK/x.bin" "$WORK/xdir"
    "$@" > "$WORK/o" 2> "$WORK/e"; rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l < "$WORK/e")" -eq 1 ] && grep -q -- "$pat" "$WORK/e" && [ ! -s "$WORK/o" ] &&
       [ ! -e "$WORK/x.bin" ] && [ ! -e "$WORK/xdir/config.json" ]; then ok "$name"
    else fail "$name" "rc=$rc, stderr: $(cat "$WORK/e"), stdout: $(head -c 200 "$WORK/o")"; fi
}
exp() { "$GPT2GEN" export --checkpoint "$(ck "$1")" --to "$WORK/xdir"; }
expect refuse_relu2_softcap 'no transformers class holds this model (mlp = "relu2", logit_softcap = 15)' -- exp nano
expect refuse_layernorm_rope 'no transformers class holds this model (norm = "layernorm")' -- exp lnrope
expect refuse_qk_norm_with_bias 'no transformers class holds this model (qk_norm = true with bias = true)' -- exp qwenbias
expect refuse_gpt2_untied 'no transformers class holds this model (norm = "layernorm", position = "learned", mlp = "gelu", tie_embeddings = false)' -- exp gpt2untied
if [ $PY_OK -eq 1 ]; then
    py shard "$WORK/hf-llamab" "$WORK/sharded"
    "$GPT2GEN" import "$WORK/sharded" -o "$WORK/sh.bin" > "$WORK/out" 2> "$WORK/err" && cmp -s "$(ck llamab)" "$WORK/sh.bin" &&
        grep -q ignored "$WORK/out" && ok llama_import_sharded_tied "$(cat "$WORK/out")" || fail llama_import_sharded_tied "$(cat "$WORK/out" "$WORK/err")"
    imp() { "$GPT2GEN" import "$WORK/v_$1" -o "$WORK/x.bin"; }
    for v in act scaling mixed_bias head_dim no_lm_head missing_k extra_bias kv_heads; do py variant "$WORK/hf-llama" "$WORK/v_$v" $v; done
    for v in sliding qwen_bias; do py variant "$WORK/hf-qwen3" "$WORK/v_$v" $v; done
    py variant "$WORK/hf-llamab" "$WORK/v_lm_head_differs" lm_head_differs
    C=config.json S=model.safetensors
    expect import_refuses_gelu "v_act/$C: \"hidden_act\" is gelu, expected \"silu\"" -- imp act
    expect import_refuses_rope_scaling "v_scaling/$C: \"rope_scaling\" asks for RoPE of type llama3" -- imp scaling
    expect import_refuses_mixed_biases "v_mixed_bias/$C: \"attention_bias\" is true but \"mlp_bias\" false" -- imp mixed_bias
    expect import_refuses_head_dim "v_head_dim/$C: \"head_dim\" is 32, but hidden_size / num_attention_heads is 64 / 4" -- imp head_dim
    expect import_refuses_kv_heads "v_kv_heads/$C: model.n_kv_head: 3 does not divide model.n_head 4" -- imp kv_heads
    expect import_refuses_sliding_window "v_sliding/$C: \"use_sliding_window\" is true, expected false" -- imp sliding
    expect import_refuses_qwen3_bias "v_qwen_bias/$C: \"attention_bias\" is true: Qwen3ForCausalLM's MLP has no biases" -- imp qwen_bias
    expect import_missing_lm_head "v_no_lm_head/$S: missing tensor lm_head.weight (shape \[50257, 64\]" -- imp no_lm_head
    expect import_missing_k_proj "v_missing_k/$S: missing tensor model.layers.1.self_attn.k_proj.weight (shape \[32, 64\]" -- imp missing_k
    expect import_unexpected_bias "v_extra_bias/$S: tensor model.layers.0.self_attn.q_proj.bias is not part of the LlamaForCausalLM" -- imp extra_bias
    expect import_tied_lm_head_differs "v_lm_head_differs/$S: lm_head.weight differs from model.embed_tokens.weight" -- imp lm_head_differs
fi
finish
