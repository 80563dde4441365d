-- GPT-2 XL, 1558M parameters (d48).
-- Data: defaults.lua's (llm.c's FineWeb shards); docs/data.md, "Data for the GPT-2 configs", says how to make
-- them, or a data set of your own text with gpt2gen prepare.
base "defaults.lua"
name = "gpt2-1558M"
model = { n_layer = 48, n_head = 25, n_embd = 1600 }
train = { batch_size = 8, lr = 2e-4 }
