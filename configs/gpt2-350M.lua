-- GPT-2 medium, 350M parameters (d24).
-- Data: defaults.lua's (llm.c's FineWeb shards); README.md, "Data for the GPT-2 configs", says how to make
-- them, or a data set of your own text with gpt2gen prepare.
base "defaults.lua"
name = "gpt2-350M"
model = { n_layer = 24, n_head = 16, n_embd = 1024 }
train = { batch_size = 32 }
