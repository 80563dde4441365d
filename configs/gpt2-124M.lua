-- GPT-2 small, 124M parameters (d12).
base "defaults.lua"
name = "gpt2-124M"
model = { n_layer = 12, n_head = 12, n_embd = 768 }
