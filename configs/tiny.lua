-- A tiny GPT-2 that trains on a CPU in minutes, on the default data set (fortunes; `make data`).
name = "tiny"
precision = "fp32"
model = { n_layer = 4, n_head = 4, n_embd = 128, max_seq_len = 64, vocab_size = 50257 }
train = {
  batch_size = 8, seq_len = 64, total_batch_size = 512, steps = 300,
  lr = 1e-3, schedule = "cosine", warmup = 20, final_lr_frac = 0.1, weight_decay = 0.0, seed = 1337,
}
data = { train = "data/fortunes/train_*.bin", val = "data/fortunes/val_*.bin", tokenizer = "data/fortunes/tokenizer.bin" }
eval = { val_every = 50, val_batches = 8, sample_every = 100, sample_tokens = 48 }
checkpoint = { every = 100 }
