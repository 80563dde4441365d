-- A model in nanochat's style at its d12 size: 12 layers of 768 channels in 6 heads of 128, rotary positions, a ReLU^2
-- MLP, QK-norm, RMSNorm, no biases, an untied head and the logits soft-capped at 15 (docs/model.md, "Architectures").
-- Data and recipe: defaults.lua's, as gpt2-124M.lua.
base "defaults.lua"
name = "nanochat-d12"
model = { n_layer = 12, n_head = 6, n_embd = 768, norm = "rmsnorm", position = "rope", mlp = "relu2", qk_norm = true,
          bias = false, tie_embeddings = false, logit_softcap = 15 }
