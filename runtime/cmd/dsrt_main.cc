// dsrt: the per-rank runtime. Dispatches to a subcommand (train, hello, comm-bench,
// prepare-data, ...) and maps escaping exceptions to exit codes (ConfigError 2, others 1).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "ds/config.h"
#include "runtime/cmd/check_command.h"
#include "runtime/cmd/comm_bench_command.h"
#include "runtime/cmd/command.h"
#include "runtime/cmd/dsrt_knobs.h"
#include "runtime/cmd/export_checkpoint_command.h"
#include "runtime/cmd/generate_command.h"
#include "runtime/cmd/hello_command.h"
#include "runtime/cmd/prepare_data_command.h"
#include "runtime/cmd/serve_command.h"
#include "runtime/cmd/train_command.h"
#include "runtime/tensor/blas_core.h"

namespace {

const ds::runtime::Command kCommands[] = {
    {"check", "validate a plan and its DeepSpeed config; print the effective config",
     ds::runtime::checkCommand},
    {"comm-bench", "collective bandwidth, nccl-tests style, with checked results",
     ds::runtime::commBenchCommand},
    {"export-checkpoint",
     "consolidated fp32 weights: safetensors, a Hugging Face folder, llm.c .bin",
     ds::runtime::exportCheckpointCommand},
    {"generate", "tokens from a trained GPT-2 (checkpoint or llm.c .bin), KV-cached",
     ds::runtime::generateCommand},
    {"hello", "print this rank's environment and join every rank through the store",
     ds::runtime::helloCommand},
    {"prepare-data", "text to llm.c token shards (train/val), byte-level or GPT-2 BPE",
     ds::runtime::prepareDataCommand},
    {"serve", "OpenAI-style /v1/completions over HTTP, continuous batching (one rank)",
     ds::runtime::serveCommand},
    {"train", "run a training plan (the built-in plan without a file)", ds::runtime::trainCommand},
    {"version", "print the version",
     [](int, char**) {
       std::printf("dsrt %s\n", DS_VERSION);
       return 0;
     }},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: dsrt <command> [args...]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-18s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\nRun 'dsrt <command> --help' for a command's options, and 'dsrt --help-env'\n"
               "for the environment variables dsrt reads (docs/knobs.md).\n");
}

}  // namespace

int main(int argc, char** argv) {
  ds::runtime::reexecForBlasCore(argv);  // before anything runs: OpenBLAS reads it at load
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--help-env")) {
    std::printf("Environment variables dsrt reads (docs/knobs.md):\n\n%s",
                ds::knobsHelpText(ds::runtime::kDsrtKnobTables, ds::kReadByDsrt).c_str());
    return 0;
  }
  if (!std::strcmp(argv[1], "--version")) argv[1] = const_cast<char*>("version");
  for (const auto& c : kCommands) {
    if (std::string(argv[1]) != c.name) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const ds::Error& e) {
      DS_LOG_ERROR("dsrt", "{}: {}", e.kind(), e.what());
      return ds::exitCodeFor(e);
    } catch (const std::exception& e) {
      DS_LOG_ERROR("dsrt", "unexpected error: {}", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "dsrt: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
