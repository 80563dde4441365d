-- GPT-2 small, 124M parameters (d12).
-- Data: defaults.lua's (llm.c's FineWeb shards); docs/data.md, "Data for the GPT-2 configs", says how to make
-- them, or a data set of your own text with gpt2gen prepare.
base "defaults.lua"
name = "gpt2-124M"
model = { n_layer = 12, n_head = 12, n_embd = 768 }
