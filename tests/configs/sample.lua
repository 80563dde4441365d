-- The micro model with a context of 96: room for a prompt and a 64-token continuation (tests/test_sample.c).
base "micro.lua"
name = "sample"
model = { max_seq_len = 96 }
