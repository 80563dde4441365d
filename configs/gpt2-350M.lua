-- GPT-2 medium, 350M parameters (d24).
base "defaults.lua"
name = "gpt2-350M"
model = { n_layer = 24, n_head = 16, n_embd = 1024 }
train = { batch_size = 32 }
