/* serving_check: runs an exported bert_tf model with no Python.
 *
 * Loads the tf-text op libraries (TF_LoadLibrary), then the SavedModel
 * (TF_LoadSessionFromSavedModel, tag "serve"), feeds strings to the
 * serving_default signature and prints one line per input:
 *     LABEL<TAB>P0 P1 ...        (classification: label, probabilities)
 *     score<TAB>VALUE            (regression)
 *     NAME=VALUE<TAB>...         (other kinds: every [batch] output, and
 *                                 each [batch, K] float output as
 *                                 NAME=V1,V2,...)
 * Signature tensor names come from assets.extra/signature_tensors.txt,
 * written by `bert-tf export` (C has no SavedModel proto parser).
 *
 * Build against the TF C API shipped in the tensorflow wheel:
 *   TF=$(python -c 'import tensorflow, os; print(os.path.dirname(tensorflow.__file__))')
 *   gcc -O1 -o serving_check export/serving_check.c -I$TF/include -L$TF \
 *     -l:libtensorflow_cc.so.2 -l:libtensorflow_framework.so.2 -Wl,-rpath,$TF
 * Run:
 *   ./serving_check -l .../tensorflow_text/python/ops/_fast_wordpiece_tokenizer.so \
 *     [-l LIB ...] [-t TIMEOUT_MS] export/rt_sentiment/1 "a fine film" "dull"
 * -t runs the request with RunOptions.timeout_in_ms, as TF Serving does
 * with a gRPC call's deadline: past it, the program prints
 * DEADLINE_EXCEEDED and exits with status 4.
 * For pair models each text is "TEXT_A<TAB>TEXT_B"; for QA models
 * "QUESTION<TAB>CONTEXT"; for multiple choice "CONTEXT<TAB>CHOICE<TAB>..."
 * (as many choices in every text as in the first).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/c/c_api.h"
#include "tensorflow/c/tf_tstring.h"

#include "run_options.h"

#define MAX_TENSORS 16

typedef struct {
  char name[64];
  char op[256];
  int index;
} SignatureTensor;

static void check(TF_Status* status, const char* what) {
  if (TF_GetCode(status) == TF_DEADLINE_EXCEEDED) {
    fprintf(stderr, "serving_check: %s: DEADLINE_EXCEEDED: %s\n", what,
            TF_Message(status));
    exit(4);
  }
  if (TF_GetCode(status) != TF_OK) {
    fprintf(stderr, "serving_check: %s: %s\n", what, TF_Message(status));
    exit(1);
  }
}

/* RunOptions holding only timeout_in_ms (run_options.h). */
static TF_Buffer* run_options_with_timeout(long long timeout_ms) {
  unsigned char bytes[RUN_OPTIONS_MAX_BYTES];
  size_t size = run_options_timeout_bytes(timeout_ms, bytes);
  return TF_NewBufferFromString(bytes, size);
}

static int read_signature(const char* export_dir, SignatureTensor* inputs,
                          int* n_inputs, SignatureTensor* outputs,
                          int* n_outputs) {
  char path[4096], kind[16], name[64], tensor[300];
  snprintf(path, sizeof(path), "%s/assets.extra/signature_tensors.txt",
           export_dir);
  FILE* f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "serving_check: cannot open %s\n", path);
    return 0;
  }
  *n_inputs = *n_outputs = 0;
  while (fscanf(f, "%15s %63s %299s", kind, name, tensor) == 3) {
    int is_input = strcmp(kind, "input") == 0;
    SignatureTensor* t = is_input ? &inputs[(*n_inputs)++]
                                  : &outputs[(*n_outputs)++];
    char* colon = strrchr(tensor, ':');
    t->index = colon ? atoi(colon + 1) : 0;
    if (colon) *colon = '\0';
    snprintf(t->name, sizeof(t->name), "%s", name);
    snprintf(t->op, sizeof(t->op), "%s", tensor);
    if (*n_inputs >= MAX_TENSORS || *n_outputs >= MAX_TENSORS) break;
  }
  fclose(f);
  return *n_inputs > 0 && *n_outputs > 0;
}

static TF_Output find(TF_Graph* graph, const SignatureTensor* t) {
  TF_Output out = {TF_GraphOperationByName(graph, t->op), t->index};
  if (!out.oper) {
    fprintf(stderr, "serving_check: no operation %s in the graph\n", t->op);
    exit(1);
  }
  return out;
}

/* Column `column` (0: text, 1: text_b) of each "A<TAB>B" argument. */
static TF_Tensor* string_tensor(char** texts, int n, int column) {
  int64_t dims[1] = {n};
  TF_Tensor* tensor =
      TF_AllocateTensor(TF_STRING, dims, 1, (size_t)n * sizeof(TF_TString));
  TF_TString* data = (TF_TString*)TF_TensorData(tensor);
  for (int i = 0; i < n; ++i) {
    const char* text = texts[i];
    const char* tab = strchr(text, '\t');
    const char* start = column == 0 ? text : (tab ? tab + 1 : "");
    size_t length = column == 0 && tab ? (size_t)(tab - text) : strlen(start);
    TF_StringInit(&data[i]);
    TF_StringCopy(&data[i], start, length);
  }
  return tensor;
}

/* [n, C] choices: the tab-separated fields after the first of each
 * argument, C the number of tabs in the first one ("" where missing). */
static TF_Tensor* choices_tensor(char** texts, int n) {
  int c = 0;
  for (const char* p = texts[0]; (p = strchr(p, '\t')); ++p) ++c;
  int64_t dims[2] = {n, c};
  TF_Tensor* tensor = TF_AllocateTensor(TF_STRING, dims, 2,
                                        (size_t)n * c * sizeof(TF_TString));
  TF_TString* data = (TF_TString*)TF_TensorData(tensor);
  for (int i = 0; i < n; ++i) {
    const char* field = strchr(texts[i], '\t');
    for (int j = 0; j < c; ++j) {
      const char* start = field ? field + 1 : "";
      const char* end = field ? strchr(start, '\t') : NULL;
      size_t length = end ? (size_t)(end - start) : strlen(start);
      TF_StringInit(&data[i * c + j]);
      TF_StringCopy(&data[i * c + j], start, length);
      field = end;
    }
  }
  return tensor;
}

int main(int argc, char** argv) {
  TF_Status* status = TF_NewStatus();
  int arg = 1;
  long long timeout_ms = 0;
  while (arg + 1 < argc && (strcmp(argv[arg], "-l") == 0 ||
                            strcmp(argv[arg], "-t") == 0)) {
    if (strcmp(argv[arg], "-t") == 0) {
      timeout_ms = atoll(argv[arg + 1]);
    } else {
      TF_LoadLibrary(argv[arg + 1], status);
      check(status, argv[arg + 1]);
    }
    arg += 2;
  }
  if (arg >= argc) {
    fprintf(stderr, "usage: %s [-l OP_LIBRARY.so]... [-t TIMEOUT_MS] "
            "EXPORT_DIR TEXT...\n", argv[0]);
    return 2;
  }
  const char* export_dir = argv[arg++];
  char** texts = argv + arg;
  int n = argc - arg;

  SignatureTensor inputs[MAX_TENSORS], outputs[MAX_TENSORS];
  int n_inputs, n_outputs;
  if (!read_signature(export_dir, inputs, &n_inputs, outputs, &n_outputs))
    return 1;

  TF_Graph* graph = TF_NewGraph();
  TF_SessionOptions* options = TF_NewSessionOptions();
  const char* tags[] = {"serve"};
  TF_Session* session = TF_LoadSessionFromSavedModel(
      options, NULL, export_dir, tags, 1, graph, NULL, status);
  check(status, export_dir);

  TF_Output feeds[MAX_TENSORS], fetches[MAX_TENSORS];
  TF_Tensor* feed_values[MAX_TENSORS];
  TF_Tensor* fetch_values[MAX_TENSORS] = {0};
  int multiple_choice = 0;
  for (int i = 0; i < n_inputs; ++i)
    if (strcmp(inputs[i].name, "choices") == 0) multiple_choice = 1;
  for (int i = 0; i < n_inputs; ++i) {
    feeds[i] = find(graph, &inputs[i]);
    if (strcmp(inputs[i].name, "choices") == 0) {
      feed_values[i] = choices_tensor(texts, n);
      continue;
    }
    int second = strcmp(inputs[i].name, "text_b") == 0 ||
                 (strcmp(inputs[i].name, "context") == 0 && !multiple_choice);
    feed_values[i] = string_tensor(texts, n, second);
  }
  for (int i = 0; i < n_outputs; ++i) fetches[i] = find(graph, &outputs[i]);
  TF_Buffer* run_options =
      timeout_ms > 0 ? run_options_with_timeout(timeout_ms) : NULL;
  TF_SessionRun(session, run_options, feeds, feed_values, n_inputs, fetches,
                fetch_values, n_outputs, NULL, 0, NULL, status);
  if (run_options) TF_DeleteBuffer(run_options);
  check(status, "serving_default");

  int label = -1, probabilities = -1, score = -1;
  for (int i = 0; i < n_outputs; ++i) {
    if (strcmp(outputs[i].name, "label") == 0) label = i;
    if (strcmp(outputs[i].name, "probabilities") == 0) probabilities = i;
    if (strcmp(outputs[i].name, "score") == 0) score = i;
  }
  /* Classifiers: label + probabilities; regression: score + logits. */
  int generic = label < 0 && !(score >= 0 && n_outputs == 2);
  for (int row = 0; row < n && generic; ++row) {
    for (int i = 0, printed = 0; i < n_outputs; ++i) {
      TF_Tensor* t = fetch_values[i];
      if (TF_NumDims(t) == 2 && TF_TensorType(t) == TF_FLOAT) {
        int k = (int)TF_Dim(t, 1);
        const float* v = (const float*)TF_TensorData(t) + (size_t)row * k;
        printf(printed++ ? "\t%s=" : "%s=", outputs[i].name);
        for (int j = 0; j < k; ++j) printf(j ? ",%.9g" : "%.9g", v[j]);
        continue;
      }
      if (TF_NumDims(t) != 1) continue;
      printf(printed++ ? "\t%s=" : "%s=", outputs[i].name);
      switch (TF_TensorType(t)) {
        case TF_STRING: {
          const TF_TString* s = (const TF_TString*)TF_TensorData(t) + row;
          printf("%.*s", (int)TF_StringGetSize(s), TF_StringGetDataPointer(s));
          break;
        }
        case TF_FLOAT: printf("%.9g", ((float*)TF_TensorData(t))[row]); break;
        case TF_INT32: printf("%d", ((int*)TF_TensorData(t))[row]); break;
        case TF_BOOL: printf("%d", ((unsigned char*)TF_TensorData(t))[row]); break;
        default: printf("?");
      }
    }
    printf("\n");
  }
  for (int row = 0; row < n && !generic; ++row) {
    if (score >= 0) {
      printf("score\t%.9g\n", ((float*)TF_TensorData(fetch_values[score]))[row]);
      continue;
    }
    const TF_TString* names = (const TF_TString*)TF_TensorData(fetch_values[label]);
    int k = (int)TF_Dim(fetch_values[probabilities], 1);
    const float* p = (const float*)TF_TensorData(fetch_values[probabilities]);
    printf("%.*s\t", (int)TF_StringGetSize(&names[row]),
           TF_StringGetDataPointer(&names[row]));
    for (int j = 0; j < k; ++j) printf(j ? " %.9g" : "%.9g", p[row * k + j]);
    printf("\n");
  }

  for (int i = 0; i < n_inputs; ++i) TF_DeleteTensor(feed_values[i]);
  for (int i = 0; i < n_outputs; ++i) TF_DeleteTensor(fetch_values[i]);
  TF_CloseSession(session, status);
  TF_DeleteSession(session, status);
  TF_DeleteSessionOptions(options);
  TF_DeleteGraph(graph);
  TF_DeleteStatus(status);
  return 0;
}
