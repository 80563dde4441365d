-- GPT-3 small, 125M parameters: GPT-2 124M's shape with a 2048-token context.
-- Data: defaults.lua's (llm.c's FineWeb shards); docs/data.md, "Data for the GPT-2 configs", says how to make
-- them, or a data set of your own text with gpt2gen prepare.
base "defaults.lua"
name = "gpt3-125M"
model = { n_layer = 12, n_head = 12, n_embd = 768, max_seq_len = 2048 }
train = { batch_size = 32, seq_len = 2048, lr = 6e-4 }
