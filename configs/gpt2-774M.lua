-- GPT-2 large, 774M parameters (d36).
base "defaults.lua"
name = "gpt2-774M"
model = { n_layer = 36, n_head = 20, n_embd = 1280 }
train = { batch_size = 16, lr = 2.5e-4 }
