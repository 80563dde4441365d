-- Shared defaults for the GPT-2 configs in this folder (llm.c's GPT-2 recipe).
-- A config builds on this with `base "defaults.lua"` and then sets the model shape.
precision = "bf16"
model = { max_seq_len = 1024, vocab_size = 50257 }
train = {
  batch_size = 64, seq_len = 1024, total_batch_size = 524288,   -- 0.5M tokens per step
  steps = 10000, lr = 6e-4, schedule = "cosine", warmup = 700, final_lr_frac = 0.0,
  weight_decay = 0.1, grad_clip = 1.0, seed = 1337, recompute = 1,
}
-- llm.c's FineWeb shards (its dev/data/fineweb.py) and tokenizer file. For your own text:
--   gpt2gen prepare my_texts/ corpus.jsonl -o data/mine
-- then --set 'data.train=data/mine/train_*.bin' --set 'data.val=data/mine/val_*.bin'
-- --set data.tokenizer=data/mine/tokenizer.bin (docs/data.md, "Data for the GPT-2 configs", also says how
-- to make FineWeb's and TinyStories'). Without validation shards, training goes on without validation.
data = { train = "data/fineweb10B/fineweb_train_*.bin", val = "data/fineweb10B/fineweb_val_*.bin",
         tokenizer = "data/gpt2_tokenizer.bin" }
eval = { val_every = 250, val_batches = 20, sample_every = 1000, sample_tokens = 64 }
checkpoint = { every = 1000 }
