-- A model small enough for the CPU tests of the training loop: a few steps take seconds.
base "../../configs/tiny.lua"
name = "micro"
model = { n_layer = 2, n_head = 2, n_embd = 64, max_seq_len = 32 }
train = { batch_size = 4, seq_len = 32, total_batch_size = 256, steps = 8, warmup = 2, lr = 3e-3 }
eval = { val_every = 4, val_batches = 2, sample_every = 0, sample_tokens = 8 }
checkpoint = { every = 0 }
