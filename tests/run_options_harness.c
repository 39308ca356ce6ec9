/* Prints, for each timeout in ms given, the RunOptions bytes that
 * export/serving_check.c sends with -t, in hex, one line each: the
 * request encoding checked without a model (tests/test_limits.py). */
#include <stdio.h>
#include <stdlib.h>

#include "../export/run_options.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    unsigned char bytes[RUN_OPTIONS_MAX_BYTES];
    size_t size = run_options_timeout_bytes(atoll(argv[i]), bytes);
    for (size_t j = 0; j < size; ++j) printf("%02x", bytes[j]);
    printf("\n");
  }
  return 0;
}
