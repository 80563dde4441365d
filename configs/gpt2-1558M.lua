-- GPT-2 XL, 1558M parameters (d48).
base "defaults.lua"
name = "gpt2-1558M"
model = { n_layer = 48, n_head = 25, n_embd = 1600 }
train = { batch_size = 8, lr = 2e-4 }
