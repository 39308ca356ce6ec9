/* The serialized RunOptions that serving_check sends with -t: only
 * timeout_in_ms (field 2, a varint), as TF Serving sets it from a gRPC
 * call's deadline. No TensorFlow here, so a harness can check the bytes
 * (tests/run_options_harness.c) without a model or the C API.
 */
#ifndef BERT_TF_RUN_OPTIONS_H_
#define BERT_TF_RUN_OPTIONS_H_

#include <stddef.h>

/* The largest message: a tag byte and a 64-bit varint (10 bytes). */
#define RUN_OPTIONS_MAX_BYTES 11

/* Writes RunOptions{timeout_in_ms} into `bytes`; returns its size. */
static size_t run_options_timeout_bytes(long long timeout_ms,
                                        unsigned char* bytes) {
  size_t size = 0;
  unsigned long long value = (unsigned long long)timeout_ms;
  bytes[size++] = 2 << 3;
  do {
    bytes[size] = value & 0x7f;
    value >>= 7;
    if (value) bytes[size] |= 0x80;
    ++size;
  } while (value);
  return size;
}

#endif  /* BERT_TF_RUN_OPTIONS_H_ */
