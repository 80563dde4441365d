-- GPT-2 medium, 350M parameters (d24).
-- Data: defaults.lua's (llm.c's FineWeb shards); docs/data.md, "Data for the GPT-2 configs", says how to make
-- them, or a data set of your own text with gpt2gen prepare.
base "defaults.lua"
name = "gpt2-350M"
model = { n_layer = 24, n_head = 16, n_embd = 1024 }
-- recompute = 2: the LayerNorm outputs are not kept (3 GiB less at B=32: 23.4 GiB against 26.2 on the H200) and the
-- LayerNorm backward makes them again, 0.35% of the step's speed (docs/kernels-and-tuning.md)
train = { batch_size = 32, recompute = 2 }
