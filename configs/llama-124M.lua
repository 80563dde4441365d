-- A Llama-shaped model at GPT-2 small's size (d12): RMSNorm, rotary positions, a SwiGLU MLP of 2048, grouped-query
-- attention (12 query heads, 4 key/value heads), no biases and an untied head (docs/model.md, "Architectures").
-- Data and recipe: defaults.lua's, as gpt2-124M.lua.
base "defaults.lua"
name = "llama-124M"
model = { n_layer = 12, n_head = 12, n_embd = 768, norm = "rmsnorm", position = "rope", rope_theta = 10000,
          mlp = "swiglu", n_ffn = 2048, n_kv_head = 4, bias = false, tie_embeddings = false }
