/* nocuda: the stand-in for a test program that needs the CUDA toolkit's headers (tests/test_attention.c,
   tests/test_tune.c: cuDNN's and tune/'s GPU declarations), in a gpt2gen built without them (the Makefile builds
   it under that test's name, TEST_NAME). It skips, saying why, so that `make test` runs on such a machine. */
#include "tune/report.h"
#include "runtime/gpu.h"

#ifndef TEST_NAME
#define TEST_NAME "this test"
#endif

int main(void) {
    Err why;
    cuda_backend_built(&why);
    report_skip(TEST_NAME, "%s", why.msg);
    return report_summary();
}
