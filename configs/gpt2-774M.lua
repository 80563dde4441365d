-- GPT-2 large, 774M parameters (d36).
-- Data: defaults.lua's (llm.c's FineWeb shards); docs/data.md, "Data for the GPT-2 configs", says how to make
-- them, or a data set of your own text with gpt2gen prepare.
base "defaults.lua"
name = "gpt2-774M"
model = { n_layer = 36, n_head = 20, n_embd = 1280 }
train = { batch_size = 16, lr = 2.5e-4 }
